"""The crawl's own event-loop lag, measured by a light timer while the crawl runs.

The rule that reads a download's latency net of it is
:mod:`scrapy_politeness.policy.latency`; this is its clock on the event loop:
one timer every ``PERIOD`` seconds (a few microseconds a firing), started when
the spider opens and stopped when it closes.
"""

from __future__ import annotations

import asyncio

from scrapy_politeness.policy.latency import LoopLag

__all__ = ["PERIOD", "LoopMonitor"]

PERIOD = 0.01
"""Seconds between two firings: the lag of a hold is known to about this much."""


class LoopMonitor:
    """Accumulates the loop's lateness (:class:`LoopLag`) from a repeating timer."""

    __slots__ = ("_timer", "busy", "lag", "loop")

    def __init__(self) -> None:
        self.lag = LoopLag(PERIOD)
        # busy(now): the lateness accumulated until now; two readings bound the lag
        # between them (the rule's own method: one call at every send and answer).
        self.busy = self.lag.busy
        self.loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._timer = loop.call_at(self.lag.start(loop.time()), self._fired)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fired(self) -> None:
        loop = self.loop
        assert loop is not None
        self._timer = loop.call_at(self.lag.fired(loop.time()), self._fired)
