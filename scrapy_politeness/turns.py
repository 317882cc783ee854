"""Loop turns, counted where the loop waits for I/O, so counting costs no turn.

The send slip must know when a loop turn ran long while a released request's
bytes were still on their way (:mod:`.policy.stalls`). Counting turns with a
callback re-armed every turn (``call_soon``) keeps a ready callback queued, so
the loop never sleeps in ``select()``: it takes I/O in as it trickles in, one
response per turn, and Scrapy's ~750 objects per response (101 asyncio tasks
for ``CONCURRENT_ITEMS``) then set off a garbage collection each, about twice
as many as when answers arrive together (measured: 3,400 collections for
3,000 requests instead of 1,500, and 1-3 s more CPU; docs/benchmark.md).

So the loop's selector is wrapped: a turn ends when the loop calls
``select()`` and begins when it returns, the turn's own time excludes the
wait, and nothing is added to the loop's work. This relies on asyncio's
``BaseSelectorEventLoop._selector`` (private, present since Python 3.4, used
by the loop for every ``select``); a loop without it (uvloop, the proactor on
Windows) keeps the per-turn callback (:class:`~.slip.SendSlip`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

__all__ = ["TurnClock", "attach"]

_monotonic = time.monotonic  # asyncio's loop.time()


class TurnClock:
    """The loop's turn count and when the current turn began, for every listener."""

    __slots__ = ("began", "listeners", "turn")

    def __init__(self) -> None:
        self.turn = 0
        self.began = _monotonic()
        # Called with (turn began, now) at the end of every turn, before the loop
        # waits: what a turn's length means is the listener's business. True:
        # it scheduled work (a callback, a timer), which the wait must not delay.
        self.listeners: list[Callable[[float, float], bool]] = []

    def ending(self, now: float) -> bool:
        """Whether a listener scheduled work (the loop must not sleep now)."""
        scheduled = False
        for listener in self.listeners:
            if listener(self.began, now):
                scheduled = True
        return scheduled

    def beginning(self, now: float) -> None:
        self.turn += 1
        self.began = now


class _CountingSelector:
    """The loop's selector, telling the clock when each turn ends and begins."""

    __slots__ = ("clock", "inner")

    def __init__(self, inner: Any, clock: TurnClock) -> None:
        self.inner = inner
        self.clock = clock

    def select(self, timeout: float | None = None) -> Any:
        clock = self.clock
        # The loop computed ``timeout`` before this call: work a listener schedules
        # now would wait for it, so the loop only polls and comes back at once.
        if clock.listeners and clock.ending(_monotonic()):
            timeout = 0
        events = self.inner.select(timeout)
        clock.beginning(_monotonic())
        return events

    def __getattr__(self, name: str) -> Any:  # register, modify, get_map, close, ...
        return getattr(self.inner, name)


def attach(loop: asyncio.AbstractEventLoop) -> TurnClock | None:
    """The turn clock of ``loop`` (wrapping its selector the first time), or None
    when the loop has no selector to wrap."""
    selector = getattr(loop, "_selector", None)
    if isinstance(selector, _CountingSelector):
        return selector.clock
    if selector is None or not callable(getattr(selector, "select", None)):
        return None
    clock = TurnClock()
    loop._selector = _CountingSelector(selector, clock)  # type: ignore[attr-defined]
    return clock
