"""A scheduler priority queue in which requests wait for their buckets.

A request waiting in the gate holds one of Scrapy's ``CONCURRENT_REQUESTS``:
while the downloader is full of waiters, the scheduler cannot hand out the
hosts behind them (head-of-line blocking). So requests wait HERE instead:
:class:`PolitenessAwarePriorityQueue` hands the engine only a request whose
host and IP buckets are eligible now (counting the requests it already handed
out that the gate has not released yet), and otherwise answers ``None`` and
wakes the engine at the soonest eligible instant. ``CONCURRENT_REQUESTS`` then
counts downloads, not waiters. The middleware's gate stays the enforcement
point: whatever a queue does, nothing starts before both buckets allow it.

Each new host name is resolved when its first request is enqueued (in the
background), so the IP bucket is known when the queue chooses. Within one
host key, Scrapy's priorities and the FIFO/LIFO order of the downstream queue
are kept (one :class:`~scrapy.pqueues.ScrapyPriorityQueue` per key); hosts are
chosen with a lazily re-evaluated heap, a bounded number of gate look-ups per
``pop``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.pqueues import ScrapyPriorityQueue, _path_safe
from scrapy.utils.httpobj import urlparse_cached

from .dns import DnsCache
from .handout import gate_of, handed_out_for, wake_engine
from .meta import bucket_of, bypasses

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy.crawler import Crawler
    from scrapy.pqueues import QueueProtocol
    from typing_extensions import Self

    from .gateview import Hint

__all__ = ["PolitenessAwarePriorityQueue", "clock", "wake_engine"]

logger = logging.getLogger(__name__)

_NETWORK_KEY = ""  # the bucket of requests the gate ignores (data:, file:, no host)
_MAX_REEVAL = 16  # gate look-ups per pop before taking the heap's top as is
_KEY_CACHE = 65536
# A request this close to eligible is handed out: the engine's pull (a loop turn
# or two after the wake) then meets the gate's own timer, which releases it on
# the dot, instead of every start slipping by the engine's latency.
_LEAD = 0.02


def clock() -> float:
    """Now on the event loop's clock, the one the gate's instants are on.

    The queue reads time only through this module attribute, so tests can
    replace it.
    """
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def _probe(request: Request) -> Request | None:
    """A small stand-in request for asking the gate about ``request``'s host.

    Holding the real request would keep a disk-queued request in memory per host.
    """
    parsed = urlparse_cached(request)
    try:
        return Request(f"{parsed.scheme}://{parsed.netloc}/")
    except ValueError:
        return None


class _Host:
    """One host key's requests; ``seq`` names its live heap entry (0: none, e.g. while
    its name resolves), so re-keying it pushes a new entry and the old one is skipped."""

    __slots__ = ("hostname", "probe", "queue", "seq")

    def __init__(self, queue: ScrapyPriorityQueue) -> None:
        self.queue = queue
        self.probe: Request | None = None
        self.hostname: str | None = None
        self.seq = 0


class PolitenessAwarePriorityQueue:
    """Hands out a request only once its host and IP buckets are eligible.

    Use as ``SCHEDULER_PRIORITY_QUEUE`` (the add-on sets it). The estimate for
    a host key with ``p`` requests handed out and not yet released by the gate
    is ``max(host_ready + p * interval, ip_ready + q * ip_interval, now)``
    (``q``: handed out on its IP; the ready instants taken no earlier than
    the first of those was handed out). ``pop`` hands out the soonest request
    if that estimate is now; otherwise it returns None and arms one timer that
    wakes the engine then (:func:`wake_engine`). A host whose name is not
    cached yet is held until its lookup ends (a failed lookup is eligible at
    once: the middleware fails it fast); a name whose cached answer expired
    counts only its host term.

    The heap holds one ``(estimate, seq, key)`` per non-empty host. Estimates
    only grow in the common case (buckets move forward, counts rise), so a
    stored one is a lower bound: ``pop`` re-evaluates the top until it stays
    the smallest (at most ``_MAX_REEVAL`` look-ups), O(log n) for any number
    of hosts. Without the middleware (plugin disabled) hosts take turns.

    Under ``JOBDIR`` each host key has its disk queues in a directory named by
    ``scrapy.pqueues._path_safe``; ``close()`` returns ``{key: priorities}``
    and the constructor's ``startprios`` restores it, as for
    ``DownloaderAwarePriorityQueue``.
    """

    @classmethod
    def from_crawler(
        cls,
        crawler: Crawler,
        downstream_queue_cls: type[QueueProtocol],
        key: str,
        startprios: dict[str, Iterable[int]] | None = None,
        *,
        start_queue_cls: type[QueueProtocol] | None = None,
    ) -> Self:
        return cls(crawler, downstream_queue_cls, key, startprios,
                   start_queue_cls=start_queue_cls)

    def __init__(
        self,
        crawler: Crawler,
        downstream_queue_cls: type[QueueProtocol],
        key: str,
        startprios: dict[str, Iterable[int]] | None = None,
        *,
        start_queue_cls: type[QueueProtocol] | None = None,
    ) -> None:
        if startprios and not isinstance(startprios, dict):
            raise ValueError(
                f"{type(self).__name__} expects its saved state as a dict of host key -> "
                f"priorities, got {type(startprios).__name__}: the JOBDIR was written by "
                "another SCHEDULER_PRIORITY_QUEUE; resume it with the same queue class")
        self.crawler = crawler
        self.downstream_queue_cls = downstream_queue_cls
        self._start_queue_cls = start_queue_cls
        self.key = key
        self._mw = gate_of(crawler)
        self._handed = handed_out_for(crawler)
        self._handed.queues.add(self)
        self._hosts: dict[str, _Host] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count(1)
        self._tick = 0.0  # the round-robin clock when there is no middleware
        self._keys: dict[str, str] = {}  # hostname -> host key
        self._len = 0
        self._wake: asyncio.TimerHandle | None = None
        self._wake_at = math.inf
        self._resolving: set[asyncio.Task[Any]] = set()
        if self._mw is not None:
            self._mw.add_listener(self._retime)
        if startprios:
            now = clock() if self._mw is not None else self._tick
            for host_key, prios in startprios.items():
                queue = self._pqfactory(host_key, prios)
                if not queue:
                    queue.close()
                    continue
                host = self._hosts[host_key] = _Host(queue)
                host.seq = next(self._seq)
                self._heap.append((now, host.seq, host_key))
                self._len += len(queue)

    def _pqfactory(self, host_key: str, startprios: Iterable[int] = ()) -> ScrapyPriorityQueue:
        return ScrapyPriorityQueue(
            self.crawler, self.downstream_queue_cls, self.key + "/" + _path_safe(host_key),
            startprios, start_queue_cls=self._start_queue_cls)

    # -- estimates ---------------------------------------------------------

    def _from_hint(self, hint: Hint, now: float) -> float:
        """When one more request of this host would start.

        With ``p`` handed out and not yet released, the next starts ``p``
        spacings after the bucket is ready, and not before the first of them
        was handed out. Counting from that instant, not from now, keeps the
        estimate still while they wait, so the heap need not re-sort as time
        passes.
        """
        handed = self._handed
        key = hint.key
        pending = handed.by_key.get(key)
        at = hint.host_ready
        if pending:
            since = handed.key_since[key]
            at = (at if at > since else since) + pending * hint.interval
        if at < now:
            at = now
        ip = hint.ip
        if ip is not None:
            pending = handed.by_ip.get(ip)
            ip_at = hint.ip_ready
            if pending:
                since = handed.ip_since[ip]
                ip_at = (ip_at if ip_at > since else since) + pending * hint.ip_interval
            if ip_at > at:
                at = ip_at
        return at

    def _estimate(self, host: _Host, now: float) -> float:
        if host.probe is None or self._mw is None:
            return now  # restored from disk and not popped yet, or ignored by the gate
        hint = self._mw.hint(host.probe)
        return now if hint is None else self._from_hint(hint, now)

    def _top(self) -> str | None:
        """The key of the heap's top live entry, dropping stale ones above it."""
        heap = self._heap
        hosts = self._hosts
        while heap:
            _, seq, key = heap[0]
            host = hosts.get(key)
            if host is not None and host.seq == seq:
                return key
            heapq.heappop(heap)
        return None

    def _settle(self, now: float) -> tuple[str | None, float, float]:
        """The top host, its fresh estimate, and a lower bound of the soonest start.

        Stored estimates are lower bounds, so once the top's fresh estimate is
        no later than the next entries' it is the soonest (and the bound is
        that estimate). The re-evaluation is bounded by ``_MAX_REEVAL``
        look-ups; when they run out, the bound is the smaller of the top's
        fresh estimate and the next stored one, and ``pop`` tries again on the
        engine's next pull.
        """
        heap = self._heap
        hosts = self._hosts
        key = self._top()
        fresh = math.inf
        for _ in range(_MAX_REEVAL):
            if key is None:
                return None, math.inf, math.inf
            host = hosts[key]
            fresh = self._estimate(host, now)
            n = len(heap)
            if n < 2:
                return key, fresh, fresh
            bound = heap[1][0]
            if n > 2 and heap[2][0] < bound:
                bound = heap[2][0]
            if fresh <= (bound if bound > now else now):
                return key, fresh, fresh
            host.seq = next(self._seq)
            heapq.heapreplace(heap, (fresh, host.seq, key))
            key = self._top()
        if key is None:
            return None, math.inf, math.inf
        fresh = self._estimate(hosts[key], now)
        soonest = fresh
        for i in (1, 2):  # the smallest of the rest is a child of the root
            if i < len(heap) and heap[i][0] < soonest:
                soonest = heap[i][0]
        return key, fresh, soonest

    def _enter(self, key: str, host: _Host, est: float) -> None:
        """Give ``host`` a (new) live heap entry; older ones become stale."""
        host.seq = next(self._seq)
        heapq.heappush(self._heap, (est, host.seq, key))
        if len(self._heap) > 2 * len(self._hosts) + 64:  # compact stale entries
            self._heap = [e for e in self._heap
                          if (h := self._hosts.get(e[2])) is not None and h.seq == e[1]]
            heapq.heapify(self._heap)

    def _retime(self, key: str) -> None:
        """The gate changed ``key``'s buckets (feedback, Crawl-delay): estimate it anew.

        Heap entries are lower bounds, so a host that became eligible EARLIER
        (a narrowed interval) would otherwise wait for its stale entry.
        """
        host = self._hosts.get(key)
        if host is None or not host.seq or host.probe is None:
            return
        now = clock()
        self._enter(key, host, self._estimate(host, now))

    def _host_key(self, request: Request) -> str:
        parsed = urlparse_cached(request)
        hostname = parsed.hostname
        mw = self._mw
        if mw is None:
            return hostname or _NETWORK_KEY
        if not hostname or parsed.scheme not in ("http", "https") or bypasses(request.meta):
            return _NETWORK_KEY
        bucket = bucket_of(request.meta, strict=False)
        if bucket is not None:  # a bucket of its own choosing: not cached by host name
            return bucket
        key = self._keys.get(hostname)
        if key is None:
            hint = mw.hint(request)
            key = _NETWORK_KEY if hint is None else hint.key
            if len(self._keys) >= _KEY_CACHE:
                self._keys.clear()
            self._keys[hostname] = key
        return key

    # -- waking the engine ---------------------------------------------------

    def _arm(self, at: float) -> None:
        """Wake the engine at ``at`` (one timer: the earliest asked for)."""
        if at >= self._wake_at:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (unit tests on a fake clock)
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake_at = at
        self._wake = loop.call_at(at, self._on_wake)

    def _on_wake(self) -> None:
        if self._mw is not None:  # a late wake-up reveals a loop stall, as a late gate timer
            self._mw.slip.timer_fired(self._wake_at, clock())
        self._wake = None
        self._wake_at = math.inf
        wake_engine(self.crawler)

    def _resolve(self, key: str, host: _Host, hostname: str) -> None:
        """Look ``hostname`` up in the background; enter the host once it is known."""
        assert self._mw is not None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: the gate resolves it when it gets there
            self._enter(key, host, clock())
            return
        task = loop.create_task(self._mw.dns.resolve(hostname))
        self._resolving.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._resolving.discard(t)
            if self._hosts.get(key) is host and not host.seq:
                self._enter(key, host, self._estimate(host, clock()))
                wake_engine(self.crawler)

        task.add_done_callback(done)

    # -- the queue protocol ------------------------------------------------

    def push(self, request: Request) -> None:
        key = self._host_key(request)
        host = self._hosts.get(key)
        if host is not None:
            host.queue.push(request)  # may raise (unserializable): nothing changed
            self._len += 1
            return
        host = _Host(self._pqfactory(key))
        try:
            host.queue.push(request)
        except BaseException:
            host.queue.close()
            raise
        self._hosts[key] = host
        self._len += 1
        mw = self._mw
        if mw is None:
            self._enter(key, host, self._tick)
            return
        if key == _NETWORK_KEY:
            self._enter(key, host, clock())
            return
        host.probe = _probe(request)
        hostname = host.hostname = urlparse_cached(request).hostname
        if hostname is not None and mw.dns.lookup(hostname) is DnsCache.MISS:
            self._resolve(key, host, hostname)
            return
        self._enter(key, host, self._estimate(host, clock()))

    def pop(self) -> Request | None:
        handed = self._handed
        mw = self._mw
        now = clock()
        if handed.requests:
            # Once the scheduler is empty, the engine asks after every download
            # that ends: sweeping then too means that, when the crawl finishes,
            # only requests dropped while closing are left for close() to rescue.
            handed.sweep(now, force=not self._heap and not any(handed.queues))
        while True:
            if mw is None:
                key, fresh, soonest = self._top(), now, now
            else:
                key, fresh, soonest = self._settle(now)
            if key is None:
                return None
            if fresh > now + _LEAD:  # nothing eligible: requests wait here, not in the gate
                self._arm(soonest - _LEAD)
                return None
            heap = self._heap
            host = self._hosts[key]
            request = host.queue.pop()
            if request is None:  # a queue that claimed more than it had
                self._len -= len(host.queue)
                heapq.heappop(heap)
                self._remove(key)
                continue
            self._len -= 1
            if mw is None:
                self._tick += 1
                est = self._tick
            else:
                hint = mw.hint(request) if key != _NETWORK_KEY else None
                if hint is None:
                    est = now
                else:
                    handed.add(request, hint.key, hint.ip, now)
                    hostname = urlparse_cached(request).hostname
                    if hostname != host.hostname:
                        host.hostname = hostname
                        host.probe = _probe(request)
                    est = self._from_hint(hint, now)
            if host.queue:
                heapq.heapreplace(heap, (est, host.seq, key))
            else:
                heapq.heappop(heap)
                self._remove(key)
            return request

    def next_eligible(self) -> float:
        """When ``pop`` will next hand out a request (``inf`` when empty or resolving)."""
        if self._mw is None:
            return clock() if self._top() is not None else math.inf
        return self._settle(clock())[2]

    def peek(self) -> Request | None:
        """The request ``pop`` would hand out next (needs a downstream ``peek``)."""
        key = self._settle(clock())[0] if self._mw is not None else self._top()
        return None if key is None else self._hosts[key].queue.peek()

    def _remove(self, key: str) -> None:
        host = self._hosts.pop(key)
        host.queue.close()
        if self.key:
            # Reclaim the host's directory; rmdir leaves it if files remain.
            with suppress(OSError):
                Path(self.key, _path_safe(key)).rmdir()

    def close(self) -> dict[str, list[int]]:
        """Close every host queue; the state to persist is ``{key: priorities}``.

        A disk queue first takes back the requests handed out that never
        reached the downloader: the gate drops the requests waiting in it when
        the spider closes, and without this a paused crawl would lose them.
        """
        if self.key:
            self._rescue()
        state = {key: prios for key, host in self._hosts.items() if (prios := host.queue.close())}
        self._hosts.clear()
        self._heap.clear()
        self._len = 0
        return state

    def _rescue(self) -> None:
        rescued = lost = 0
        for request in self._handed.undelivered():
            self._handed.forget(request)
            try:
                self.push(request)
            except ValueError as exc:  # unserializable: it came from the memory queue
                lost += 1
                logger.warning("politeness: cannot keep %s for the next run (JOBDIR): it "
                               "cannot be serialised (%s); it is lost", request, exc)
                continue
            rescued += 1
        stats = self.crawler.stats
        if stats is not None:
            if rescued:
                stats.inc_value("politeness/scheduler/rescued", rescued)
            if lost:
                stats.inc_value("politeness/scheduler/lost_unserializable", lost)

    def __len__(self) -> int:
        return self._len

    def __contains__(self, key: str) -> bool:
        return key in self._hosts
