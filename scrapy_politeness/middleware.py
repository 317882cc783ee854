"""The Scrapy glue: a downloader middleware that waits in the gate.

Priority 950, the nearest to the download handler of the stock chain: after
HttpCacheMiddleware (900), so cache hits return before reaching the gate and
are neither delayed nor counted; and, because ``process_response`` and
``process_exception`` run in reverse priority order, before RetryMiddleware
(550) turns a 429/5xx or a transport error into a retry, so every outcome is
fed back first.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, IgnoreRequest, NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from . import persistence
from .backends import SharedBackend, SharedHost, make_backend
from .booking import booked_start
from .dns import DnsCache
from .logstats import PeriodWaits, snapshot
from .policy import Gate, HostTable, IPTable, Release, Signal, host_key, retry_after_of
from .robots import robots_delay
from .settings import PolitenessSettings
from .trace import TraceWriter

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser
    from typing_extensions import Self

    from .pinning import Pin

__all__ = ["PolitenessMiddleware"]

logger = logging.getLogger(__name__)

_NETWORK_SCHEMES = frozenset(("http", "https"))
_STATS = "politeness/"
_WATCH_EVERY = 0.25  # seconds between checks for a closing engine and eviction


@dataclass(frozen=True, slots=True)
class Hint:
    """What the gate would decide for a request now, for scheduling ahead of it.

    ``host_ready``/``ip_ready`` are instants on the event loop's clock (0 when
    nothing holds it back); ``interval``/``ip_interval`` the spacings one more
    start of this host would add to its host and IP buckets.
    """

    key: str
    ip: str | None
    host_ready: float
    ip_ready: float
    interval: float
    ip_interval: float


@dataclass(slots=True)
class _Dispatch:
    key: str
    at: float
    ip: str | None = None


class PolitenessMiddleware:
    """Per-host and per-IP buckets in step, fed back by every outcome.

    See the README for the settings; the policy itself lives in
    :mod:`scrapy_politeness.policy` and knows nothing of Scrapy.
    """

    DOWNLOAD_PRIORITY = 950

    def __init__(self, crawler: Crawler, settings: PolitenessSettings) -> None:
        self.crawler = crawler
        self.settings = settings
        self.stats = crawler.stats
        self.hosts = HostTable(settings.config, dead_after=settings.dead_after,
                               overrides=dict(settings.hosts))
        self.ips = IPTable(settings.config.ip_floor)
        self.gate: Gate[asyncio.Future[Release[asyncio.Future[Any]]]] = Gate(
            self.hosts, self.ips, margin=settings.send_margin,
            max_in_flight=crawler.settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
        )
        self.dns = DnsCache(
            nameservers=settings.dns_nameservers, timeout=settings.dns_timeout,
            min_ttl=settings.dns_min_ttl, max_ttl=settings.dns_max_ttl,
            negative_ttl=settings.dns_negative_ttl, hosts_file=settings.dns_hosts_file,
        )
        bot = crawler.settings.get("BOT_NAME") or "scrapy"
        namespace = settings.namespace or f"politeness:{bot}"
        self.backend: SharedBackend | None = make_backend(
            settings.backend, namespace=namespace, on_loss=settings.backend_on_loss,
            margin=settings.send_margin)
        self._key = self._make_key_function(settings.grouping)
        self._exempt: dict[str, bool] = {}
        self._dispatched: dict[Request, _Dispatch] = {}
        self._drop_reason: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._watch: asyncio.TimerHandle | None = None
        self._last_evict = 0.0
        self._closing = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lag = 0.0  # recent event-loop resume lag, for _respend
        self._pin: Pin | None = None
        s = crawler.settings
        self._robots_ua: str | None = s.get("ROBOTSTXT_USER_AGENT") or None
        self._default_ua: str = s.get("USER_AGENT") or ""
        # Observability (README, "Observability and persistence"): the trace is None when off, and
        # that one test is all the hot path pays for it.
        self._trace: TraceWriter | None = None
        self._start = 0.0  # the crawl start on the loop's clock (trace times)
        self._waits = PeriodWaits()
        self._waiters: dict[asyncio.Future[Any], float] = {}  # oldest first
        self._next_log = math.inf
        self._listeners: list[Callable[[str], None]] = []
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self._robots_parsed, signal=signals.robots_parsed)
        crawler.signals.connect(self._headers_received, signal=signals.headers_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = PolitenessSettings.from_settings(crawler.settings)
        if not settings.enabled:
            raise NotConfigured("POLITENESS_ENABLED is False")
        from scrapy.utils.asyncio import is_asyncio_available

        if not is_asyncio_available():
            raise ValueError(
                "scrapy-politeness needs an asyncio event loop: set TWISTED_REACTOR = "
                "'twisted.internet.asyncioreactor.AsyncioSelectorReactor' (Scrapy's default)"
            )
        return cls(crawler, settings)

    # -- keys --------------------------------------------------------------

    @staticmethod
    def _make_key_function(grouping: str) -> Callable[[str], str]:
        if grouping == "host":
            return lru_cache(maxsize=65536)(host_key)
        from tldextract import TLDExtract

        # The bundled public suffix list snapshot: no network fetch at start.
        extract = TLDExtract(suffix_list_urls=(), cache_dir=None)

        @lru_cache(maxsize=65536)
        def domain_key(hostname: str) -> str:
            key = host_key(hostname)
            result = extract(key)
            return result.top_domain_under_public_suffix or key

        return domain_key

    def _ip_bucket(self, ip: str | None) -> str | None:
        """The IP bucket key, or None when unknown or exempt (CDN networks)."""
        if ip is None or not self.settings.ip_exempt:
            return ip
        exempt = self._exempt.get(ip)
        if exempt is None:
            addr = ipaddress.ip_address(ip)
            exempt = self._exempt[ip] = any(addr in net for net in self.settings.ip_exempt)
        return None if exempt else ip

    # -- the gate ----------------------------------------------------------

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(key)`` whenever the gate re-times a host key (the queue)."""
        self._listeners.append(listener)

    def _retime(self, key: str) -> None:
        self.gate.touch(key)
        for listener in self._listeners:
            listener(key)

    def hint(self, request: Request) -> Hint | None:
        """The gate's view of ``request`` without waiting (no DNS query: an
        uncached name has no IP yet). None for requests the gate ignores."""
        parsed = urlparse_cached(request)
        hostname = parsed.hostname
        if parsed.scheme not in _NETWORK_SCHEMES or not hostname:
            return None
        key = self._key(hostname)
        ip = self.dns.lookup(hostname)
        ip = self._ip_bucket(ip if isinstance(ip, str) else None)
        state = self.hosts.peek(key)
        margin = self.settings.send_margin
        if state is None:
            config = self.settings.config_for(key)
            host_ready, interval = 0.0, config.host_interval(config.default)
            ip_interval = interval
        else:
            host_ready = state.eligible_at() + margin
            interval, ip_interval = state.interval(), state.ip_interval()
        ip_at = self.ips.eligible_at(ip)
        return Hint(key, ip, host_ready, ip_at + margin if ip_at else 0.0, interval,
                    ip_interval)

    async def process_request(self, request: Request) -> None:  # noqa: PLR0915 (split soon)
        parsed = urlparse_cached(request)
        if parsed.scheme not in _NETWORK_SCHEMES or not parsed.hostname:
            return
        hostname = parsed.hostname
        key = self._key(hostname)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._check_not_dropped(key, loop.time())
        ip = self.dns.lookup(hostname)
        if ip is DnsCache.MISS:
            ip = await self.dns.resolve(hostname)
            if ip is None:
                self.stats.inc_value(_STATS + "dns/failures_seen")
        submitted = loop.time()
        bucket = self._ip_bucket(ip)  # type: ignore[arg-type]
        # Booked by the scrapy-redis frontier's pop: that booking is the shared spend.
        booked = booked_start(request, bucket)
        fut: asyncio.Future[Release[Any]] = loop.create_future()
        self.gate.submit(key, bucket, fut, submitted)
        self._pump(submitted)
        if fut.done():
            release = fut.result()
            if self._lag > 0.0005 and booked is None:
                self._respend(release, submitted)
        else:
            self._waiters[fut] = submitted
            try:
                release = await fut
            finally:
                del self._waiters[fut]
            if booked is None:
                self._respend(release, loop.time())
        state = self.hosts.get(key)
        if (booked is not None and self.backend is not None
                and loop.time() > booked + self.settings.send_margin):
            # It reached us after its booked start (DNS, a busy loop): sending now
            # would crowd the next booking, so book afresh (conservative).
            booked = None
            self.stats.inc_value(_STATS + "frontier/rebooked")
        if booked is not None:
            if booked > loop.time():  # start on the booked instant, as a reserve's sleep
                await asyncio.sleep(booked - loop.time())
        elif self.backend is not None:
            release = await self._reserve_shared(release, state, loop)
        if ip is not None and self.settings.dns_pin:
            self.dns.pin(hostname, ip)  # type: ignore[arg-type]
        waited = release.at - submitted
        state.requests += 1
        state.waited += waited
        if waited > 0:
            self.stats.inc_value(_STATS + "waits")
            self.stats.inc_value(_STATS + "wait_seconds", waited)  # type: ignore[arg-type]
        self.stats.inc_value(_STATS + "dispatched")
        self._waits.add(waited)
        self._dispatched[request] = _Dispatch(key, release.at, ip)  # type: ignore[arg-type]
        request.meta["politeness"] = {
            "ip": ip, "key": key, "waited": waited, "interval": release.interval,
        }
        if self._trace is not None:
            self._trace.dispatch(loop.time(), key, ip=ip, url=request.url,  # type: ignore[arg-type]
                                 waited=waited, interval=release.interval)

    async def _reserve_shared(self, release: Release[Any], state: Any,
                              loop: asyncio.AbstractEventLoop) -> Release[Any]:
        """One round trip books the start on the shared buckets; sleep until it."""
        assert self.backend is not None
        try:
            delay, shared = await self.backend.reserve(release.key, release.ip, state.config)
        except BaseException:
            self.gate.done(release.key)
            raise
        if shared is not None:
            self._mirror(state, shared, loop.time())
            if shared.dead:  # declared dead by another crawler while this one waited
                self.gate.done(release.key)
                self._check_not_dropped(release.key, loop.time())
        if delay > 0:
            self.stats.inc_value(_STATS + "shared/waits")
            await asyncio.sleep(delay)
            now = loop.time()
            release = Release(release.token, release.key, release.ip, state.interval(), now)
            self._respend(release, now)
        return release

    def _mirror(self, state: Any, shared: SharedHost, now: float) -> None:
        """Make the local tables reflect what the shared backend answered."""
        state.adaptive = shared.adaptive
        state.crawl_delay = shared.crawl_delay
        if shared.not_before_in > 0:
            state.not_before = max(state.not_before, now + shared.not_before_in)
        state.latency = shared.latency
        state.ceiling_streak = shared.ceiling_streak
        if shared.dead and not state.dead:
            state.dead = True

    def _respend(self, release: Release[Any], now: float) -> None:
        """Move the spend from the gate's release to the estimated real send.

        The waiter resumes ``lag`` after the gate released it (one event-loop
        turn: microseconds on an idle machine, milliseconds on a busy one),
        and its bytes leave about two turns later still. The spend moves to
        ``now + 2 x lag``, with ``lag`` a slowly decaying maximum of the
        recent resume lags, so a slow turn cannot shorten the gap the server
        sees: overestimating this request's slip only ever widens the gap.
        """
        lag = now - release.at
        est = self._lag * 0.95
        self._lag = lag if lag > est else est
        at = now + 2.0 * self._lag
        state = self.hosts.peek(release.key)
        if state is None or release.interval <= 0:  # nothing to space (all intervals 0)
            return
        if at > state.last_start:
            state.last_start = at
        self.ips.spend(release.ip, at, state.ip_interval())

    def _headers_received(self, request: Request, **kwargs: Any) -> None:
        """Learn when the download really started, once its headers are in.

        Scrapy's HTTP handler measures ``download_latency`` from the moment it
        was called, so ``now - download_latency`` is that start. If it came
        later than the spend (a stalled event loop between the release and
        the handler), the buckets move to it, and the slip feeds the estimate
        that ``_respend`` adds to the next starts.
        """
        dispatch = self._dispatched.get(request)
        if dispatch is None or self._loop is None:
            return
        latency = request.meta.get("download_latency")
        if latency is None:
            return
        started = self._loop.time() - latency
        slip = started - dispatch.at
        if slip / 2.0 > self._lag:
            self._lag = slip / 2.0
        state = self.hosts.peek(dispatch.key)
        if state is None or started <= state.last_start or state.interval() <= 0:
            return  # the spend already covered it (or a later start did)
        state.last_start = started
        self.ips.spend(dispatch.ip, started, state.ip_interval())

    def _check_not_dropped(self, key: str, now: float) -> None:
        state = self.hosts.peek(key)
        if state is None:
            return
        if state.dead:
            self.stats.inc_value(_STATS + "dropped/dead")
            raise IgnoreRequest(self._drop_reason.get(key, f"politeness: host {key} is dead"))
        if now < state.parked_until:
            self.stats.inc_value(_STATS + "dropped/parked")
            raise IgnoreRequest(self._drop_reason.get(key, f"politeness: host {key} is parked"))

    def _pump(self, now: float | None = None) -> None:
        assert self._loop is not None
        if now is None:
            now = self._loop.time()
        for release in self.gate.poll(now):
            fut = release.token
            if fut.done():  # its download was cancelled while it waited
                self.gate.done(release.key)
            else:
                fut.set_result(release)
        self._arm()

    def _arm(self) -> None:
        at = self.gate.next_event()
        if at is None:
            return
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        assert self._loop is not None
        self._timer = self._loop.call_at(at, self._on_timer)
        self._timer_at = at

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        self._pump()

    def _drop_waiting(self, key: str, reason: str, stat: str) -> None:
        for fut in self.gate.drop_host(key):
            if not fut.done():
                self.stats.inc_value(_STATS + stat)
                fut.set_exception(IgnoreRequest(reason))

    # -- feedback ----------------------------------------------------------

    def process_response(self, request: Request, response: Response) -> Response:
        dispatch = self._dispatched.pop(request, None)
        if dispatch is None:
            return response  # not ours: a cache hit, a non-network scheme
        retry_after = None
        raw = response.headers.getlist(b"Retry-After")
        if raw:
            retry_after = retry_after_of(raw, time.time())
        latency = request.meta.get("download_latency") or 0.0
        self._feedback(dispatch.key, response.status, retry_after, float(latency),
                       ip=dispatch.ip)
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        dispatch = self._dispatched.pop(request, None)
        if dispatch is None:
            return
        if isinstance(exception, IgnoreRequest):
            self.gate.done(dispatch.key)
            return
        self._feedback(dispatch.key, 0, None, 0.0, ip=dispatch.ip)

    def _feedback(self, key: str, status: int, retry_after: float | None,
                  latency: float, *, ip: str | None = None) -> None:
        assert self._loop is not None
        now = self._loop.time()
        self.gate.done(key)
        state = self.hosts.get(key)
        honoured = 0.0
        if retry_after is not None:
            if retry_after > self.settings.max_retry_after:
                self._park(key, now + retry_after,
                           f"politeness: {key} asked for Retry-After {retry_after:.0f}s, above "
                           f"POLITENESS_MAX_RETRY_AFTER={self.settings.max_retry_after:g}s")
            else:
                honoured = retry_after
                self.stats.inc_value(_STATS + "retry_after")
        signal = Signal(status, honoured, latency, state.latency)
        outcome = self.hosts.feedback(key, signal, now)
        if self.backend is not None:
            self._shared_feedback(key, signal)
        cause = None
        if outcome.backed_off:
            cause = "429" if status == 429 else "transport" if status == 0 else "5xx"
        elif outcome.soft_widened:
            cause = "latency"
        if cause is not None:
            self.stats.inc_value(_STATS + "backoff/" + cause)
            if state.backoffs is None:
                state.backoffs = {}
            state.backoffs[cause] = state.backoffs.get(cause, 0) + 1
        if self._trace is not None:
            self._trace.feedback(now, key, ip=ip, status=status, retry_after=retry_after,
                                 latency=latency, before=outcome.before, after=outcome.after,
                                 cause=cause)
        if outcome.became_dead:
            self.stats.inc_value(_STATS + "dead_hosts")
            reason = (f"politeness: host {key} is dead (interval at the ceiling "
                      f"{state.config.ceiling:g}s for {self.hosts.dead_after} fetches)")
            self._drop_reason[key] = reason
            if self._trace is not None:
                self._trace.dead(now, key, outcome.after, reason)
            logger.warning("Host %s declared dead: its interval stayed at the ceiling "
                           "(%ss) for %s consecutive fetches; dropping its requests",
                           key, state.config.ceiling, self.hosts.dead_after)
            self._drop_waiting(key, reason, "dropped/dead")
        self._retime(key)
        self._pump(now)

    def _shared_feedback(self, key: str, signal: Signal) -> None:
        """Fold the outcome into the shared host without holding the response."""
        assert self.backend is not None
        assert self._loop is not None
        state = self.hosts.get(key)
        task = self._loop.create_task(
            self.backend.feedback(key, signal, state.config, self.hosts.dead_after))
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._shared_feedback_done(key, t))

    def _shared_feedback_done(self, key: str, task: asyncio.Task[SharedHost]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, ConnectionError):  # the backend logs an outage once
            logger.debug("politeness: shared feedback for %s lost: %r", key, exc)
            return
        if exc is not None:
            logger.warning("politeness: shared feedback for %s failed: %r", key, exc)
            return
        assert self._loop is not None
        state = self.hosts.get(key)
        was_dead = state.dead
        self._mirror(state, task.result(), self._loop.time())
        if state.dead and not was_dead:
            reason = f"politeness: host {key} is dead (declared by another crawler)"
            self._drop_reason[key] = reason
            self._drop_waiting(key, reason, "dropped/dead")
        self._retime(key)
        self._pump()

    def _park(self, key: str, until: float, reason: str) -> None:
        state = self.hosts.get(key)
        if until > state.parked_until:
            if state.parked_until <= (self._loop.time() if self._loop else 0.0):
                logger.warning("%s; dropping its requests", reason)
                self.stats.inc_value(_STATS + "parked_hosts")
            state.parked_until = until
            self._drop_reason[key] = reason
            if self._trace is not None and self._loop is not None:
                self._trace.parked(self._loop.time(), key, until, reason)
        self._drop_waiting(key, reason, "dropped/parked")

    # -- robots.txt --------------------------------------------------------

    def _robots_parsed(self, robotparser: RobotParser, request: Request) -> None:
        hostname = urlparse_cached(request).hostname
        if not hostname:
            return
        ua = self._robots_ua or request.headers.get(b"User-Agent") or self._default_ua
        delay = robots_delay(robotparser, ua)
        if delay is None:
            return
        key = self._key(hostname)
        limit = self.settings.max_crawl_delay
        if self._trace is not None and self._loop is not None:
            over = self.settings.crawl_delay_over_max if limit is not None and delay > limit \
                else None
            self._trace.crawl_delay(self._loop.time(), key, delay, over)
        if limit is not None and delay > limit:
            policy = self.settings.crawl_delay_over_max
            if policy == "skip":
                self.stats.inc_value(_STATS + "crawl_delay_skipped_hosts")
                self._park(key, math.inf,
                           f"politeness: {key} asks Crawl-delay {delay:g}s, above "
                           f"POLITENESS_MAX_CRAWL_DELAY={limit:g}s (policy 'skip')")
                return
            if policy == "cap":
                delay = limit
        state = self.hosts.get(key)
        if state.crawl_delay == 0:
            self.stats.inc_value(_STATS + "crawl_delay_hosts")
        if delay > state.crawl_delay:
            state.crawl_delay = delay
            if self.backend is not None and self._loop is not None:
                task = self._loop.create_task(self.backend.set_crawl_delay(key, delay))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        self._retime(key)
        if self._loop is not None:
            self._pump()

    # -- life cycle ----------------------------------------------------------

    async def _spider_opened(self, spider: Spider) -> None:
        self._loop = asyncio.get_running_loop()
        if self.backend is not None:
            try:
                await self.backend.open()
            except Exception as exc:
                logger.error("politeness: the shared backend (POLITENESS_BACKEND) is "
                             "unreachable: %s", exc)
                raise CloseSpider("politeness_backend_unreachable") from exc
        if self.settings.dns_pin:
            self._install_resolver()
        self._open_observability(spider)
        self._watch = self._loop.call_later(_WATCH_EVERY, self._on_watch)

    def _on_watch(self) -> None:
        """Drop waiters once the engine closes; evict idle state now and then."""
        assert self._loop is not None
        if self._engine_closing():
            self._close_gate("politeness: spider closing")
            return
        now = self._loop.time()
        if self._trace is not None:
            self._trace.tick(now)
        if now >= self._next_log:
            self._next_log = now + self.settings.log_interval
            self._log_stats(now)
        if now - self._last_evict >= min(30.0, self.settings.idle_ttl / 4):
            self._last_evict = now
            cutoff = now - self.settings.idle_ttl
            self.hosts.evict(cutoff)
            self.ips.evict(now - self.settings.send_margin)
            self.dns.evict(cutoff)
            if len(self._exempt) > 65536:
                self._exempt.clear()
            self._sync_dns_stats()
        self._watch = self._loop.call_later(_WATCH_EVERY, self._on_watch)

    def _engine_closing(self) -> bool:
        # Scrapy has no signal for "closing has begun"; the engine slot's
        # ``closing`` Deferred is set at that moment (and the engine waits for
        # every request in progress, including those waiting here).
        engine = getattr(self.crawler, "engine", None)
        slot = getattr(engine, "_slot", None)
        return slot is not None and getattr(slot, "closing", None) is not None

    def _close_gate(self, reason: str) -> None:
        self._closing = True
        if self.backend is not None:  # requests held for a lost backend must not wait on
            self.backend.abort_waiting()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fut in self.gate.drain():
            if not fut.done():
                self.stats.inc_value(_STATS + "dropped/closing")
                fut.set_exception(IgnoreRequest(reason))

    async def _spider_closed(self, spider: Spider) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self._close_gate("politeness: spider closed")
        if self.backend is not None:
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=2.0)
            await self.backend.close()
        self._restore_resolver()
        self._sync_dns_stats()
        self._save_state(spider)
        self._report()
        self._close_trace()

    def host_report(self, top: int | None = None) -> list[dict[str, Any]]:
        """Per-host facts, the hosts that cost the most waiting first."""
        tracked = sorted(self.hosts.items(), key=lambda kv: (-kv[1].waited, kv[0]))
        if top is not None:
            tracked = tracked[:top]
        return [
            {"host": key, "requests": s.requests, "waited": round(s.waited, 3),
             "interval": round(s.interval(), 3), "backoffs": dict(s.backoffs or {}),
             "crawl_delay": s.crawl_delay, "dead": s.dead}
            for key, s in tracked
        ]

    def _report(self) -> None:
        rows = self.host_report(self.settings.report_hosts)
        self.stats.set_value(_STATS + "report", rows)
        if rows:
            lines = "\n".join(
                f"  {r['host']}: {r['requests']} requests, waited {r['waited']:.1f}s, "
                f"interval {r['interval']:g}s, backoffs {r['backoffs'] or 0}, "
                f"crawl-delay {r['crawl_delay']:g}s{', DEAD' if r['dead'] else ''}"
                for r in rows
            )
            logger.info("Politeness report (hosts that waited most):\n%s", lines)

    # -- observability and persistence (README, "Observability and persistence") -----------------

    def _open_observability(self, spider: Spider) -> None:
        assert self._loop is not None
        now = self._start = self._loop.time()
        if self.settings.log_interval > 0:
            self._next_log = now + self.settings.log_interval
        if self.settings.trace is not None:
            c = self.settings.config
            try:
                self._trace = TraceWriter(
                    self.settings.trace, start=now, max_buffer=self.settings.trace_buffer,
                    header={"spider": spider.name, "default": c.default, "floor": c.floor,
                            "ceiling": c.ceiling, "ip_floor": c.ip_floor})
            except OSError as exc:
                logger.error("politeness: cannot open POLITENESS_TRACE=%r: %s; no trace",
                             self.settings.trace, exc)
            else:
                logger.info("politeness: tracing decisions to %s", self.settings.trace)
        self._restore_state(now)

    def _log_stats(self, now: float) -> None:
        oldest = now - next(iter(self._waiters.values())) if self._waiters else 0.0
        snapshot(self.hosts, self._waits, self.gate.waiting, oldest).log(logger)

    def _close_trace(self) -> None:
        trace, self._trace = self._trace, None
        if trace is None:
            return
        trace.close(self._loop.time() if self._loop is not None else None)
        self.stats.set_value(_STATS + "trace/lines", trace.lines)
        self.stats.set_value(_STATS + "trace/dropped", trace.dropped + trace.write_errors)

    def _state_path(self) -> str | None:
        """``JOBDIR/politeness-state.json``, or None when state is not kept in a file."""
        if not self.settings.persist or self.backend is not None:
            return None  # a shared backend keeps the state itself (Redis)
        from scrapy.utils.job import job_dir

        directory = job_dir(self.crawler.settings)
        return None if directory is None else os.path.join(directory, persistence.STATE_FILE)

    def _restore_state(self, now: float) -> None:
        path = self._state_path()
        if path is None:
            return
        try:
            document = persistence.load(path)
        except persistence.StateError as exc:
            logger.warning("politeness: ignoring the saved host state %s (%s); starting "
                           "afresh", path, exc)
            return
        if document is None:
            return
        restored = persistence.restore(self.hosts, document, now, time.time())
        self.stats.set_value(_STATS + "state/restored_hosts", len(restored))
        logger.info("politeness: restored the state of %d hosts from %s", len(restored), path)
        if self._trace is not None:
            for key, state in restored:
                self._trace.restored(now, key, state.interval(), document["hosts"][key])

    def _save_state(self, spider: Spider) -> None:
        path = self._state_path()
        if path is None:
            return
        now = self._loop.time() if self._loop is not None else 0.0
        document = persistence.snapshot(self.hosts.items(), now, time.time())
        try:
            persistence.save(path, document)
        except (OSError, ValueError) as exc:
            logger.error("politeness: could not save the host state to %s: %s", path, exc)
            return
        self.stats.set_value(_STATS + "state/saved_hosts", len(document["hosts"]))

    def _sync_dns_stats(self) -> None:
        st = self.dns.stats
        self.stats.set_value(_STATS + "dns/lookups", st.lookups)
        self.stats.set_value(_STATS + "dns/cache_hits", st.cache_hits)
        self.stats.set_value(_STATS + "dns/failures", st.failures)

    def _install_resolver(self) -> None:
        from .pinning import install  # imports Twisted's reactor: only once the crawl runs

        self._pin = install(self.dns.pinned)

    def _restore_resolver(self) -> None:
        if self._pin is not None:
            self._pin.restore()
            self._pin = None

