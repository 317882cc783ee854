"""The crawl's own event-loop lag, measured by a light timer while the crawl runs.

The rule that reads a download's latency net of it is
:mod:`scrapy_politeness.policy.latency`; this is its clock on the event loop:
one timer every ``PERIOD`` seconds (a few microseconds a firing), started when
the spider opens and stopped when it closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from scrapy_politeness.policy.latency import LoopLag

__all__ = ["PERIOD", "LoopMonitor"]

PERIOD = 0.01
"""Seconds between two firings: the lag of a hold is known to about this much."""


class LoopMonitor:
    """Accumulates the loop's lateness (:class:`LoopLag`) from a repeating timer.

    The timer pauses while no download is in flight (``in_flight()`` false when
    it fires): an idle crawl's loop sleeps, and no lag is counted that no
    download could have seen. A send calls :meth:`wake` before it reads ``busy``.
    """

    __slots__ = ("_in_flight", "_open", "_timer", "busy", "lag", "loop")

    def __init__(self, in_flight: Callable[[], object]) -> None:
        self.lag = LoopLag(PERIOD)
        # busy(now): the lateness accumulated until now; two readings bound the lag
        # between them (the rule's own method: one call at every send and answer).
        self.busy = self.lag.busy
        self.loop: asyncio.AbstractEventLoop | None = None
        self._in_flight = in_flight
        self._open = False
        self._timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._open = True
        self._timer = loop.call_at(self.lag.start(loop.time()), self._fired)

    def wake(self) -> None:
        """Measure again after an idle pause (a send is about to be measured)."""
        if self._timer is None and self._open:
            self.start(self.loop)  # type: ignore[arg-type]  # open: the loop is known

    def stop(self) -> None:
        self._open = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fired(self) -> None:
        loop = self.loop
        assert loop is not None
        due = self.lag.fired(loop.time())
        if self._in_flight():
            self._timer = loop.call_at(due, self._fired)
        else:  # nothing to measure for: sleep until the next send
            self._timer = None
            self.lag.pause()
