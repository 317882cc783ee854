"""asyncio HTTP/1.x connection protocol shared by the virtual hosts and control.

Requests on one connection are answered strictly in order by a per-connection
task, so a slow handler (asyncio.sleep) delays only its own connection.
"""

from __future__ import annotations

import asyncio
import sys
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Protocol, cast

from scrapy_politeness._sitefarm.httpwire import (
    BadRequest,
    Request,
    RequestReader,
    Response,
    encode_response,
)


@dataclass(frozen=True)
class ConnInfo:
    """Identity of a TCP connection: farm-wide id and the local IP it hit."""

    id: int
    ip: str


class Handler(Protocol):
    """What an HTTP endpoint implements."""

    def new_conn_id(self) -> int:
        """Id for a freshly accepted connection."""
        ...

    async def handle(self, req: Request, conn: ConnInfo) -> Response:
        """Answer one well-formed request."""
        ...

    def bad_request(self, bad: BadRequest, conn: ConnInfo) -> Response:
        """Answer an unparsable request (the connection is closed afterwards)."""
        ...

    def setup_delay(self, req: Request) -> float:
        """How long a new connection takes to set up before ``req``, its first, is read."""
        ...


class HttpConnection(asyncio.Protocol):
    """One accepted TCP connection."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._reader = RequestReader()
        self._queue: deque[Request | BadRequest] = deque()
        self._transport: asyncio.Transport | None = None
        self._worker: asyncio.Task[None] | None = None
        self._conn = ConnInfo(0, "")
        self._finished = False  # set once we decided to close; later bytes are ignored
        self._fresh = True  # no request handled yet: the connection's set-up is still due

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        sockname = transport.get_extra_info("sockname")
        ip = str(sockname[0]) if sockname else ""
        self._conn = ConnInfo(self._handler.new_conn_id(), ip)

    def data_received(self, data: bytes) -> None:
        # Stamp first: this is the measurement the whole farm exists for.
        t, wall = time.monotonic(), time.time()
        if self._finished:
            return
        items = self._reader.feed(data, t, wall)
        if not items:
            return
        self._queue.extend(items)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._drain())

    def connection_lost(self, exc: Exception | None) -> None:
        # Let an in-flight handler finish so its arrival is still recorded.
        self._transport = None

    async def _drain(self) -> None:
        while self._queue:
            item = self._queue.popleft()
            if isinstance(item, BadRequest):
                self._send(self._handler.bad_request(item, self._conn), False, False)
                self._queue.clear()
                return
            if self._fresh:
                self._fresh = False
                await self._set_up(item)
            try:
                resp = await self._handler.handle(item, self._conn)
            except Exception:  # a handler bug must not kill the connection silently
                traceback.print_exc(file=sys.stderr)
                resp = Response(500, b"internal error\n")
            if resp.status == 0:  # the host is down: reset the connection, answer nothing
                if self._transport is not None:
                    self._transport.abort()
                self._queue.clear()
                return
            keep_alive = item.keep_alive
            self._send(resp, keep_alive, item.method == "HEAD")
            if not keep_alive:
                self._queue.clear()
                return

    async def _set_up(self, req: Request) -> None:
        """A real network's TCP (and TLS) handshake: the server reads the first
        request of a new connection only ``setup_delay`` after the client sent
        it; its arrival is stamped then, as a server there would see it."""
        delay = self._handler.setup_delay(req)
        if delay > 0:
            await asyncio.sleep(delay)
            req.t += delay
            req.wall += delay

    def _send(self, resp: Response, keep_alive: bool, head: bool) -> None:
        if not keep_alive:
            self._finished = True
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(encode_response(resp, keep_alive=keep_alive, head=head))
        if not keep_alive:
            transport.close()
