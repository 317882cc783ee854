"""Requests whose bytes a long event-loop turn may still have been holding.

A released request does not reach the wire when the middleware lets it go:
Scrapy's downloader and Twisted's transport write its bytes some loop turns
later (two on a kept-alive connection, three or four on a new one: measured by
logging Twisted's ``writeSomeData`` against the releases, see
docs/benchmark.md, "Gaps as the kernel saw them"). A turn that runs long
(a full garbage collection, a slow callback) holds every send still that
close to its release, however many of our own callbacks ran inside that
turn; the next request on their buckets must be spaced from the turn's end.
So sends are remembered by the turn they left the gate in, not by time.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

__all__ = ["TURNS_TO_WIRE", "RecentSends"]

T = TypeVar("T")

TURNS_TO_WIRE = 4
"""A released request's bytes are written within this many loop turns after
the turn that released it (measured: 2 on a kept-alive connection, 3-4 on a
new one)."""


class RecentSends(Generic[T]):
    """Released requests that may not have reached the wire yet, by loop turn."""

    __slots__ = ("_items", "turns")

    def __init__(self, turns: int = TURNS_TO_WIRE, maxlen: int = 4096) -> None:
        self.turns = turns
        self._items: deque[tuple[int, T]] = deque(maxlen=maxlen)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: T, turn: int) -> None:
        """Keep ``item``, released in ``turn`` (turns only grow), forgetting the
        sends already written: each item kept is one more object every full
        garbage collection walks."""
        self._prune(turn)
        self._items.append((turn, item))

    def _prune(self, turn: int) -> None:
        items = self._items
        oldest = turn - self.turns
        while items and items[0][0] < oldest:
            items.popleft()

    def pending(self, turn: int) -> bool:
        """Whether any send may still be unwritten at the start of ``turn``."""
        self._prune(turn)
        return bool(self._items)

    def held(self, turn: int) -> list[T]:
        """The sends that ``turn`` (running long) may be holding: those released
        at most ``turns`` turns before it."""
        self._prune(turn)
        return [item for _, item in self._items]
