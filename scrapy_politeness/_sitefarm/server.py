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
from collections.abc import Callable, Coroutine
from typing import Any, TextIO

from scrapy_politeness._sitefarm.control import ControlHandler
from scrapy_politeness._sitefarm.dnsserver import start_dns
from scrapy_politeness._sitefarm.httpserver import Handler, HttpConnection
from scrapy_politeness._sitefarm.sites import SiteHandler
from scrapy_politeness._sitefarm.spec import FarmSpec
from scrapy_politeness._sitefarm.state import FarmState

PORT_RANGE = (20000, 60000)
PORT_ATTEMPTS = 200
_TASKS: set[asyncio.Task[None]] = set()  # the listeners being reopened (kept from the GC)


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


def _schedule_refusals(spec: FarmSpec, handler: Handler, port: int,
                       servers: list[asyncio.Server]) -> None:
    """Stop listening on each "refuse" outage's IP while it lasts (connections are refused)."""
    loop = asyncio.get_running_loop()
    for host in spec.hosts.values():
        if host.outage is None or host.outage[2] != "refuse":
            continue
        after, length, _ = host.outage
        index = spec.ips.index(host.ip)

        def down(index: int = index) -> None:
            servers[index].close()

        async def listen_again(index: int = index, ip: str = host.ip) -> None:
            servers[index] = await _listen(handler, ip, port)

        def up(again: Callable[[], Coroutine[Any, Any, None]] = listen_again) -> None:
            _TASKS.add(loop.create_task(again()))

        loop.call_later(after, down)
        loop.call_later(after + length, up)


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
    sites = SiteHandler(state)
    port, http_servers = await bind_http(sites, spec.ips, spec.port)
    sites.on_first = lambda: _schedule_refusals(spec, sites, port, http_servers)
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
