"""One UDP socket for many DNS queries: the transport under dnspython's resolver.

dnspython's ``Do53Nameserver`` opens a UDP socket and an asyncio transport for
every query (``dns.asyncquery.udp``): over a broad crawl of 1,500 new names
that was about a fifth of the cost of a lookup. :class:`SharedUdpNameserver`
keeps dnspython's resolver (its retries, SERVFAIL and NXDOMAIN handling, CNAME
chains, the fall back to TCP on a truncated answer) and replaces only that
transport: one connected datagram endpoint per nameserver, answers matched to
their query by id, then checked and parsed by dnspython as before.

Each socket serves at most ``ROTATE_AFTER`` queries and closes once idle for
``IDLE_CLOSE`` seconds (or when its cache closes): a new socket gets a new
random source port, so a spoofer still has to guess the port as well as the
query id for all but a few queries.
"""

from __future__ import annotations

import asyncio
from typing import Any

import dns._asyncbackend
import dns.exception
import dns.message
import dns.nameserver

__all__ = ["IDLE_CLOSE", "ROTATE_AFTER", "SharedUdpNameserver", "UdpChannel"]

ROTATE_AFTER = 256  # queries per socket before a new one (a new random source port)
IDLE_CLOSE = 1.0  # seconds a socket with no query in flight stays open


class UdpChannel(asyncio.DatagramProtocol):
    """A connected UDP endpoint; each datagram goes to the query of its id."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.DatagramTransport | None = None
        self.pending: dict[int, tuple[dns.message.Message, asyncio.Future[Any]]] = {}
        self.used = 0
        self.closed = False
        self._idle_since = loop.time()
        self._idle_timer: asyncio.TimerHandle | None = None

    @property
    def retiring(self) -> bool:
        return self.closed or self.used >= ROTATE_AFTER

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for _, fut in self.pending.values():
            if not fut.done():
                fut.set_exception(exc or ConnectionError("DNS socket closed"))
        self.pending.clear()

    def error_received(self, exc: Exception) -> None:
        """An ICMP error (port unreachable): every query on it failed, as
        dnspython's own socket would have reported to each of them."""
        for _, fut in self.pending.values():
            if not fut.done():
                fut.set_exception(exc)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if len(data) < 2:
            return
        entry = self.pending.get(int.from_bytes(data[:2], "big"))
        if entry is None:
            return  # late (timed out) or stray: dnspython ignores those too
        request, fut = entry
        if fut.done():
            return
        try:  # as dns.asyncquery.udp with ignore_errors and raise_on_truncation
            response = dns.message.from_wire(
                data, keyring=request.keyring, request_mac=request.mac,
                raise_on_truncation=True)
        except dns.message.Truncated as exc:
            if request.is_response(exc.message()):  # type: ignore[no-untyped-call]
                fut.set_exception(exc)
            return
        except Exception:
            return
        if request.is_response(response):
            fut.set_result(response)

    async def query(self, request: dns.message.Message, timeout: float) -> dns.message.Message:
        assert self.transport is not None
        while request.id in self.pending:  # ids are random; two in flight must differ
            request.set_random_id()  # type: ignore[no-untyped-call]
        fut: asyncio.Future[dns.message.Message] = self.loop.create_future()
        qid = request.id
        self.pending[qid] = (request, fut)
        self.used += 1
        timer = self.loop.call_later(timeout, _expire, fut)
        try:
            self.transport.sendto(request.to_wire())
            return await fut
        finally:
            timer.cancel()
            del self.pending[qid]
            if not self.pending:
                self._idle()

    def _idle(self) -> None:
        if self.retiring:
            self.close()
            return
        self._idle_since = self.loop.time()
        if self._idle_timer is None:
            self._idle_timer = self.loop.call_later(IDLE_CLOSE, self._check_idle)

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self.pending or self.closed:
            return
        left = self._idle_since + IDLE_CLOSE - self.loop.time()
        if left > 0:
            self._idle_timer = self.loop.call_later(left, self._check_idle)
        else:
            self.close()

    def close(self) -> None:
        self.closed = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self.transport is not None:
            self.transport.close()


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(dns.exception.Timeout())  # type: ignore[no-untyped-call]


class SharedUdpNameserver(dns.nameserver.Do53Nameserver):
    """dnspython's Do53 nameserver, its UDP queries sent over one shared socket.

    TCP (after a truncated answer) and anything but the asyncio backend go
    through dnspython's own transport unchanged.
    """

    def __init__(self, address: str, port: int = 53) -> None:
        super().__init__(address, port)
        self.opened = 0  # sockets opened so far
        self._channel: UdpChannel | None = None
        self._opening: asyncio.Future[UdpChannel] | None = None

    async def async_query(  # noqa: PLR0917 (dnspython's signature)
            self, request: dns.message.QueryMessage, timeout: float,
                          source: str | None, source_port: int, max_size: bool,
                          backend: dns._asyncbackend.Backend, one_rr_per_rrset: bool = False,
                          ignore_trailing: bool = False) -> dns.message.Message:
        if (max_size or source or source_port or one_rr_per_rrset or ignore_trailing
                or backend.name() != "asyncio"):
            return await super().async_query(
                request, timeout, source, source_port, max_size, backend,
                one_rr_per_rrset=one_rr_per_rrset, ignore_trailing=ignore_trailing)
        channel = await self._open()
        return await channel.query(request, timeout)

    async def _open(self) -> UdpChannel:
        loop = asyncio.get_running_loop()
        channel = self._channel
        if channel is not None and not channel.retiring and channel.loop is loop:
            return channel
        if self._opening is not None and not self._opening.done():
            return await asyncio.shield(self._opening)  # one socket, however many ask
        opening = self._opening = loop.create_future()
        try:
            _, channel = await loop.create_datagram_endpoint(
                lambda: UdpChannel(loop), remote_addr=(self.address, self.port))
        except BaseException as exc:
            opening.set_exception(exc)
            opening.exception()  # retrieved: the others waiting re-raise it
            self._opening = None
            raise
        self._channel = channel
        self.opened += 1
        opening.set_result(channel)
        return channel

    def close(self) -> None:
        """Close the socket (the crawl ended); a later query opens a new one."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
