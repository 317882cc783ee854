"""A scheduler priority queue in which requests wait for their buckets.

A request waiting in the gate holds one of Scrapy's ``CONCURRENT_REQUESTS``
(head-of-line blocking), so requests wait HERE: the queue hands the engine
only a request whose host and IP buckets are eligible now (counting those
handed out that the gate has not released yet), else answers ``None`` and
wakes the engine at the soonest eligible instant. The middleware's gate stays
the enforcement point: nothing starts before both buckets allow it.

Each new host name is resolved while its first request waits here (a few
lookups at a time, in the order the hosts will be needed: :mod:`.lookups`), so
the IP bucket is known when the queue chooses. One queue per host key keeps Scrapy's
priorities and order (:mod:`.host_queue`); the hosts' heap is in
:mod:`.host_heap`, ``JOBDIR`` state in :mod:`scrapy_politeness.jobdir.queue_state`.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.utils.httpobj import urlparse_cached

from scrapy_politeness.downloader.estimates import IGNORED
from scrapy_politeness.jobdir import queue_state as saved_state
from scrapy_politeness.scheduler.handed_out import Waker, gate_of, handed_out_for
from scrapy_politeness.scheduler.host_heap import HostEntry, HostHeap
from scrapy_politeness.scheduler.lookups import HOLD_PER_POP, QueueLookups
from scrapy_politeness.scheduler.waits import SchedulerWaits
from scrapy_politeness.scrapy_internals import wake_engine

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.pqueues import QueueProtocol

__all__ = ["PolitenessAwarePriorityQueue", "clock"]

# A request this close to eligible is handed out: the engine's pull (a loop turn
# or two after the wake) then meets the gate's own timer, which releases it on
# the dot, instead of every start slipping by the engine's latency.
_LEAD = 0.02


def clock() -> float:
    """Now on the event loop's clock, the one the gate's instants are on (the queue
    reads time only through this module attribute, so tests can replace it)."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


