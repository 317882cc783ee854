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
own pace), never below ``floor`` (the start, when nothing was handed out),
plus a boost. The pace alone is self-referential: the pages handed out depend
on the hosts ahead, which depend on the pages handed out, so a dip (a garbage
collection, a loaded machine, slow robots.txt answers) lowered the target,
which kept the pace low. The boost is the downloader's spare capacity: one
more host each time the engine asked the queue for a request and none was
ready while hosts waited here for their robots.txt
(:meth:`RobotsPacing.starved`). It is kept while asks keep coming, loses a
quarter for each ``HORIZON`` without one, and never exceeds the paced target,
so the hosts ahead are at most twice the pace's (a crawl the queue cannot
serve faster, e.g. many hosts on one IP, still does not fetch every robots.txt
ahead of its pages). When the pace is what limits the crawl the queue
hands out every host ahead within one interval, so the target grows by half
at each ``HORIZON``; a CPU-bound crawl keeps about ``FACTOR * HORIZON``
seconds of new hosts ahead. A host still not handed out ``STALE`` seconds after
it was due stops counting, so a host the queue never serves cannot stop the
prefetch.

Pure: instants are passed in (the event loop's clock in the crawl, a fake one
in the tests).
"""

from __future__ import annotations

import math
from collections import deque

__all__ = ["DECAY", "FACTOR", "HORIZON", "STALE", "RobotsPacing"]

HORIZON = 2.0  # seconds of first pages handed out that set the target
FACTOR = 1.5  # hosts ahead per first page handed out in HORIZON
STALE = 30.0  # seconds past its due instant a host stops counting
DECAY = 0.75  # the boost kept per HORIZON without an ask the queue could not answer


class RobotsPacing:
    """The hosts ahead of the queue's pace; how many more fetches may start now."""

    __slots__ = ("_asked_at", "_boost", "_served", "_waiting", "floor")

    def __init__(self, floor: int) -> None:
        self.floor = max(1, floor)
        self._waiting: dict[str, float] = {}  # name -> when its first page is due, oldest first
        self._served: deque[float] = deque()  # when first pages were handed out, last HORIZON s
        self._boost = 0  # hosts ahead for the downloader's spare capacity (see the module)
        self._asked_at = 0.0  # the last ask the queue could not answer, or the last decay

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

    def starved(self, now: float) -> None:
        """The engine asked the queue for a request and none was ready, while hosts
        waited for their robots.txt: one more host may be ahead."""
        if self._boost < self._paced(now):
            self._boost += 1
        self._asked_at = now

    def _paced(self, now: float) -> int:
        """``FACTOR`` times the first pages handed out in the last ``HORIZON``, or the floor."""
        served = self._served
        cutoff = now - HORIZON
        while served and served[0] <= cutoff:
            served.popleft()
        paced = math.ceil(FACTOR * len(served))
        return paced if paced > self.floor else self.floor

    def target(self, now: float) -> int:
        """Hosts that may be ahead now (fetches in flight included)."""
        paced = self._paced(now)
        boost = self._boost
        if boost and now - self._asked_at >= HORIZON:  # no ask for a while: it decays
            periods = int((now - self._asked_at) / HORIZON)
            self._boost = boost = int(boost * DECAY ** periods)
            self._asked_at += periods * HORIZON
        return paced + (boost if boost < paced else paced)

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
        self._boost = 0
