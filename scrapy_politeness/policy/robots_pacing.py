"""How far the robots.txt prefetch runs ahead of the pages it is for.

A robots.txt answer skips the spider: it costs a fraction of a page's CPU
(1-2 ms against 5-7 ms in the broad bench). Fetched for every new host as soon
as the host is scheduled, robots.txt ran far ahead of the pages in a broad
crawl: its first fifth half robots.txt, its last fifth none, its requests/s
falling by 40-60 % with the same cost per request of each kind
(bench/results-broad.md). Paced, a host's robots.txt is fetched a few seconds
before the scheduler queue will serve the host's first page, so every part of
a crawl has the same mix of requests, and the hosts waiting for a fetch need
no cut.

Ahead: the fetches in flight, and the hosts whose robots.txt came and whose
first page the queue has not handed out yet (due within ``HORIZON``: a host a
Crawl-delay sends further out is not waiting in the queue's backlog). A new
fetch may start while ahead is below the target: ``FACTOR`` times the first
pages handed out in the last ``HORIZON`` seconds (a few seconds of the queue's
own pace), never below ``floor`` (the start, when nothing was handed out). When
the pace is what limits the crawl the queue hands out every host ahead within
one interval, so the target grows by half at each ``HORIZON``; a CPU-bound
crawl keeps about ``FACTOR * HORIZON`` seconds of new hosts ahead. A host still
not handed out ``STALE`` seconds after it was due stops counting, so a host the
queue never serves cannot stop the prefetch.

Pure: instants are passed in (the event loop's clock in the crawl, a fake one
in the tests).
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["FACTOR", "HORIZON", "STALE", "RobotsPacing"]

HORIZON = 2.0  # seconds of first pages handed out that set the target
FACTOR = 1.5  # hosts ahead per first page handed out in HORIZON
STALE = 30.0  # seconds past its due instant a host stops counting


class RobotsPacing:
    """The hosts ahead of the queue's pace; how many more fetches may start now."""

    __slots__ = ("_served", "_waiting", "floor")

    def __init__(self, floor: int) -> None:
        self.floor = max(1, floor)
        self._waiting: dict[str, float] = {}  # name -> when its first page is due, oldest first
        self._served: deque[float] = deque()  # when first pages were handed out, last HORIZON s

    def __len__(self) -> int:
        """Hosts whose robots.txt came and whose first page waits (counted)."""
        return len(self._waiting)

    def fetched(self, name: str, due: float, now: float) -> None:
        """``name``'s robots.txt came; the queue expects its first page at ``due``."""
        if due <= now + HORIZON and name not in self._waiting:
            self._waiting[name] = due if due > now else now

    def served(self, name: str, now: float) -> bool:
        """The queue hands out a request of ``name``: whether it was a host ahead."""
        if self._waiting.pop(name, None) is None:
            return False
        self._served.append(now)
        return True

    def target(self, now: float) -> int:
        """Hosts that may be ahead now (fetches in flight included)."""
        served = self._served
        cutoff = now - HORIZON
        while served and served[0] <= cutoff:
            served.popleft()
        paced = math.ceil(FACTOR * len(served))
        return paced if paced > self.floor else self.floor

    def room(self, now: float, in_flight: int) -> int:
        """How many fetches may start now, ``in_flight`` running."""
        waiting = self._waiting
        stale = now - STALE
        while waiting:  # oldest first (a fetch's due instant is close to its arrival)
            name = next(iter(waiting))
            if waiting[name] > stale:
                break
            del waiting[name]
        return self.target(now) - in_flight - len(waiting)

    def clear(self) -> None:
        self._waiting.clear()
        self._served.clear()
