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

A turn count is a guess, though: a request can wait far longer than four
turns between its release and its write (a new connection, a queue in the
downloader, a busy loop), and a long turn after the count ran out then
held it unseen, while the next host of its IP, released on time, went out
with it. Where the crawl sees the write (the plugin's HTTP handler),
:class:`Unwritten` holds a send from its release until then: it leaves no
sooner than any instant at which it was found unwritten, so before every
release the buckets of the sends still unwritten are spent at least at
that instant, and at their write at the write.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, Protocol, TypeVar

__all__ = ["TURNS_TO_WIRE", "Held", "RecentSends", "Unwritten"]

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


class Held(Protocol):
    """A send as :class:`Unwritten` keeps it (the caller's own record, no copy)."""

    until: float  # its buckets are spent for a send no earlier than this
    unwritten: bool  # released, its write not seen yet (False: written or ended)


H = TypeVar("H", bound=Held)


class Unwritten(Generic[H]):
    """Released sends whose write the crawl has not seen yet, by the instant
    their buckets were last spent for.

    O(1) per send and per check that finds nothing due: each is kept once, in
    the order of its ``until`` (instants only grow: a send is added at its
    release, and moved to the back with a later instant), and a written or
    ended one is forgotten when it comes to the front.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: deque[H] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: H, now: float) -> None:
        """``item`` was released at ``now``; its write is to be seen."""
        if self._items and self._items[-1].until > now:
            now = self._items[-1].until
        item.until = now
        item.unwritten = True
        self._items.append(item)

    def due(self, now: float) -> bool:
        """Whether a send kept may still be unwritten with its buckets spent
        before ``now`` (cheap: the caller asks before every release)."""
        items = self._items
        while items and not items[0].unwritten:
            items.popleft()
        return bool(items) and items[0].until < now

    def overdue(self, now: float, at: float) -> list[H]:
        """The sends still unwritten at ``now`` whose buckets were spent before
        it: each leaves no sooner than ``now``, so the caller spends them again
        at ``at`` (``now`` plus the slip); they are kept until written."""
        items = self._items
        if items and items[-1].until > at:  # keep the order: never before one kept
            at = items[-1].until
        moved: list[H] = []
        while items and (not items[0].unwritten or items[0].until < now):
            item = items.popleft()
            if item.unwritten:
                item.until = at
                moved.append(item)
        items.extend(moved)
        return moved
