"""Requests that go through a proxy: the proxy resolves and connects, not us.

Scrapy's ``HttpProxyMiddleware`` (priority 750, before the gate's 950) puts the
proxy in ``Request.meta["proxy"]``, from the request's own meta or from the
``http_proxy``/``https_proxy`` environment. Such a request is still spaced by
its target host; by the target's IP only when the name resolves here too, for
a proxy may be the only one that can resolve it (internal names behind a
corporate proxy). And a failure of the proxy itself (it refused the
connection, refused the tunnel, asked for credentials) says nothing about the
target: it never backs the target off nor counts towards declaring it dead.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.request import getproxies, proxy_bypass

from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

__all__ = ["PROXY_AUTH_REQUIRED", "ProxyFailures", "ProxyRoutes", "is_proxied",
           "is_proxy_failure"]

PROXY_AUTH_REQUIRED = 407  # the proxy's answer, not the target's
_MAX_NAMES = 10_000

# What a proxied download raises when it never got past the proxy: the
# connection to the proxy failed (refused, no route, the proxy's own name did
# not resolve) or the proxy refused the CONNECT tunnel. The target's own
# failures come back through the proxy as HTTP answers or a broken response.
_PROXY_FAILURES = (
    "scrapy.core.downloader.handlers.http11.TunnelError",
    "scrapy.exceptions.DownloadConnectionRefusedError",
    "scrapy.exceptions.CannotResolveHostError",
    "twisted.internet.error.ConnectError",  # refused, no route, timed out, unknown host
)


@cache
def _failure_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = []
    for path in _PROXY_FAILURES:
        try:
            types.append(load_object(path))
        except (ImportError, AttributeError, NameError):  # not in this version
            continue
    return tuple(types)


def is_proxied(request: Request) -> bool:
    """Whether ``request`` goes through a proxy (as ``HttpProxyMiddleware`` decided)."""
    return bool(request.meta.get("proxy"))


def is_proxy_failure(exc: BaseException) -> bool:
    """Whether a proxied download's ``exc`` is the proxy's failure, not the target's."""
    return isinstance(exc, _failure_types())


class ProxyFailures:
    """Outcomes that are the proxy's, counted (``politeness/proxy/errors``) and
    released without feedback: the target's buckets learn nothing from them."""

    def __init__(self, stats: StatsCollector, done: Callable[[str], None]) -> None:
        self.stats = stats
        self.done = done  # frees the host's in-flight slot

    def answered(self, request: Request, status: int, key: str) -> bool:
        """Whether a response with ``status`` is the proxy's own (handled if so)."""
        if status != PROXY_AUTH_REQUIRED or not is_proxied(request):
            return False
        self._release(key)
        return True

    def raised(self, request: Request, exc: BaseException, key: str) -> bool:
        """Whether a download's ``exc`` is the proxy's failure (handled if so)."""
        if not is_proxied(request) or not is_proxy_failure(exc):
            return False
        self._release(key)
        return True

    def _release(self, key: str) -> None:
        self.stats.inc_value("politeness/proxy/errors")
        self.done(key)


class ProxyRoutes:
    """Which host names a proxy carries, for the scheduler queue.

    The queue sees a request before ``HttpProxyMiddleware`` has set its
    ``meta["proxy"]``, so it asks here: a name that does not resolve locally
    is no failure when a proxy will carry it. The environment's proxies are
    read once, as that middleware reads them (``no_proxy`` asked once per
    name); a name seen with ``meta["proxy"]`` is remembered. Both tables are
    bounded: a broad crawl clears them rather than keep every name.
    """

    def __init__(self, proxies: dict[str, str] | None = None) -> None:
        found = getproxies() if proxies is None else proxies
        self.schemes = frozenset(s for s in ("http", "https") if s in found)
        self._bypass: dict[str, bool] = {}
        self._by_meta: dict[str, None] = {}

    def seen(self, hostname: str, meta: dict[str, Any]) -> None:
        """A request to ``hostname`` with ``meta`` was queued."""
        if meta.get("proxy") and hostname not in self._by_meta:
            if len(self._by_meta) >= _MAX_NAMES:
                self._by_meta.clear()
            self._by_meta[hostname] = None

    def carries(self, hostname: str) -> bool:
        """Whether requests to ``hostname`` go through a proxy (as far as seen)."""
        if hostname in self._by_meta:
            return True
        if not self.schemes:
            return False
        bypass = self._bypass.get(hostname)
        if bypass is None:
            if len(self._bypass) >= _MAX_NAMES:
                self._bypass.clear()
            bypass = self._bypass[hostname] = bool(proxy_bypass(hostname))
        return not bypass
