"""The scheduler queue's index of host keys: lazily re-evaluated heaps of estimates.

One :class:`HostEntry` per host key (its own Scrapy priority queue). The hosts
whose requests share an IP bucket form an :class:`IPGroup`: the group's heap
orders them by their OWN part of the estimate (their host bucket, their
requests handed out), and a single entry in the top heap stands for the whole
group, at a lower bound of its soonest start. A start on an IP then moves one
group entry instead of leaving the entries of every vhost behind that IP stale
(at 50 hosts an IP, each start left 49 to be moved one by one). Hosts without an
IP bucket (a name not resolved yet, an exempt network, no gate) sit in the top
heap themselves. The entries are in :mod:`~scrapy_politeness.scheduler.heap_entries`.

Estimates only grow in the common case (buckets move forward, counts rise), so
a stored one is a lower bound: :meth:`HostHeap.settle` re-evaluates the top
until it stays the smallest, O(log n) for any number of hosts and IPs. Knows
nothing of Scrapy or the gate: the caller passes the estimate functions.

A host whose queue empties stays as an idle entry for a few seconds: at high
rates a host's queue empties and refills on every request, and building its
Scrapy queue each time cost more than the rest of the pop.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from typing import cast

from scrapy_politeness.scheduler.heap_entries import (
    Entry,
    HeapEntry,
    HostEntry,
    IPGroup,
    live,
    next_two,
)

__all__ = ["IDLE_KEEP", "IDLE_MAX", "MAX_BUMPS", "MAX_REEVAL", "HostEntry", "HostHeap", "IPGroup"]

MAX_REEVAL = 16  # gate look-ups per settle before taking the best found as is
MAX_BUMPS = 64  # cheap moves of a group by its IP's state (one table read) per settle
IDLE_KEEP = 1.0  # seconds an emptied host keeps its queue, for its next request
IDLE_MAX = 256  # at most this many idle hosts (each holds objects the GC walks; a disk
# queue holds open files)

Own = Callable[[HostEntry], float]
IPAt = Callable[[str, float], float]


class HostHeap:
    """Host entries by key, the heaps of their estimates, and the idle ones."""

    __slots__ = ("_seq", "groups", "heap", "hosts", "idle")

    def __init__(self) -> None:
        self.hosts: dict[str, HostEntry] = {}
        self.heap: list[HeapEntry] = []
        self.groups: dict[str, IPGroup] = {}
        self.idle: dict[str, float] = {}  # key -> when it emptied, oldest first
        self._seq = itertools.count(1)

    def __bool__(self) -> bool:
        return bool(self.heap)

    def enter(self, host: HostEntry, est: float) -> None:
        """Give ``host`` a (new) live entry at ``est``; older ones become stale.

        It goes to the group of ``host.readiness``'s IP bucket, ``est`` being its own
        part there, or to the top heap when it has none.
        """
        readiness = host.readiness
        ip = None if readiness is None else readiness.ip
        host.seq = seq = next(self._seq)
        old = host.group
        if ip is None:
            if old is not None:
                old.live -= 1
                host.group = None
            self._push_top(est, seq, host)
            return
        group = self.groups.get(ip)
        if group is None:
            group = self.groups[ip] = IPGroup(ip)
        if old is not group:
            if old is not None:
                old.live -= 1
            group.live += 1
            host.group = group
        heapq.heappush(group.finishing if host.finishing else group.heap, (est, seq, host))
        if len(group.heap) + len(group.finishing) > 2 * group.live + 16:  # compact, in place
            for sub in (group.heap, group.finishing):
                sub[:] = [e for e in sub if e[2].seq == e[1]]
                heapq.heapify(sub)
        if est < group.at or not group.seq:  # a lower bound of the group no longer
            group.seq = gseq = next(self._seq)
            group.at = est
            self._push_top(est, gseq, group)

    def _push_top(self, est: float, seq: int, entry: Entry) -> None:
        heapq.heappush(self.heap, (est, seq, entry))
        if len(self.heap) > 2 * (len(self.hosts) + len(self.groups)) + 64:
            # compact stale entries in place: settle holds the list
            self.heap[:] = [e for e in self.heap if e[2].seq == e[1]]
            heapq.heapify(self.heap)

    def top(self) -> str | None:
        """The key of the best stored host (no re-evaluation), dropping stale entries."""
        while True:
            entry = live(self.heap)
            if entry is None or isinstance(entry, HostEntry):
                return None if entry is None else entry.key
            host = live(entry.finishing) or live(entry.heap)
            if host is not None:
                return cast(HostEntry, host).key
            self._drop_top_group(entry)

    def _drop_top_group(self, group: IPGroup) -> None:
        """``group`` (the top entry) holds no live host: it leaves."""
        heapq.heappop(self.heap)
        group.seq = 0
        group.at = math.inf
        if not group.live and self.groups.get(group.ip) is group:
            del self.groups[group.ip]

    def _rekey_top(self, entry: Entry, at: float) -> None:
        """The top entry moves to ``at``."""
        entry.seq = seq = next(self._seq)
        if isinstance(entry, IPGroup):
            entry.at = at
        heapq.heapreplace(self.heap, (at, seq, entry))

    def settle(self, now: float, own: Own, ip_at: IPAt, floor: float
               ) -> tuple[str | None, float, float]:
        """The host to serve, its fresh estimate, and a lower bound of the soonest start.

        ``own(host)`` is a host's own part of its estimate (it refreshes
        ``host.readiness``); ``ip_at(ip, spacing)`` when ``ip`` takes one more
        request that adds ``spacing``; ``floor`` the least spacing any request
        adds to an IP. A group is moved by its IP's state alone (one table read)
        while that is past the next entries; otherwise its best host by its own
        part is found in its heap as in the top one, and served if its whole
        estimate is still no later than the next entries'. Gate look-ups are
        bounded by ``MAX_REEVAL``: when they run out, the best host found is
        returned with the smaller of its estimate and the next stored one as
        the bound, and the caller tries again on the engine's next pull.
        """
        heap = self.heap
        looked = bumped = 0
        while True:
            entry = live(heap)
            if entry is None:
                return None, math.inf, math.inf
            limit = next_two(heap)
            if limit < now:
                limit = now
            if isinstance(entry, HostEntry):  # no IP bucket
                fresh = own(entry)
                looked += 1
                readiness = entry.readiness
                if readiness is not None and readiness.ip is not None:  # resolved: to its group
                    heapq.heappop(heap)
                    self.enter(entry, fresh)
                    continue
                if fresh <= limit:
                    return entry.key, fresh, fresh
                if looked >= MAX_REEVAL:
                    return entry.key, fresh, min(fresh, next_two(heap))
                self._rekey_top(entry, fresh)
                continue
            last, cold = live(entry.finishing), live(entry.heap)
            if last is None and cold is None:
                self._drop_top_group(entry)
                continue
            at = ip_at(entry.ip, floor)
            stored = min(entry.finishing[0][0] if last is not None else math.inf,
                         entry.heap[0][0] if cold is not None else math.inf)
            if stored > at:
                at = stored
            if at > limit and bumped < MAX_BUMPS:  # its IP (or its best host) moved on
                bumped += 1
                self._rekey_top(entry, at)
                continue
            best, fresh, looked = self._best_in_group(entry, own, ip_at, looked)
            if best is None:  # a host moved to another heap: look at the top again
                continue
            if fresh <= limit:
                return best.key, fresh, fresh
            if looked >= MAX_REEVAL:
                return best.key, fresh, min(fresh, next_two(heap))
            # Exact when no request of the IP is on its way (then every host's IP part
            # is the IP's next-eligible instant); else a host of smaller spacing may
            # have been a little sooner, and waits for this one's estimate.
            self._rekey_top(entry, fresh)

    def _best_in_group(self, group: IPGroup, own: Own, ip_at: IPAt, looked: int
                       ) -> tuple[HostEntry | None, float, int]:
        """The group's host that starts soonest (a finishing one on a tie), its
        whole estimate, and the look-ups so far; None when a host moved."""
        best: HostEntry | None = None
        fresh = math.inf
        for sub in (group.finishing, group.heap):
            top = live(sub)
            if top is None:
                continue
            found, fresh_own, looked = self._settle_group(
                group, sub, cast(HostEntry, top), own, looked)
            if found is None:
                return None, fresh, looked
            full = ip_at(group.ip, found.readiness.ip_interval)  # type: ignore[union-attr]
            if fresh_own > full:
                full = fresh_own
            if full < fresh:
                best, fresh = found, full
        return best, fresh, looked

    def _settle_group(self, group: IPGroup, inner: list[HeapEntry], host: HostEntry, own: Own,
                      looked: int) -> tuple[HostEntry | None, float, int]:
        """The best host of one of the group's heaps by its own part, that part,
        and the look-ups so far.

        None for the host when one turned out to be on another IP now (its name
        resolved anew): it moved, and the top heap may have changed.
        """
        while True:
            fresh = own(host)
            looked += 1
            readiness = host.readiness
            if readiness is None or readiness.ip != group.ip:
                heapq.heappop(inner)
                self.enter(host, fresh)
                return None, fresh, looked
            if fresh <= next_two(inner) or looked >= MAX_REEVAL:
                return host, fresh, looked
            host.seq = seq = next(self._seq)
            heapq.heapreplace(inner, (fresh, seq, host))
            host = cast(HostEntry, live(inner))  # never empty: host is in it

    def requeue(self, host: HostEntry, est: float) -> None:
        """``host``, the best of its heap, was served and moves to ``est`` (its own
        part in a group, among the finishing hosts once one request is left)."""
        group = host.group
        if group is None:
            heapq.heapreplace(self.heap, (est, host.seq, host))
            return
        finishing = len(host.queue) == 1
        if finishing == host.finishing:
            heapq.heapreplace(group.finishing if finishing else group.heap,
                              (est, host.seq, host))
            return
        heapq.heappop(group.finishing if host.finishing else group.heap)
        host.finishing = finishing
        heapq.heappush(group.finishing if finishing else group.heap, (est, host.seq, host))

    def rest(self, host: HostEntry, now: float) -> None:
        """``host`` (the best of its heap) emptied: it leaves the heaps and idles."""
        group = host.group
        if group is None:
            heapq.heappop(self.heap)
        else:
            heapq.heappop(group.finishing if host.finishing else group.heap)
            group.live -= 1
            host.group = None
        host.seq = 0
        host.readiness = None
        host.finishing = False
        self.idle[host.key] = now

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
        """Forget ``key`` (an idle host: it holds no heap entry)."""
        self.idle.pop(key, None)
        return self.hosts.pop(key)

    def clear(self) -> None:
        self.hosts.clear()
        self.heap.clear()
        self.groups.clear()
        self.idle.clear()
