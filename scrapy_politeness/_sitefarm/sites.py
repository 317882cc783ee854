"""Virtual-host behaviour: decide status and content per request, record arrivals.

Status decisions (rate limit, status_script) are made when the request is
handled, using its first-byte time, BEFORE any artificial latency, so a slow
host's sleep never reorders them.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable

from scrapy_politeness._sitefarm.arrival import Arrival
from scrapy_politeness._sitefarm.httpserver import ConnInfo
from scrapy_politeness._sitefarm.httpwire import (
    BadRequest,
    Request,
    Response,
    normalise_host,
    reason_phrase,
)
from scrapy_politeness._sitefarm.ratelimit import TokenBucket, retry_after_value
from scrapy_politeness._sitefarm.spec import HostSpec
from scrapy_politeness._sitefarm.state import FarmState

HTML = "text/html; charset=utf-8"
ROBOTS = "/robots.txt"


def root_page(host: HostSpec) -> bytes:
    """Index linking every page with absolute paths."""
    links = "\n".join(f'<li><a href="/p/{n}">page {n}</a></li>' for n in range(host.pages))
    name = html.escape(host.name)
    return (
        f"<!DOCTYPE html>\n<html><head><title>{name}</title></head>\n"
        f"<body><h1>{name}</h1>\n<ul>\n{links}\n</ul>\n</body></html>\n"
    ).encode()


def leaf_page(host: HostSpec, n: int) -> bytes:
    """A small page without further links, so crawl sizes stay predictable."""
    name = html.escape(host.name)
    return (
        f"<!DOCTYPE html>\n<html><head><title>{name} page {n}</title></head>\n"
        f"<body><h1>{name} page {n}</h1><p>Content of page {n}.</p></body></html>\n"
    ).encode()


def error(status: int, headers: list[tuple[str, str]] | None = None) -> Response:
    """Tiny plain-text error response."""
    body = f"{status} {reason_phrase(status)}\n".encode()
    return Response(status, body, headers=headers or [])


def content(host: HostSpec, path: str) -> Response:
    """The 200 (or 404) a healthy host would send for this path."""
    if path == ROBOTS:
        return Response(200, host.robots_txt().encode())
    if path == "/":
        return Response(200, root_page(host), HTML)
    if path.startswith("/p/"):
        num = path[3:]
        if num.isdigit() and int(num) < host.pages:
            return Response(200, leaf_page(host, int(num)), HTML)
    return error(404)


class SiteHandler:
    """HTTP handler for all virtual hosts on all farm IPs."""

    def __init__(self, state: FarmState) -> None:
        self._state = state
        self.on_first: Callable[[], None] | None = None  # the outages' timers start then

    def new_conn_id(self) -> int:
        return self._state.next_conn_id()

    async def handle(self, req: Request, conn: ConnInfo) -> Response:
        name = normalise_host(req.host)
        host = self._state.spec.hosts.get(name)
        if self._state.first_t is None:
            self._state.first_t = req.t
            if self.on_first is not None:
                self.on_first()
        resp = error(404) if host is None else self._decide(host, req)
        if host is not None and host.headers:
            resp.headers = [*resp.headers, *host.headers]
        if host is not None and host.kind == "slow" and host.latency > 0:
            await asyncio.sleep(host.latency)
        self._record(req.t, req.wall, name, conn, path=req.origin_target, status=resp.status)
        return resp

    def setup_delay(self, req: Request) -> float:
        host = self._state.spec.hosts.get(normalise_host(req.host))
        return 0.0 if host is None else host.setup

    def bad_request(self, bad: BadRequest, conn: ConnInfo) -> Response:
        self._record(bad.t, bad.wall, "", conn, path="", status=400)
        return error(400)

    def _decide(self, host: HostSpec, req: Request) -> Response:
        path = req.path
        is_robots = path == ROBOTS
        down = host.down(req.t, self._state.first_t)
        if down is not None:
            return error(503) if down == "503" else Response(0, b"")  # 0: reset the connection
        if host.status_script and not is_robots:
            pos = self._state.script_pos[host.name]
            self._state.script_pos[host.name] = pos + 1
            if pos < len(host.status_script) and host.status_script[pos] != 200:
                extra = []
                if host.retry_after_header is not None:
                    extra.append(("Retry-After", host.retry_after_header))
                return error(host.status_script[pos], extra)
        if host.kind == "always_503":
            return error(404) if is_robots else error(503)
        if host.kind == "rate_limited":
            bucket = self._state.buckets.get(host.name)
            if bucket is None:
                bucket = self._state.buckets[host.name] = TokenBucket(host)
            if not bucket.admit(req.t):
                return error(429, [("Retry-After", retry_after_value(host, req.wall))])
        return content(host, path)

    def _record(
        self, t: float, wall: float, name: str, conn: ConnInfo, *, path: str, status: int
    ) -> None:
        self._state.arrivals.append(Arrival(t, wall, name, conn.ip, path, status, conn.id))
