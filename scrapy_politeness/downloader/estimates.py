"""Which buckets a request belongs to, and what the gate would decide for it now.

Shared by the middleware (which enforces) and the scheduler queue (which
schedules ahead): one computation of a request's host key, IP bucket and the
instants its buckets allow, so the two never disagree.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy.utils.httpobj import urlparse_cached

from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.downloader.failure_kinds import NameNotResolvedError
from scrapy_politeness.downloader.proxies import ProxyRoutes, is_proxied
from scrapy_politeness.meta import bucket_of, bypasses
from scrapy_politeness.observe.observer import STATS
from scrapy_politeness.policy import ip_literal

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.downloader.host_keys import HostKeys
    from scrapy_politeness.policy.eligibility import Eligibility
    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["IGNORED", "NETWORK_SCHEMES", "Readiness", "RequestBuckets"]

NETWORK_SCHEMES = frozenset(("http", "https"))
IGNORED = ""  # the queue's key for requests the gate ignores (data:, file:, no host)


@dataclass(slots=True)
class Readiness:  # not frozen: built per queue look-up, and a frozen one costs 5x to build
    """What the gate would decide for a request now, for scheduling ahead of it.

    ``host_ready``/``ip_ready`` are instants on the event loop's clock (0 when
    nothing holds it back); ``interval``/``ip_interval`` the spacings one more
    start of this host would add to its host and IP buckets (the IP's floor at
    least, as the gate spends it).
    """

    key: str
    ip: str | None
    host_ready: float
    ip_ready: float
    interval: float
    ip_interval: float


def loop_now() -> float:
    """Now on the event loop's clock (``time.monotonic`` without a running loop)."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


