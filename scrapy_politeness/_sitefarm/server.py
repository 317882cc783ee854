"""Run the whole farm (HTTP vhosts, DNS, control) in one asyncio loop.

The process announces itself with one JSON line on stdout and exits on
SIGTERM/SIGINT or when stdin hits EOF, so it never outlives its parent.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import threading
from typing import TextIO

from scrapy_politeness._sitefarm.control import ControlHandler
from scrapy_politeness._sitefarm.dnsserver import start_dns
from scrapy_politeness._sitefarm.httpserver import Handler, HttpConnection
from scrapy_politeness._sitefarm.sites import SiteHandler
from scrapy_politeness._sitefarm.spec import FarmSpec
from scrapy_politeness._sitefarm.state import FarmState

PORT_RANGE = (20000, 60000)
PORT_ATTEMPTS = 200


async def _listen(handler: Handler, ip: str, port: int) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: HttpConnection(handler), ip, port, reuse_address=True, backlog=512
    )


async def bind_http(
    handler: Handler, ips: tuple[str, ...], port: int
) -> tuple[int, list[asyncio.Server]]:
    """Listen on ``port`` on every IP; port 0 = a random port free on ALL of them."""
    candidates = [port] if port else [random.randint(*PORT_RANGE) for _ in range(PORT_ATTEMPTS)]
    last_error: OSError | None = None
    for candidate in candidates:
        servers: list[asyncio.Server] = []
        try:
            for ip in ips:
                servers.append(await _listen(handler, ip, candidate))
        except OSError as exc:
            last_error = exc
            for server in servers:
                server.close()
            continue
        return candidate, servers
    raise OSError(f"could not bind HTTP port {port or 'any'} on {list(ips)}: {last_error}")


def _watch_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Blocking read of fd 0 in a daemon thread; EOF means our parent is gone."""

    def run() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=run, name="sitefarm-stdin", daemon=True).start()


async def serve(spec: FarmSpec, out: TextIO = sys.stdout, watch_stdin: bool = True) -> None:
    """Start everything, print the ready line, serve until told to stop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    state = FarmState(spec)
    port, http_servers = await bind_http(SiteHandler(state), spec.ips, spec.port)
    dns_port, dns_udp, dns_tcp = await start_dns(state, port=spec.dns_port)
    control_handler = ControlHandler(state)
    control = await loop.create_server(lambda: HttpConnection(control_handler), "127.0.0.1", 0)
    control_port = int(control.sockets[0].getsockname()[1])
    ready = {"port": port, "dns": f"127.0.0.1:{dns_port}", "control": f"127.0.0.1:{control_port}"}
    out.write(json.dumps(ready) + "\n")
    out.flush()
    if watch_stdin:
        _watch_stdin(loop, stop)
    try:
        await stop.wait()
    finally:
        dns_udp.close()
        for server in [*http_servers, dns_tcp, control]:
            server.close()
