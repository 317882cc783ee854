"""Requests that go through a proxy: the proxy resolves and connects, not us.

Scrapy's ``HttpProxyMiddleware`` (priority 750, before the gate's 950) puts the
proxy in ``Request.meta["proxy"]``, from the request's own meta or from the
``http_proxy``/``https_proxy`` environment. Such a request is still spaced by
its target host; by the target's IP only when the name resolves here too, for
a proxy may be the only one that can resolve it (internal names behind a
corporate proxy). And a failure of the proxy itself (it refused the
connection, asked for credentials, could not resolve the name) says nothing
about the target: it never backs the target off nor counts towards declaring
it dead; a CONNECT the proxy answered with a gateway error (502/503/504: it
could not reach the site) is the target's outcome. Which answer is whose is
decided in :mod:`scrapy_politeness.policy.proxy_answers`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.request import getproxies, proxy_bypass

from scrapy.utils.misc import load_object

from scrapy_politeness.policy.proxy_answers import (
    ProxyEvidence,
    Whose,
    whose_answer,
    whose_refused_tunnel,
)

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

__all__ = ["PROXY_AUTH_REQUIRED", "ProxyFailures", "ProxyRoutes", "is_proxied",
           "is_proxy_failure", "tunnel_answer"]

PROXY_AUTH_REQUIRED = 407  # the proxy's answer, not the target's
_MAX_NAMES = 10_000
_BODY_START = 2048  # enough of an error page to read the proxy's words
# Scrapy's TunnelError: "... with proxy host:port [{'status': 502, 'reason': b'Bad Gateway'}]"
_TUNNEL_ANSWER = re.compile(r"'status': (\d{3}), 'reason': b?['\"](.*?)['\"]\}")
_TUNNEL_ERROR = "scrapy.core.downloader.handlers.http11.TunnelError"

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


def tunnel_answer(exc: BaseException) -> tuple[int | None, str] | None:
    """(status, reason) of a refused CONNECT; None when ``exc`` is no TunnelError."""
    tunnel = _tunnel_error()
    if tunnel is None or not isinstance(exc, tunnel):
        return None
    found = _TUNNEL_ANSWER.search(str(exc))
    return (None, str(exc)) if found is None else (int(found.group(1)), found.group(2))


@cache
def _tunnel_error() -> type[BaseException] | None:
    try:
        found: type[BaseException] = load_object(_TUNNEL_ERROR)
    except (ImportError, AttributeError, NameError):  # pragma: no cover - not in this version
        return None
    return found


class ProxyFailures:
    """Outcomes that are the proxy's, counted (``politeness/proxy/errors``) and
    released without feedback: the target's buckets learn nothing from them."""

    def __init__(self, stats: StatsCollector, done: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stats = stats
        self.done = done  # frees the host's in-flight slot
        self.clock = clock
        self.evidence = ProxyEvidence()  # which proxies lately relayed a site's answer

    def answered(self, request: Request, response: Response, key: str) -> bool:
        """Whether ``response`` is the proxy's own answer (handled if so)."""
        proxy = request.meta.get("proxy")
        if not proxy:
            return False
        status = response.status
        whose = whose_answer(status, "", "", "")
        if status >= 500:
            headers = response.headers
            body = response.body[:_BODY_START].decode("latin-1")
            whose = whose_answer(status, _header(headers, b"X-Squid-Error"),
                                 _header(headers, b"Server"), body)
        now = self.clock()
        whose = self.evidence.decide(whose, proxy, now)
        if whose is Whose.PROXY:
            self._release(key)
            return True
        if status < 500:
            self.evidence.relayed(proxy, now)
        return False

    def raised(self, request: Request, exc: BaseException, key: str) -> bool:
        """Whether a download's ``exc`` is the proxy's failure (handled if so)."""
        proxy = request.meta.get("proxy")
        if not proxy or not is_proxy_failure(exc):
            return False
        refused = tunnel_answer(exc)
        if refused is not None:
            whose = self.evidence.decide(whose_refused_tunnel(*refused), proxy, self.clock())
            if whose is Whose.SITE:  # the proxy could not reach the site: the site's outcome
                self.stats.inc_value("politeness/proxy/site_unreachable")
                return False
        self._release(key)
        return True

    def _release(self, key: str) -> None:
        self.stats.inc_value("politeness/proxy/errors")
        self.done(key)


def _header(headers: Any, name: bytes) -> str:
    value = headers.get(name)
    return "" if value is None else bytes(value).decode("latin-1")


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
