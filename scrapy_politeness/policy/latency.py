"""The server's share of a download's latency, not the crawl's own.

Scrapy's ``download_latency`` runs from the download handler's call to the
response headers' callback. Every step in between (connect, write, read) waits
for the crawl's event loop: a CPU-bound crawl (slow callbacks, a large parse,
a full garbage collection) adds its own busy time to every latency it measures,
and a latency-driven back-off would then slow down servers that answered in
microseconds.

So the loop's lateness is measured alongside (:class:`LoopLag`: a timer due
every ``period`` seconds, each firing late by as long as the loop was held),
and a download's latency is read net of the lateness that accrued while it
ran (:func:`server_latency`). The lateness summed over a download bounds what
the loop could have added to it from above, so the net figure never overstates
the server's latency; a sample that the loop explains for the most part is no
sample at all.
"""

from __future__ import annotations

__all__ = ["BLOCKED", "SATURATED", "LoopLag", "server_latency"]

SATURATED = 0.5
"""A sample whose loop lag is above this share of it says nothing about the
server (what is left is within the lateness estimate's own error)."""

BLOCKED = 0.004
"""A firing this late means a held loop, not a timer's usual slack: the hold
began up to a period before the firing was due, so the period is added."""


def server_latency(latency: float, loop_lag: float) -> float:
    """``latency`` net of the ``loop_lag`` that accrued while it was measured;
    0.0 (no sample: the controller neither judges nor smooths it) when the
    loop explains more than ``SATURATED`` of it."""
    if loop_lag <= 0.0:
        return latency
    if loop_lag >= latency * SATURATED:
        return 0.0
    return latency - loop_lag


class LoopLag:
    """The event loop's accumulated lateness, from a timer due every ``period``.

    ``fired(due, now)`` is called by the timer; ``busy(now)`` is the lateness
    accumulated until ``now``, including that of a firing overdue at ``now``
    (the loop is held still, or the caller runs in the same late turn): the
    difference of two readings is the loop lag between them.
    """

    __slots__ = ("due", "period", "total")

    def __init__(self, period: float) -> None:
        if not period > 0.0:
            raise ValueError(f"LoopLag period must be positive, got {period!r}")
        self.period = period
        self.total = 0.0
        self.due = float("inf")  # the next firing's instant (inf: not started)

    def start(self, now: float) -> float:
        """Start measuring at ``now``; returns when the timer is first due."""
        self.due = now + self.period
        return self.due

    def pause(self) -> None:
        """Stop counting until :meth:`start` (no firing is due meanwhile)."""
        self.due = float("inf")

    def fired(self, now: float) -> float:
        """The timer fired at ``now``; returns when it is next due."""
        self.total += self._late(now)
        self.due = now + self.period
        return self.due

    def busy(self, now: float) -> float:
        """The lateness accumulated until ``now`` (seconds)."""
        late = now - self.due  # _late inlined: read at every send and every answer
        if late <= 0.0:
            return self.total
        return self.total + (late + self.period if late > BLOCKED else late)

    def _late(self, now: float) -> float:
        late = now - self.due
        if late <= 0.0:
            return 0.0
        return late + self.period if late > BLOCKED else late
