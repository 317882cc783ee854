"""Where a slow crawl's time goes: the requests waiting in the scheduler queue.

Requests wait in the scheduler queue more than in the gate, so the live line
and the report read them here. Each host entry counts its queue's
request-seconds (its length integrated over time, which is the sum of its
requests' waits) at each push and pop: O(1), no time kept per request. The
pop that empties a host's queue credits them to the host's state
(``HostState.queue_wait``), and the closing report all that is left. The observer reads
the hosts with requests queued once per period, O(active hosts), and counts
them every tick in O(1).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from scrapy_politeness.downloader.estimates import IGNORED

if TYPE_CHECKING:
    from scrapy_politeness.policy import HostTable
    from scrapy_politeness.scheduler.host_heap import HostEntry, HostHeap

__all__ = ["SchedulerWaits"]


class SchedulerWaits:
    """One scheduler queue's waits, as the observer reads them."""

    __slots__ = ("hosts", "index", "total")

    def __init__(self, index: HostHeap, hosts: HostTable) -> None:
        self.index = index
        self.hosts = hosts
        self.total = 0.0  # request-seconds waited in this queue so far

    def count(self, host: HostEntry, before: int, now: float) -> None:
        """``host``'s queue held ``before`` requests until ``now`` (called as it changes)."""
        start = host.counted if host.counted > host.since else host.since
        if before and now > start:
            added = before * (now - start)
            host.waited += added
            self.total += added
        host.counted = now

    def popped(self, host: HostEntry, key: str, now: float) -> None:
        """A request of ``host`` left; once its queue is empty, its waits go to the
        host's state (:meth:`credit` hands over the rest at the end)."""
        left = len(host.queue)
        self.count(host, left + 1, now)
        if not left:
            self._credit(key, host)

    def _credit(self, key: str, host: HostEntry) -> None:
        """Hand ``host``'s counted waits to its state (kept while it has none yet)."""
        state = self.hosts.peek(key)
        if state is not None:
            state.queue_wait += host.waited
            host.waited = 0.0

    def credit(self, now: float) -> None:
        """Hand every host's waits so far to its state (for the closing report)."""
        for key, host in self.index.hosts.items():
            self.count(host, len(host.queue), now)
            if host.waited:
                self._credit(key, host)

    # -- what the observer reads ------------------------------------------------

    def queued(self, key: str) -> bool:
        """Whether ``key`` has requests queued here: O(1)."""
        host = self.index.hosts.get(key)
        return host is not None and bool(host.queue)

    def waiting_host_count(self) -> int:
        """Hosts with requests queued (or their name being resolved): O(1)."""
        return len(self.index.hosts) - len(self.index.idle)

    def waiting_hosts(self) -> Iterator[tuple[str, int, float]]:
        """(key, requests queued, since when it has had requests queued) per such host.

        O(active hosts + at most ``IDLE_MAX`` idle ones).
        """
        idle = self.index.idle
        for key, host in self.index.hosts.items():
            if key in idle or key == IGNORED:
                continue
            n = len(host.queue)
            if n:
                yield key, n, host.since
