"""The Scrapy glue: a downloader middleware that enforces both buckets.

Priority 950, the nearest to the download handler of the stock chain: after
HttpCacheMiddleware (900), so cache hits return before reaching the gate and
are neither delayed nor counted; and, because ``process_response`` and
``process_exception`` run in reverse priority order, before RetryMiddleware
(550) turns a 429/5xx or a transport error into a retry, so every outcome is
fed back first.

With the plugin's scheduler queue, requests wait in the scheduler until their
buckets allow; with any other queue they wait here. The parts are in ``downloader/``
(the gate on the event loop, the send lateness, slots, feedback), ``distributed/``
(the shared backend), ``observe/`` and ``jobdir/``; the decisions in ``policy/``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.httpobj import urlparse_cached

from scrapy_politeness.distributed import make_backend
from scrapy_politeness.distributed.sync import SharedSync, SuspendedElsewhere
from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.downloader.address_fallback import AddressFallback
from scrapy_politeness.downloader.cdn_edges import watch_edges
from scrapy_politeness.downloader.crawl_delays import CrawlDelays
from scrapy_politeness.downloader.dropped_hosts import DroppedHosts
from scrapy_politeness.downloader.estimates import NETWORK_SCHEMES, Readiness, RequestBuckets
from scrapy_politeness.downloader.failure_kinds import log_dns_errors_on_one_line
from scrapy_politeness.downloader.feedback import Outcomes
from scrapy_politeness.downloader.gate_driver import GateDriver, Waiter
from scrapy_politeness.downloader.gc_freeze import freeze_start_heap
from scrapy_politeness.downloader.host_keys import HostKeys
from scrapy_politeness.downloader.loop_lag import LoopMonitor
from scrapy_politeness.downloader.periodic import PeriodicTasks
from scrapy_politeness.downloader.send_lateness import SendSlip
from scrapy_politeness.downloader.signal_hub import SignalHub
from scrapy_politeness.downloader.slot_tickets import Tickets
from scrapy_politeness.downloader.suspended_hosts import SuspendedHosts
from scrapy_politeness.downloader.watchdog import Watchdog
from scrapy_politeness.jobdir.learnt_state import JobState
from scrapy_politeness.observe.observer import STATS, Observer
from scrapy_politeness.policy import Gate, HostTable, IPTable
from scrapy_politeness.policy.cdn_edges import CdnEdges
from scrapy_politeness.scheduler.robots_prefetch import RobotsPrefetch
from scrapy_politeness.sending import Sender
from scrapy_politeness.settings import PolitenessSettings
from scrapy_politeness.startup import load_settings, start_line, warn_missing_internals

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from scrapy_politeness.dns.pinning import Pin

__all__ = ["PolitenessMiddleware", "Readiness"]  # Readiness: re-exported for the queue

logger = logging.getLogger(__name__)


class PolitenessMiddleware:
    """Per-host and per-IP buckets in step, fed back by every outcome.

    See docs/reference/settings.md for the settings; the policy itself lives in
    :mod:`scrapy_politeness.policy` and knows nothing of Scrapy.
    """

    DOWNLOAD_PRIORITY = 950

    def __init__(self, crawler: Crawler, settings: PolitenessSettings) -> None:
        self.crawler = crawler
        self.settings = settings
        self.stats = crawler.stats
        self.hosts = HostTable(settings.config, dead_after=settings.dead_after,
                               overrides=dict(settings.hosts))
        edges = CdnEdges() if settings.cdn_edges else None
        self.ips = IPTable(settings.config.ip_floor, settings.ip_model, edges=edges,
                           edge_floor=settings.edge_floor)
        self.gate: Gate[Waiter] = Gate(
            self.hosts, self.ips, margin=settings.send_margin,
            max_in_flight=crawler.settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN"))
        log_dns_errors_on_one_line()
        self.dns = DnsCache(
            nameservers=settings.dns_nameservers, timeout=settings.dns_timeout,
            min_ttl=settings.dns_min_ttl, max_ttl=settings.dns_max_ttl,
            negative_ttl=settings.dns_negative_ttl, hosts_file=settings.dns_hosts_file,
            resolv_conf=settings.dns_resolv_conf)
        # A recognised edge has no IP bucket, unless POLITENESS_EDGE_FLOOR spaces it.
        self.keys = HostKeys(settings.grouping, settings.ip_exempt,
                             edges if settings.edge_floor <= 0 else None)
        self.slip = SendSlip(self.hosts, self.ips, settings.send_margin)
        self.driver = GateDriver(self.gate, self.stats, self.slip.timer_fired, self.slip.check,
                                 self.slip.released)
        self.slip.on_earlier = self.driver.retime
        self.observer = Observer(settings, self.stats, self.hosts, self.gate)
        self.dropped = DroppedHosts(self.hosts, self.driver, self.observer, self.stats)
        self.buckets = RequestBuckets(settings, self.gate.eligibility, self.dns, self.keys,
                                      stats=self.stats)
        self.readiness = self.buckets.readiness  # what the scheduler queue asks
        bot = crawler.settings.get("BOT_NAME") or "scrapy"
        backend = make_backend(
            settings.backend, namespace=settings.namespace or f"politeness:{bot}",
            on_loss=settings.backend_on_loss, margin=settings.send_margin,
            idle_margin=settings.idle_ttl)
        self.backend = backend
        self.edges = watch_edges(edges, self.stats, settings.edge_floor, backend, self.dns)
        self.shared = None if backend is None else SharedSync(
            backend, self.hosts, self.slip, self.stats, on_dead=self._died_elsewhere,
            on_change=self.driver.retime)
        self.suspended = SuspendedHosts(crawler, settings, self.driver, self.observer, self.shared)
        self.outcomes = Outcomes(
            self.gate, self.hosts, driver=self.driver, dropped=self.dropped, observer=self.observer,
            stats=self.stats, shared=self.shared, max_retry_after=settings.max_retry_after,
            suspended=self.suspended)
        self.jobstate = JobState(settings, crawler.settings, self.suspended.kept, bool(backend))
        self.jobstate.inspect()  # now: before the scheduler opens the JOBDIR
        # The crawl's own loop lag, measured while any download holds a slot.
        self.loop_lag = LoopMonitor(lambda: self.tickets.held)
        self.tickets = Tickets(crawler, driver=self.driver, outcomes=self.outcomes,
                               hosts=self.hosts, loop_lag=self.loop_lag, slip=self.slip,
                               fallback=AddressFallback(self.dns, self.stats), edges=self.edges)
        self._dispatched = self.tickets.held  # request -> its dispatch, until its slot is freed
        self.sender = Sender(
            hosts=self.hosts, ips=self.ips, slip=self.slip, shared=self.shared, dns=self.dns,
            dns_pin=settings.dns_pin, dropped=self.dropped, suspended=self.suspended,
            observer=self.observer, crawler=crawler,
            loop_lag=self.loop_lag, held=self._dispatched, stats=self.stats,
            margin=settings.send_margin)
        self.watchdog = Watchdog(self.gate, self.driver, self.hosts, self.stats,
                                 timeout=crawler.settings.getfloat("DOWNLOAD_TIMEOUT"),
                                 live=self.tickets.live)
        self._pin: Pin | None = None
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        self.crawl_delays = CrawlDelays(self, crawler.settings, crawler)
        crawler.signals.connect(self.crawl_delays.parsed, signal=signals.robots_parsed)
        SignalHub.of(crawler).on(signals.headers_received, self._headers_received)
        self.robots_prefetch = RobotsPrefetch.connect(crawler, settings, self.stats)
        self.periodic = PeriodicTasks(
            crawler, settings, gate=self.gate, driver=self.driver, hosts=self.hosts, ips=self.ips,
            dns=self.dns, keys=self.keys, dropped=self.dropped, observer=self.observer,
            suspended=self.suspended, on_closing=self._close_gate, chores=self._chores)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = load_settings(crawler.settings, crawler)
        if not settings.enabled:
            raise NotConfigured("POLITENESS_ENABLED is False")
        logger.info("%s", start_line(settings, crawler.settings))
        return cls(crawler, settings)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The crawl's event loop, once the spider opened (or a request came)."""
        return self.driver.loop

    @loop.setter
    def loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.driver.loop = self.slip.loop = loop
        if self.shared is not None:
            self.shared.loop = loop

    # -- what the scheduler queue asks --------------------------------------

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(key)`` whenever the gate re-times a host key (the queue)."""
        self.driver.add_listener(listener)

    # -- the request ---------------------------------------------------------

    async def process_request(self, request: Request) -> Request | None:
        if request in self._dispatched:  # the same object again, its last pass unreported
            self.tickets.reentered(request)
        try:
            await self._process_request(request)
        except SuspendedElsewhere:  # back to the scheduler: it waits there with its host
            self.tickets.abort(request)
            self.stats.inc_value(STATS + "shared/requeued_suspended")
            return request.replace(dont_filter=True)
        except BaseException:  # an error, a cancellation while a booked start sleeps
            self.tickets.abort(request)  # frees its slot if the gate had let it through
            raise
        return None

    async def _process_request(self, request: Request) -> None:
        parsed = urlparse_cached(request)
        if parsed.scheme not in NETWORK_SCHEMES or not parsed.hostname:
            return
        hostname = parsed.hostname
        loop = self.driver.loop
        if loop is None:
            loop = self.loop = asyncio.get_running_loop()
        route = await self.buckets.route(request, hostname, loop, self.dropped.check)
        if route is None:  # it bypasses the gate
            return
        key, ip = route
        if self.hosts.whole(key) is None:  # first seen, or forgotten once idle
            await self.crawl_delays.relearn(request)
        submitted = loop.time()
        bucket = self.keys.ip_bucket(ip)
        release, waited_in_gate = await self.driver.wait(key, bucket, submitted)
        await self.sender.send(request, release, ip=ip, bucket=bucket, hostname=hostname,
                               submitted=submitted, waited_in_gate=waited_in_gate, loop=loop)

    def _headers_received(self, request: Request, **kwargs: Any) -> None:
        dispatch = self._dispatched.get(request)
        latency = request.meta.get("download_latency")
        loop = self.driver.loop
        if dispatch is not None and latency is not None and loop is not None:
            now = loop.time()
            dispatch.loop_lag = self.loop_lag.busy(now) - dispatch.busy
            self.slip.headers_received(dispatch, latency, now)

    # -- the outcome ---------------------------------------------------------

    # A download's own end frees its slot (slot_tickets.py); these see what it did not end.

    def process_response(self, request: Request, response: Response) -> Response:
        self.tickets.response(request, response)
        return response

    def process_exception(self, request: Request, exception: Exception) -> Request | None:
        self.tickets.exception(request, exception)
        return AddressFallback.again(request)  # the name's next address, if it has one

    def _chores(self, now: float) -> None:
        if self.edges is not None:
            self.edges.read_fleet(now)  # every SHARE_EVERY s, with Redis
        self.tickets.sweep()
        self.watchdog.check(now)
        self.suspended.tick(now)

    def _died_elsewhere(self, key: str) -> None:
        self.dropped.dead(key, f"politeness: host {key} is dead (declared by another crawler)")
        self.driver.pump()

    # -- life cycle --------------------------------------------------------------

    async def _spider_opened(self, spider: Spider) -> None:
        loop = self.loop = asyncio.get_running_loop()
        warn_missing_internals(self.crawler)
        if self.settings.gc_freeze:
            frozen = freeze_start_heap()
            if frozen is not None:
                self.stats.set_value(STATS + "gc_frozen", frozen)
                logger.info("scrapy-politeness: %d start-up objects frozen (gc.freeze, "
                            "POLITENESS_GC_FREEZE), so full garbage collections stay short",
                            frozen)
        if self.shared is not None:
            await self.shared.open()
            if self.edges is not None:
                await self.edges.read_fleet_now()  # the fleet's edges, before the first request
        if self.settings.dns_pin:
            from scrapy_politeness.dns.pinning import (
                install,  # imports Twisted's reactor: only once the crawl runs
            )

            self._pin = install(self.dns.pinned)
        now = loop.time()
        self.observer.open(spider, now)
        self.jobstate.restore(self.hosts, self.ips, now, self.stats, self.observer.trace)
        self.periodic.start(loop)
        self.loop_lag.start(loop)

    def _close_gate(self, reason: str) -> None:
        if self.shared is not None:  # requests held for the backend must not wait on
            self.shared.abort_waiting(reason)
        self.driver.close(reason)

    async def _spider_closed(self, spider: Spider) -> None:
        self.periodic.stop()
        self.loop_lag.stop()
        self._close_gate("politeness: spider closed")
        if self.robots_prefetch is not None:
            self.robots_prefetch.close()
        if self.shared is not None:
            await self.shared.close()
        if self._pin is not None:
            self._pin.restore()
            self._pin = None
        self.observer.sync_dns_stats(self.dns)
        now = self.loop.time() if self.loop is not None else None
        self.jobstate.save(self.hosts, self.ips, now or 0.0, self.stats)
        self.observer.report(now)
        if self.edges is not None:
            self.edges.report()
        self.observer.close(now)

    def host_report(self, top: int | None = None) -> list[dict[str, Any]]:
        """Per-host facts, the hosts that cost the most waiting first."""
        return self.observer.host_report(top)
