"""Requests whose bytes a stalled event loop may still have been holding.

The buckets are spent at each request's estimated send (its resume plus
twice the recent loop lag). A stall longer than that estimate (a slow loop
turn, a garbage collection) holds every send that was still due: those bytes
leave only when the loop runs again, while the next request on their IP is
already timed from the estimate. The stall is seen as soon as any timer
fires late; the requests it caught are the ones whose estimated send fell
inside it, and their spend moves to its end.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

__all__ = ["RecentSends"]

T = TypeVar("T")


class RecentSends(Generic[T]):
    """Recently released requests by estimated send instant, for stall checks.

    ``horizon``: how long after its estimated send a request is still kept
    (a send that long ago has left, whatever stall comes later). Appends are
    in time order up to the lag jitter, so the deque stays sorted enough:
    pruning stops at the first kept item.
    """

    __slots__ = ("_items", "horizon")

    def __init__(self, horizon: float = 0.5, maxlen: int = 4096) -> None:
        self.horizon = horizon
        self._items: deque[tuple[float, T]] = deque(maxlen=maxlen)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: T, send_at: float, now: float) -> None:
        """Keep ``item``, forgetting what is past the horizon already, so a crawl
        without stalls holds a horizon's worth, not ``maxlen``: each item kept
        is one more object every full garbage collection walks."""
        self._prune(now)
        self._items.append((send_at, item))

    def _prune(self, now: float) -> None:
        items = self._items
        cutoff = now - self.horizon
        while items and items[0][0] < cutoff:
            items.popleft()

    def caught_by(self, stall_start: float, now: float) -> list[T]:
        """The items whose estimated send came at or after ``stall_start``:
        a loop stalled from ``stall_start`` to ``now`` held them."""
        self._prune(now)
        caught = []
        for send_at, item in reversed(self._items):
            if send_at < stall_start:
                break
            caught.append(item)
        return caught
