"""Where a frontier request queues: its host key and IP bucket, known at push.

A push is synchronous and may come before the name is resolved. The pushing
process resolves it in the background; the IP then rides on the process's
next pop (woken at once), or goes alone (``frontier_ip.lua``) if no pop
comes within :data:`IP_NEWS`. Until some process shares it, the frontier
holds the host (see :mod:`scrapy_politeness.distributed.frontier`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.utils.httpobj import urlparse_cached

from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.policy import host_key

if TYPE_CHECKING:
    from scrapy_politeness.middleware import PolitenessMiddleware

__all__ = ["IP_NEWS", "HostRoutes"]

logger = logging.getLogger("scrapy_politeness.distributed.frontier")

IP_NEWS = 0.05  # how long a resolved IP waits for a pop to carry it before going alone
_NETWORK_SCHEMES = frozenset(("http", "https"))


class HostRoutes:
    """Host keys and IP buckets of pushed requests, and the IPs not yet shared.

    ``send(key, ip)`` shares one IP alone; ``resolved()`` is called when a
    name resolved, so the queue asks Redis (and carries the news) soon.
    """

    def __init__(self, mw: PolitenessMiddleware | None, *, send: Callable[[str, str], None],
                 resolved: Callable[[], None]) -> None:
        self._mw = mw
        self._send = send
        self._resolved = resolved
        self._news: dict[str, str] = {}  # host key -> IP resolved here, for the next pop
        self._timer: asyncio.TimerHandle | None = None
        self._resolving: dict[str, asyncio.Task[None]] = {}
        self._closed = False

    def route(self, request: Request) -> tuple[str, str]:
        """The host key and IP bucket ('' none, '?' not resolved yet) of ``request``."""
        parsed = urlparse_cached(request)
        hostname = parsed.hostname
        if parsed.scheme not in _NETWORK_SCHEMES or not hostname:
            return "", ""
        mw = self._mw
        if mw is None:
            return host_key(hostname), ""
        readiness = mw.readiness(request)
        if readiness is None:
            return "", ""
        if mw.dns.lookup(hostname) is DnsCache.MISS:
            if hostname not in self._resolving:
                probe = Request(f"{parsed.scheme}://{parsed.netloc}/")
                task = asyncio.get_running_loop().create_task(self._resolve(hostname, probe))
                self._resolving[hostname] = task
            return readiness.key, "?"
        return readiness.key, readiness.ip or ""

    def take_news(self) -> list[str]:
        """The resolved IPs a pop should carry, flat (key, ip, ...); none left."""
        if not self._news:
            return []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        flat = [x for pair in self._news.items() for x in pair]
        self._news.clear()
        return flat

    def give_back(self, flat: list[str]) -> None:
        """IPs taken by a pop that failed: the next pop (or the timer) carries them."""
        for key, ip in zip(flat[::2], flat[1::2], strict=True):
            self._news.setdefault(key, ip)
        if self._news and self._timer is None and not self._closed:
            self._timer = asyncio.get_running_loop().call_later(IP_NEWS, self._alone)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for task in self._resolving.values():
            task.cancel()

    async def _resolve(self, hostname: str, probe: Request) -> None:
        """Resolve a new name and queue its IP for sharing, so no process holds the host."""
        assert self._mw is not None
        try:
            await self._mw.dns.resolve(hostname)
            readiness = self._mw.readiness(probe)
            if readiness is not None and not self._closed:
                self._news[readiness.key] = readiness.ip or ""
                if self._timer is None:
                    self._timer = asyncio.get_running_loop().call_later(IP_NEWS, self._alone)
                self._resolved()
        except Exception:  # not resolved: the host is handed out after the hold (host only)
            logger.debug("politeness: could not resolve %s for the frontier", hostname,
                         exc_info=True)
        finally:
            del self._resolving[hostname]

    def _alone(self) -> None:
        """No pop carried the resolved IPs in time: share them one by one."""
        self._timer = None
        news, self._news = self._news, {}
        for key, ip in news.items():
            try:
                self._send(key, ip)
            except Exception:  # Redis away: the host is handed out after the hold
                logger.debug("politeness: could not share the IP of %s", key, exc_info=True)