class PolitenessAwarePriorityQueue:
    """Hands out a request only once its host and IP buckets are eligible.

    Use as ``SCHEDULER_PRIORITY_QUEUE`` (the add-on sets it). A host key's estimate
    counts the requests handed out that the gate has not released yet. ``pop`` hands
    out the soonest request if that estimate is now; else it returns None and arms
    one timer that wakes the engine then. A host whose name is not cached yet is
    held until its lookup ends (a failed lookup is eligible at once: the middleware
    fails it fast). Without the middleware hosts take turns. Its waits are counted
    for the live line and the report (:mod:`.waits`).
    """

    @classmethod
    def from_crawler(cls, crawler: Crawler, downstream_queue_cls: type[QueueProtocol], key: str,
                     startprios: dict[str, Iterable[int]] | None = None, *,
                     start_queue_cls: type[QueueProtocol] | None = None) -> Self:
        return cls(crawler, downstream_queue_cls, key, startprios,
                   start_queue_cls=start_queue_cls)

    def __init__(self, crawler: Crawler, downstream_queue_cls: type[QueueProtocol], key: str,
                 startprios: dict[str, Iterable[int]] | None = None, *,
                 start_queue_cls: type[QueueProtocol] | None = None) -> None:
        saved = saved_state.check_startprios(self, startprios)
        self.crawler = crawler
        self.downstream_queue_cls = downstream_queue_cls
        self.key = key
        self._queues = saved_state.HostQueues(crawler, downstream_queue_cls, key, start_queue_cls)
        self._mw = gate_of(crawler)
        self._handed = handed_out_for(crawler)
        self._handed.add_queue(self)
        self._index = HostHeap()
        self._tick, self._len = 0.0, 0  # _tick: the round-robin clock with no middleware
        self._waker = Waker(crawler, None if self._mw is None else self._woke)
        self._waits: SchedulerWaits | None = None
        self._lookups: QueueLookups | None = None
        self._robots = None if self._mw is None else self._mw.robots_prefetch
        if self._robots is not None:  # a host held for its robots.txt comes back as after a lookup
            self._robots.pace(self._looked_up)
        if self._mw is not None:
            self._mw.add_listener(self._retime)
            self._mw.periodic.robots.queues.append(self._index.hosts)  # its parser is kept
            self._waits = SchedulerWaits(self._index, self._mw.hosts)
            self._mw.observer.watch(self._waits)
            self._lookups = QueueLookups(self._mw.dns, self._mw.settings.dns_concurrency,
                                         self._index, self._looked_up,
                                         skips=self._mw.buckets.skips_lookup)
            self._mw.buckets.from_queue = self._handed.requests  # never awaits DNS for these
        now = clock() if self._mw is not None else self._tick
        self._len = self._queues.restore(saved, self._index, now)

    # -- estimates ---------------------------------------------------------

    def _own(self, host: HostEntry) -> float:
        """The host's own part of its estimate (its IP's part is :meth:`_ip_at`'s),
        never before ``host.since``; the gate's view it came from stays on
        ``host.readiness``."""
        if host.hostname is None:
            return host.since  # restored from disk and not popped yet, or ignored by the gate
        buckets = self._mw.buckets  # type: ignore[union-attr]  # mw: see callers
        readiness = host.readiness = buckets.readiness_for(host.key, host.hostname)
        at = self._handed.own_estimate(readiness)
        return at if at > host.since else host.since

    def _ip_at(self, ip: str, spacing: float) -> float:
        """When ``ip`` would take one more request adding ``spacing``: one IP table read."""
        ready = self._mw.buckets.eligibility.ip_ready(ip)  # type: ignore[union-attr]
        return self._handed.ip_estimate(ip, ready, spacing)

    def _settle(self, now: float) -> tuple[str | None, float, float]:
        return self._index.settle(now, self._own, self._ip_at,
                                  self._mw.ips.floor)  # type: ignore[union-attr]

    def _retime(self, key: str) -> None:
        """The gate changed ``key``'s buckets (feedback, Crawl-delay): estimate it anew
        (entries are lower bounds: one eligible EARLIER would wait for its stale entry)."""
        host = self._index.hosts.get(key)
        if host is None or not host.seq or host.hostname is None:
            return
        self._index.enter(host, self._own(host))

    def _host_key(self, request: Request) -> str:
        if self._mw is None:
            return urlparse_cached(request).hostname or IGNORED
        return self._mw.buckets.queue_key(request)

    def _woke(self, expected: float) -> None:
        """A late wake-up reveals a loop stall, as a late gate timer."""
        self._mw.slip.timer_fired(expected, clock())  # type: ignore[union-attr]

    def _looked_up(self, key: str) -> float | None:
        """Its lookup or robots.txt ended: in the heap unless held for robots.txt; its estimate."""
        host = self._index.hosts.get(key)
        if host is None or host.seq or not host.queue or key in self._index.idle \
                or (self._robots is not None and self._robots.hold(host)):
            return None
        self._index.enter(host, est := self._own(host))
        wake_engine(self.crawler)
        return est

    # -- the queue protocol ------------------------------------------------

    def push(self, request: Request) -> None:
        key = self._host_key(request)
        index = self._index
        host = index.hosts.get(key)
        if host is not None:
            before = len(host.queue)
            host.queue.push(request)  # may raise (unserializable): nothing changed
            self._len += 1
            if self._waits is not None:
                self._waits.count(host, before, clock())
            if "retry_times" in request.meta and self._lookups is not None \
                    and self._lookups.retry(host, request):
                return  # waits for its name to be looked up again
            if host.seq or key not in index.idle:
                return  # in the heap already, or its name is being resolved
            index.wake(key)
        else:
            host = HostEntry(key, self._queues.make(key))
            try:
                host.queue.push(request)
            except BaseException:
                host.queue.close()
                raise
            index.hosts[key] = host
            self._len += 1
        mw = self._mw
        if mw is None:
            index.enter(host, self._tick)
            return
        host.since = now = clock()
        if key == IGNORED:
            index.enter(host, now)
            return
        hostname = urlparse_cached(request).hostname
        host.hostname = hostname = key if hostname == key else hostname  # one string, not two
        if (hostname is not None and self._lookups.first(  # type: ignore[union-attr]
                key, hostname, request)) or (self._robots is not None and self._robots.hold(host)):
            return  # enters when its name or robots.txt (paced: held from the start) came
        index.enter(host, self._own(host))

    def pop(self) -> Request | None:
        handed = self._handed
        mw = self._mw
        index = self._index
        now = clock()
        if handed.requests:
            # Once the scheduler is empty, the engine asks after every download
            # that ends: sweeping then too means that, when the crawl finishes,
            # only requests dropped while closing are left for close() to rescue.
            handed.sweep(now, force=not index and not handed.any_pending())
        for stale in index.expired(now) if index.idle else ():
            self._remove(stale)
        held = 0
        while True:
            key, fresh, soonest = (index.top(), now, now) if mw is None else self._settle(now)
            if key is None or fresh > now + _LEAD:  # nothing eligible: requests wait here
                if key is not None:
                    self._waker.arm(soonest - _LEAD)
                return self._starved()
            host = index.hosts[key]
            if mw is not None and key != IGNORED and (
                    self._lookups.known(host)  # type: ignore[union-attr]
                    or (self._robots is not None and self._robots.hold(host, serving=True))):
                # waits for its name to be looked up (again), or re-timed, or for its robots.txt
                held += 1
                if held >= HOLD_PER_POP:  # each wakes the engine when it is ready
                    return self._starved()
                continue
            request = host.queue.pop()
            if request is None:  # a queue that claimed more than it had
                self._len -= len(host.queue)
                index.rest(host, now)
                self._remove(key)
                continue
            self._len -= 1
            if mw is None:
                self._tick = est = self._tick + 1
            else:
                est = self._handed_out(request, key, host, now)
            if host.queue:
                index.requeue(host, est)
            else:
                index.rest(host, now)
            return request

    def _starved(self) -> Request | None:
        """None ready for the engine (pop answers it): a capacity signal to the robots prefetch."""
        if self._robots is not None:
            self._robots.starved()
        return None

    def _handed_out(self, request: Request, key: str, host: HostEntry, now: float) -> float:
        """Count ``request`` as handed out; the host's next own estimate."""
        if key == IGNORED:
            return now
        self._waits.popped(host, key, now)  # type: ignore[union-attr]  # mw: see callers
        hostname = urlparse_cached(request).hostname
        readiness = host.readiness  # from settle's fresh estimate, at this same instant
        if readiness is None or hostname != host.hostname:
            readiness = self._mw.readiness(request)  # type: ignore[union-attr]
            if readiness is None:
                return now
        self._handed.add(request, readiness.key, readiness.ip, now)
        buckets = self._mw.buckets  # type: ignore[union-attr]
        buckets.handed_out(readiness.key, host.since, len(host.queue))
        host.hostname = hostname
        return max(self._handed.own_estimate(readiness), host.since)

    def next_eligible(self) -> float:
        """When ``pop`` will next hand out a request (``inf`` when empty or resolving)."""
        if self._mw is not None:
            return self._settle(clock())[2]
        return clock() if self._index.top() is not None else math.inf

    def peek(self) -> Request | None:
        """The request ``pop`` would hand out next (needs a downstream ``peek``)."""
        key = self._settle(clock())[0] if self._mw is not None else self._index.top()
        return None if key is None else self._index.hosts[key].queue.peek()

    def _remove(self, key: str) -> None:
        self._index.pop_host(key).queue.close()
        self._queues.reclaim(key)

    def close(self) -> dict[str, list[int]]:
        """Close every host queue; the state to persist is ``{key: priorities}``. A disk
        queue first takes back the requests handed out that never reached the
        downloader (:func:`~scrapy_politeness.jobdir.queue_state.rescue`)."""
        if self.key:
            saved_state.rescue(self._handed, self.push, self.crawler.stats)
        state = self._queues.close(self._index.hosts.values())
        self._index.clear()
        if self._lookups is not None:
            self._lookups.clear()
        self._len = 0
        return state

    def __len__(self) -> int:
        return self._len

    def __contains__(self, key: str) -> bool:
        return (host := self._index.hosts.get(key)) is not None and bool(host.queue)
