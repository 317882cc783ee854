"""The scheduler queue's index of host keys: a lazily re-evaluated heap of estimates.

One :class:`HostEntry` per host key (its own Scrapy priority queue), and a heap
of ``(estimate, seq, key)`` with at most one live entry per key. Estimates
only grow in the common case (buckets move forward, counts rise), so a stored
one is a lower bound: :meth:`HostHeap.settle` re-evaluates the top until it
stays the smallest, O(log n) for any number of hosts. Knows nothing of Scrapy
or the gate: the caller passes the estimate function.

A host whose queue empties stays as an idle entry for a few seconds: at high
rates a host's queue empties and refills on every request, and building its
Scrapy queue each time cost more than the rest of the pop.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .gateview import Hint
    from .hostqueue import HostQueue

__all__ = ["IDLE_KEEP", "IDLE_MAX", "MAX_BUMPS", "MAX_REEVAL", "HostEntry", "HostHeap"]

MAX_REEVAL = 16  # gate look-ups per settle before taking the heap's top as is
MAX_BUMPS = 64  # cheap moves (see HostHeap.settle's ``bound``) per settle
IDLE_KEEP = 1.0  # seconds an emptied host keeps its queue, for its next request
IDLE_MAX = 256  # at most this many idle hosts (each holds objects the GC walks; a disk
# queue holds open files)


class HostEntry:
    """One host key's requests. ``seq`` names its live heap entry (0: none, while
    its name resolves or while idle), so re-keying it pushes a new entry and the
    old one is skipped. ``hostname``: the name its requests go to (None: not
    known yet, or the gate ignores them); ``hint``: the gate's view from its
    last estimate."""

    __slots__ = ("hint", "hostname", "key", "queue", "seq")

    def __init__(self, key: str, queue: HostQueue) -> None:
        self.key = key
        self.queue = queue
        self.hostname: str | None = None
        self.seq = 0
        self.hint: Hint | None = None


class HostHeap:
    """Host entries by key, the heap of their estimates, and the idle ones."""

    __slots__ = ("_seq", "heap", "hosts", "idle")

    def __init__(self) -> None:
        self.hosts: dict[str, HostEntry] = {}
        self.heap: list[tuple[float, int, str]] = []
        self.idle: dict[str, float] = {}  # key -> when it emptied, oldest first
        self._seq = itertools.count(1)

    def __bool__(self) -> bool:
        return bool(self.heap)

    def enter(self, key: str, host: HostEntry, est: float) -> None:
        """Give ``host`` a (new) live heap entry; older ones become stale."""
        host.seq = next(self._seq)
        heapq.heappush(self.heap, (est, host.seq, key))
        if len(self.heap) > 2 * len(self.hosts) + 64:  # compact stale entries
            hosts = self.hosts
            self.heap = [e for e in self.heap
                         if (h := hosts.get(e[2])) is not None and h.seq == e[1]]
            heapq.heapify(self.heap)

    def top(self) -> str | None:
        """The key of the heap's top live entry, dropping stale ones above it."""
        heap = self.heap
        hosts = self.hosts
        while heap:
            _, seq, key = heap[0]
            host = hosts.get(key)
            if host is not None and host.seq == seq:
                return key
            heapq.heappop(heap)
        return None

    def settle(self, now: float, estimate: Callable[[HostEntry, float], float],
               bound: Callable[[HostEntry], float] | None = None,
               ) -> tuple[str | None, float, float]:
        """The top host, its fresh estimate, and a lower bound of the soonest start.

        Stored estimates are lower bounds, so once the top's fresh estimate is
        no later than the next entries' it is the soonest (and the bound is
        that estimate). The re-evaluation is bounded by ``MAX_REEVAL``
        look-ups; when they run out, the bound is the smaller of the top's
        fresh estimate and the next stored one, and the caller tries again on
        the engine's next pull.

        ``bound(host)``, if given, is a cheap lower bound of ``estimate``
        (``-inf``: none known): a top entry below it moves there without a
        look-up. Hosts sharing a busy IP were all left behind by its last
        start; each would otherwise cost a full look-up to find out.
        """
        heap = self.heap
        hosts = self.hosts
        key = self.top()
        looked = bumped = 0
        while key is not None and looked < MAX_REEVAL:
            host = hosts[key]
            n = len(heap)
            limit = math.inf if n < 2 else heap[1][0]
            if n > 2 and heap[2][0] < limit:
                limit = heap[2][0]
            if limit < now:
                limit = now
            # Moved by its bound only when a look-up would move it too (the bound is
            # past the next entries): a tie goes to the host looked up, as before.
            if bound is not None and bumped < MAX_BUMPS:  # n < 2: limit is inf
                floor = bound(host)
                if floor > limit:
                    bumped += 1
                    host.seq = next(self._seq)
                    heapq.heapreplace(heap, (floor, host.seq, key))
                    key = self.top()
                    continue
            looked += 1
            fresh = estimate(host, now)
            if fresh <= limit:
                return key, fresh, fresh
            host.seq = next(self._seq)
            heapq.heapreplace(heap, (fresh, host.seq, key))
            key = self.top()
        if key is None:
            return None, math.inf, math.inf
        fresh = estimate(hosts[key], now)
        soonest = fresh
        for i in (1, 2):  # the smallest of the rest is a child of the root
            if i < len(heap) and heap[i][0] < soonest:
                soonest = heap[i][0]
        return key, fresh, soonest

    def requeue_top(self, key: str, host: HostEntry, est: float) -> None:
        """The top entry (``key``'s live one) moves to ``est``."""
        heapq.heapreplace(self.heap, (est, host.seq, key))

    def rest(self, key: str, host: HostEntry, now: float) -> None:
        """``key`` (the top entry) emptied: it leaves the heap and idles."""
        heapq.heappop(self.heap)
        host.seq = 0
        host.hint = None
        self.idle[key] = now

    def wake(self, key: str) -> None:
        """An idle ``key`` got a request again."""
        del self.idle[key]

    def expired(self, now: float) -> Sequence[str]:
        """Idle keys to drop now (idle longer than ``IDLE_KEEP``, or too many idle)."""
        idle = self.idle
        cutoff = now - IDLE_KEEP
        if len(idle) <= IDLE_MAX and next(iter(idle.values())) > cutoff:
            return ()  # the oldest is still fresh: the usual answer, with no list built
        out: list[str] = []
        for key, since in idle.items():
            if since > cutoff and len(idle) - len(out) <= IDLE_MAX:
                break
            out.append(key)
        for key in out:
            del idle[key]
        return out

    def pop_host(self, key: str) -> HostEntry:
        """Forget ``key`` (its heap entries go stale)."""
        self.idle.pop(key, None)
        return self.hosts.pop(key)

    def clear(self) -> None:
        self.hosts.clear()
        self.heap.clear()
        self.idle.clear()
