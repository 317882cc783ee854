"""Requests the scheduler queue handed out that the downloader has not seen yet.

The gate spends a host's bucket only when it releases a request, so requests on
their way to it are invisible in its state; the queue counts them here. Also
the two ways the queue reaches the rest of the crawl: the middleware whose gate
it asks, and the engine it wakes.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals

from scrapy_politeness.downloader.signal_hub import SignalHub
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.scrapy_internals import downloader_active, wake_engine

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_politeness.downloader.estimates import Readiness

__all__ = ["MAX_AGE", "SWEEP_EVERY", "HandedOut", "Waker", "gate_of", "handed_out_for"]

SWEEP_EVERY = 0.25  # seconds between checks for handed-out requests that vanished
MAX_AGE = 600.0  # without an engine to ask, forget a handed-out request after this


class Waker:
    """One timer that wakes the engine at the earliest instant asked for.

    ``on_fire(expected)`` runs first: a late wake-up reveals a loop stall, as
    a late gate timer does.
    """

    __slots__ = ("_crawler", "_on_fire", "at", "handle")

    def __init__(self, crawler: Crawler, on_fire: Callable[[float], None] | None) -> None:
        self._crawler = crawler
        self._on_fire = on_fire
        self.at = math.inf
        self.handle: asyncio.TimerHandle | None = None

    def arm(self, at: float) -> None:
        """Wake the engine at ``at`` (unless a wake-up no later is armed)."""
        if at >= self.at:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (unit tests on a fake clock)
            return
        if self.handle is not None:
            self.handle.cancel()
        self.at = at
        self.handle = loop.call_at(at, self.fire)

    def fire(self) -> None:
        if self._on_fire is not None:
            self._on_fire(self.at)
        self.handle = None
        self.at = math.inf
        wake_engine(self._crawler)


def gate_of(crawler: Crawler) -> PolitenessMiddleware | None:
    """This crawl's politeness middleware, whose gate the queue asks (None: disabled).

    Scheduler queues are built when the spider opens, after the engine and its
    downloader middlewares.
    """
    try:
        return crawler.get_downloader_middleware(PolitenessMiddleware)
    except RuntimeError:  # built outside a crawl: no engine, no gate
        return None


class HandedOut:
    """Requests handed out by the queues of one crawler, not yet seen by the downloader.

    The gate spends a host's bucket only when it releases a request, so the
    requests waiting in front of it are invisible in its state; these counts
    add them back. They are shared by the memory and the disk queue of a
    scheduler. Every way a request can leave clears it: reaching the
    downloader, a response (a cache hit never reaches it), being dropped;
    anything else (an ``IgnoreRequest`` from a middleware fires no signal) is
    swept once the downloader no longer holds the request.
    """

    __slots__ = ("__weakref__", "_crawler", "_last_sweep", "_queues", "by_ip", "by_key", "ip_since",
                 "key_since", "requests")

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = weakref.ref(crawler)  # a strong one would keep the registry's key alive
        self.requests: dict[Request, tuple[str, str | None, float]] = {}
        self.by_key: dict[str, int] = {}
        self.by_ip: dict[str, int] = {}
        # when the count last rose from zero: the earliest a pending request starts
        self.key_since: dict[str, float] = {}
        self.ip_since: dict[str, float] = {}
        self._queues: list[weakref.ref[Any]] = []  # the scheduler's memory and disk queues
        self._last_sweep = float("-inf")
        # Not request_left_downloader: what left had reached it, and was forgotten then.
        hub = SignalHub.of(crawler)  # per-request signals: one receiver each for the plugin
        for signal in (signals.request_reached_downloader, signals.request_dropped,
                       signals.response_received):
            hub.on(signal, self._on_gone)
        crawler.signals.connect(self._on_closed, signal=signals.spider_closed)

    def add_queue(self, queue: Any) -> None:
        self._queues = [r for r in self._queues if r() is not None]
        self._queues.append(weakref.ref(queue))

    def any_pending(self) -> bool:
        """Whether any of the scheduler's queues still holds requests (a plain
        list of references: a WeakSet costs an iterator guard per ``pop``)."""
        for ref in self._queues:
            queue = ref()
            if queue is not None and len(queue):
                return True
        return False

    def add(self, request: Request, key: str, ip: str | None, now: float) -> None:
        if request in self.requests:  # handed out again (rescheduled as is)
            self.forget(request)
        self.requests[request] = (key, ip, now)
        n = self.by_key.get(key, 0)
        if not n:
            self.key_since[key] = now
        self.by_key[key] = n + 1
        if ip is not None:
            n = self.by_ip.get(ip, 0)
            if not n:
                self.ip_since[ip] = now
            self.by_ip[ip] = n + 1

    def own_estimate(self, readiness: Readiness) -> float:
        """When one more request of ``readiness``'s host would start, as far as its
        own bucket goes (its IP's part is :meth:`ip_estimate`).

        With ``p`` handed out and not yet released, the next starts ``p``
        spacings after the bucket is ready, and not before the first of them
        was handed out. Counting from that instant, not from now, keeps the
        estimate still while they wait, so the queue's heap need not re-sort
        as time passes.
        """
        key = readiness.key
        pending = self.by_key.get(key)
        at = readiness.host_ready
        if pending:
            since = self.key_since[key]
            at = (at if at > since else since) + pending * readiness.interval
        return at

    def ip_estimate(self, ip: str, ip_ready: float, ip_interval: float) -> float:
        """The IP's part of an estimate: when ``ip`` (ready at ``ip_ready``)
        would take one more request adding ``ip_interval``."""
        pending = self.by_ip.get(ip)
        if pending:
            since = self.ip_since[ip]
            return (ip_ready if ip_ready > since else since) + pending * ip_interval
        return ip_ready

    def forget(self, request: Request) -> None:
        entry = self.requests.pop(request, None)
        if entry is None:
            return
        key, ip, _ = entry
        n = self.by_key[key] - 1
        if n:
            self.by_key[key] = n
        else:
            del self.by_key[key], self.key_since[key]
        if ip is not None:
            n = self.by_ip[ip] - 1
            if n:
                self.by_ip[ip] = n
            else:
                del self.by_ip[ip], self.ip_since[ip]

    def _on_gone(self, request: Request, **kwargs: Any) -> None:
        self.forget(request)

    def _on_closed(self, **kwargs: Any) -> None:
        for table in (self.requests, self.by_key, self.by_ip, self.key_since, self.ip_since):
            table.clear()

    def _downloader_active(self) -> set[Request] | None:
        crawler = self._crawler()
        return None if crawler is None else downloader_active(crawler)

    def sweep(self, now: float, *, force: bool = False) -> None:
        """Forget requests that left without a signal, so no count leaks.

        The engine puts a request into ``downloader.active`` right after the
        scheduler hands it out and removes it when the download ends however it
        ends; one that is no longer there and was never seen by the downloader
        was dropped on the way (a middleware's ``IgnoreRequest``). O(handed
        out), which ``CONCURRENT_REQUESTS`` bounds, at most every 0.25 s
        unless forced.
        """
        if not force and now - self._last_sweep < SWEEP_EVERY:
            return
        self._last_sweep = now
        active = self._downloader_active()
        if active is not None:
            gone = [r for r in self.requests if r not in active]
        else:
            cutoff = now - MAX_AGE
            gone = [r for r, entry in self.requests.items() if entry[2] < cutoff]
        for request in gone:
            self.forget(request)

    def undelivered(self) -> list[Request]:
        """Handed-out requests that neither reached the downloader nor are in it.

        Empty without an engine to ask: nothing tells a lost request from one
        a caller still holds.
        """
        active = self._downloader_active()
        return [] if active is None else [r for r in self.requests if r not in active]


_HANDED: weakref.WeakKeyDictionary[Crawler, HandedOut] = weakref.WeakKeyDictionary()


def handed_out_for(crawler: Crawler) -> HandedOut:
    """The one count of handed-out requests a crawler's queues share (memory and disk)."""
    handed = _HANDED.get(crawler)
    if handed is None:
        handed = _HANDED[crawler] = HandedOut(crawler)
    return handed
