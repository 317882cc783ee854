"""The entries of the scheduler queue's heaps: a host key's, and an IP bucket's group.

A heap entry is ``(estimate, seq, entry)``; ``seq`` is unique, so the entry
itself is never compared, and an entry is live while its object's ``seq``
still names it (re-keying pushes a new entry; the old one is skipped).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from scrapy_politeness.downloader.estimates import Readiness
    from scrapy_politeness.scheduler.host_queue import HostQueue

__all__ = ["Entry", "HeapEntry", "HostEntry", "IPGroup", "live", "next_two"]


class HostEntry:
    """One host key's requests. ``seq`` names its live heap entry (0: none, while
    its name resolves or while idle), so re-keying it pushes a new entry and the
    old one is skipped. ``group``: the IP group whose heap holds that entry (None:
    the top heap). ``hostname``: the name its requests go to (None: not known
    yet, or the gate ignores them); ``readiness``: the gate's view from its last
    estimate; ``since``: when it last got a request with none queued (its
    estimate is never earlier: hosts that became ready take turns in that
    order, and an estimate does not go stale as time passes). ``waited``: the
    request-seconds its queue held since ``counted`` not yet credited to the
    host's state (:mod:`~scrapy_politeness.scheduler.waits`)."""

    __slots__ = ("counted", "finishing", "group", "hostname", "key", "queue", "readiness", "seq",
                 "since", "waited")

    def __init__(self, key: str, queue: HostQueue) -> None:
        self.key = key
        self.queue = queue
        self.hostname: str | None = None
        self.seq = 0
        self.readiness: Readiness | None = None
        self.group: IPGroup | None = None
        self.since = 0.0
        self.finishing = False  # served, and down to its last request (see IPGroup)
        self.waited = 0.0
        self.counted = 0.0

    def hold(self) -> None:
        """Leave the heaps (the live entry goes stale) while the name is looked
        up again; ``HostHeap.enter`` puts it back."""
        group = self.group
        if group is not None:
            group.live -= 1
            self.group = None
        self.seq = 0
        self.readiness = None
        self.finishing = False


class IPGroup:
    """The hosts of one IP bucket, by their own estimates. ``seq`` names the
    group's live entry in the top heap, at ``at``; ``live``: hosts it holds.

    Hosts just served and down to their last request are ``finishing`` (their
    own heap): when one would start at the same instant as another host (both
    ready by the IP's next turn) it goes first, so its last page follows on
    its open connection and the host is done, instead of every host of the IP
    being opened before any is finished (1,500 hosts x 2 pages: the second
    page 6 s after the first, 1,500 connections held open, the crawl 4%
    slower). Hosts with more to fetch take turns.
    """

    __slots__ = ("at", "finishing", "heap", "ip", "live", "seq")

    def __init__(self, ip: str) -> None:
        self.ip = ip
        self.heap: list[HeapEntry] = []  # cold hosts
        self.finishing: list[HeapEntry] = []
        self.live = 0
        self.seq = 0
        self.at = math.inf


Entry = Union[HostEntry, IPGroup]  # noqa: UP007 - a runtime alias for Python 3.11's heaps
HeapEntry = tuple[float, int, Entry]


def live(heap: list[HeapEntry]) -> Entry | None:
    """The object of ``heap``'s top live entry, dropping stale ones above it."""
    while heap:
        entry = heap[0]
        if entry[2].seq == entry[1]:
            return entry[2]
        heapq.heappop(heap)
    return None


def next_two(heap: Sequence[HeapEntry]) -> float:
    """The smallest stored estimate below the root (a child of it); inf if none."""
    n = len(heap)
    least = math.inf if n < 2 else heap[1][0]
    if n > 2 and heap[2][0] < least:
        least = heap[2][0]
    return least