class RequestBuckets:
    """Which buckets a request belongs to (host key, IP) and when they are ready."""

    def __init__(self, settings: PolitenessSettings, eligibility: Eligibility,
                 dns: DnsCache, keys: HostKeys, *, stats: StatsCollector) -> None:
        self.settings = settings
        self.eligibility = eligibility  # the gate's own rule: the queue never disagrees with it
        self.hosts = eligibility.hosts
        self.ips = eligibility.ips
        self.dns = dns
        self.keys = keys
        self.stats = stats
        self.routes = ProxyRoutes()  # names a proxy resolves: no DNS failure for the queue
        self.now = loop_now  # the clock the gate's instants are on (tests replace it)
        # requests the plugin's scheduler queue handed out (it set this): their names were
        # looked up there, so the middleware never waits for DNS for them
        self.from_queue: Container[Request] = ()

    def readiness(self, request: Request) -> Readiness | None:
        """The gate's view of ``request`` without waiting (no DNS query: an
        uncached name has no IP yet). None for requests the gate ignores.

        A request the middleware will fail or drop at once (a name known not
        to resolve and no proxy to carry it, a dead or parked host) is ready now and
        spaces nothing: the queue hands such requests out without delay, so
        they never hold the crawl open at their host's pace."""
        key = self.queue_key(request)
        if key == IGNORED:
            return None
        return self.readiness_for(key, urlparse_cached(request).hostname)  # type: ignore[arg-type]

    def readiness_for(self, key: str, hostname: str) -> Readiness:
        """:meth:`readiness` for a request of host key ``key`` to ``hostname``: what the
        scheduler queue asks for the hosts it keeps (no request to parse)."""
        ip = self.dns.lookup(hostname)
        if ip is DnsCache.MISS:  # an IP literal needs no DNS
            ip = ip_literal(hostname)
        elif ip is None and not self.routes.carries(hostname):
            return Readiness(key, None, 0.0, 0.0, 0.0, 0.0)  # fails at once in the middleware
        ip = self.keys.ip_bucket(ip if isinstance(ip, str) else None)
        state = self.hosts.peek(key)
        if state is not None and (state.dead or (state.parked_until
                                                 and state.parked_until > self.now())):
            return Readiness(key, None, 0.0, 0.0, 0.0, 0.0)  # dropped at once in the middleware
        if state is None:
            config = self.settings.config_for(key)
            interval = ip_interval = config.host_interval(config.default)
        else:
            interval, ip_interval = state.clamped, state.ip_clamped
        ip_interval = self.ips.spacing(ip, ip_interval)  # what a start spends on its IP
        rule = self.eligibility
        return Readiness(key, ip, rule.state_ready(state), rule.ip_ready(ip), interval, ip_interval)

    def skips_lookup(self, hostname: str) -> bool:
        """Whether ``hostname`` is never looked up here: a proxy carries it and
        ``POLITENESS_PROXY_LOCAL_DNS`` is off (the queue asks before resolving)."""
        return not self.settings.proxy_local_dns and self.routes.carries(hostname)

    def handed_out(self, key: str, since: float, backlog: int) -> None:
        """The scheduler queue handed out a request of ``key``: its host has had
        requests waiting there since ``since`` (so a start later than its own
        bucket allowed was held by another bucket), ``backlog`` are left (what
        a faster pace could still save: the recovery prices its probes by it)."""
        state = self.hosts.peek(key)
        if state is not None:
            state.queued_since = since
            state.backlog = backlog

    def queue_key(self, request: Request) -> str:
        """The host key the scheduler queue files ``request`` under (``IGNORED``:
        the gate ignores it): :meth:`readiness`'s key alone."""
        parsed = urlparse_cached(request)
        hostname = parsed.hostname
        meta = request.meta
        if not hostname or parsed.scheme not in NETWORK_SCHEMES or bypasses(meta):
            return IGNORED
        if "proxy" in meta:
            self.routes.seen(hostname, meta)
        return bucket_of(meta, strict=False) or self.keys.key(hostname)

    def request_key(self, request: Request, hostname: str) -> str | None:
        """The request's host bucket; None when it bypasses the gate (docs/reference/meta.md)."""
        meta = request.meta
        if bypasses(meta):
            self.stats.inc_value(STATS + "bypassed")
            return None
        key = bucket_of(meta)
        if key is None:
            return self.keys.key(hostname)
        self.stats.inc_value(STATS + "bucket_from_meta")
        return key

    async def route(self, request: Request, hostname: str, loop: asyncio.AbstractEventLoop,
                    check: Callable[[str, float], None]) -> tuple[str, str | None] | None:
        """The request's host key and the IP it will be accounted to (see
        :meth:`address`); None when it bypasses the gate (its name resolved for
        the pin alone)."""
        key = self.request_key(request, hostname)
        if key is None:
            await self.resolve_only(hostname)
            return None
        ip = await self.address(hostname, key, loop, check,
                                ask_again="retry_times" in request.meta,
                                proxied=is_proxied(request),
                                queued=request in self.from_queue)
        return key, ip

    async def resolve_only(self, hostname: str) -> None:
        """A request that bypasses the gate still connects where the others do."""
        if not self.settings.dns_pin:
            return
        ip = self.dns.lookup(hostname)
        if ip is DnsCache.MISS:
            ip = await self.dns.resolve(hostname)
        if isinstance(ip, str):
            self.dns.pin(hostname, ip)

    async def address(self, hostname: str, key: str, loop: asyncio.AbstractEventLoop,
                      check: Callable[[str, float], None], *, ask_again: bool = False,
                      proxied: bool = False, queued: bool = False) -> str | None:
        """The IP the request will be accounted to; a name that does not resolve
        (fresh or from the negative cache) fails here, before the gate. ``check``
        raises for a host that must not wait (dead, parked, closing), also
        after the lookup: it may have died meanwhile. ``ask_again`` (a retried
        request): a transient failure in the cache is asked again.

        A ``proxied`` request never fails here: the proxy resolves its target,
        so a name that does not resolve locally is spaced by its host alone
        (None: no IP bucket); with ``POLITENESS_PROXY_LOCAL_DNS`` off it is
        not looked up at all. A ``queued`` request (handed out by the scheduler
        queue, which re-resolves names itself) is never asked again here and
        takes the last answer if it expired on its way."""
        check(key, loop.time())
        if proxied and not self.settings.proxy_local_dns:  # the name never leaves for our DNS
            self.stats.inc_value(STATS + "proxy/host_only")
            return None
        ip = self.dns.lookup(hostname)
        if queued:
            if ip is DnsCache.MISS:
                ip = self.dns.last_answer(hostname)
        elif ip is None and ask_again and self.dns.transient(hostname):
            ip = DnsCache.MISS
        if ip is DnsCache.MISS:
            ip = await self.dns.resolve(hostname, ask_again=ask_again)
            if ip is None and not proxied:
                raise self.not_resolved(hostname, cached=False)
            check(key, loop.time())
            if ip is None:
                self.stats.inc_value(STATS + "proxy/host_only")
                return None
        elif ip is None:  # the negative cache: fail at once, never wait in the gate
            if not proxied:
                raise self.not_resolved(hostname, cached=True)
            self.stats.inc_value(STATS + "proxy/host_only")
        return ip  # type: ignore[return-value]

    def not_resolved(self, hostname: str, *, cached: bool) -> NameNotResolvedError:
        """The error a request to a name that does not resolve fails with, counted."""
        kind = self.dns.failure(hostname)
        self.stats.inc_value(STATS + kind.value)
        if cached:
            self.stats.inc_value(STATS + "dns/from_negative_cache")
        return NameNotResolvedError(hostname, kind)
