"""The fast recovery: learn a rate-limited server's pace and hold it.

The reference design's AIMD (``Config.adapt``) widens on a failure, takes
Retry-After as a floor of the interval and then narrows by a fixed step per
healthy fetch. On a host that allows 2 requests/s and answers one 429 with
``Retry-After: 2``, that holds the host near 2 s and needs ~30 fetches to come
back: the crawl runs at a third of the pace the server would take.

This controller treats the server as having an unknown sustainable interval
and brackets it, as TCP CUBIC remembers the window where loss happened and
BBR probes for more only now and then:

- ``fail_at``: the pace (start-to-start time the server saw) of the last
  failure; ``good_at``: the pace of the last healthy fetch, once something
  failed only when confirmed (``CONFIRM`` healthy fetches in a row).
- Far above any failure (or nothing failed yet): each healthy fetch shrinks
  the interval by ``SHRINK`` (1 s reaches the 0.25 s floor in 5 fetches, not 15).
- A failure jumps straight back to ``good_at`` (known to work), or, when
  nothing wider is known to work, widens by ``backoff`` like AIMD. A
  Retry-After is a pause (the table's not-before instant), never a floor of
  the interval.
- At the known-good pace the host holds; after ``PROBE_EVERY`` healthy
  fetches it probes ``PROBE_STEP`` lower, never closer than ``MARGIN`` above
  ``fail_at``; once no probe fits it stays there (``FORGET_AFTER`` healthy
  fetches later it forgets a little of ``fail_at``, in case the server sped up).

Fetch counts and the recorded gap, no clock: the Redis backend
(``feedback.lua``, with the gap booked by ``reserve.lua``) runs the same
arithmetic server side, so both give the same answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import Config, Signal, is_failure

if TYPE_CHECKING:
    from .tables import HostState

__all__ = ["CONFIRM", "FORGET_AFTER", "MARGIN", "PROBE_EVERY", "PROBE_STEP", "SHRINK",
           "fast_step"]

SHRINK = 0.75
"""Descent per confirmed healthy fetch while no failure is known."""
CONFIRM = 2
"""Consecutive healthy fetches that confirm an interval once something failed
(the first fetch after a pause always passes a token bucket: it proves nothing)."""
PROBE_EVERY = 64
"""Healthy fetches at the known-good interval before probing lower."""
PROBE_STEP = 0.95
"""A probe asks for 5% less than the known-good interval."""
MARGIN = 1.03
"""Probes stay at least 3% above the interval that failed."""
FORGET_AFTER = 100
"""Healthy fetches held without a probe before ``fail_at`` is lowered by
``PROBE_STEP`` (a server that got faster is found again, rarely)."""


def fast_step(config: Config, state: HostState, signal: Signal) -> float:
    """The next interval (unclamped) of ``state`` after ``signal``; updates the
    controller's fields of ``state`` (``fail_at``, ``good_at``, ``healthy_run``).

    ``state.adaptive`` must be the stored (clamped) interval; ``signal`` carries
    the host's previous smoothed latency in ``prev_latency``. What failed or
    stayed healthy is the pace the server really saw, ``state.gap`` (the last
    start-to-start time): it lags the interval by a fetch, because the IP
    bucket was spent at the old interval and never moves back.
    """
    x = state.adaptive
    seen = state.gap if state.gap > 0 else x
    if is_failure(signal.status):
        state.fail_at = seen
        state.healthy_run = 0
        if state.good_at <= seen:
            state.good_at = 0.0  # the known-good pace failed: the server changed
        return state.good_at if state.good_at > x else config.widen(x)
    if config.latency_rising(signal.latency, signal.prev_latency):
        state.healthy_run = 0
        return x * config.soft_widen
    run = state.healthy_run + 1
    state.healthy_run = run
    fail_at = state.fail_at
    if run < CONFIRM and fail_at > 0:  # no pause yet: nothing to distrust
        return x
    state.good_at = seen
    if fail_at <= 0 or x * SHRINK >= fail_at * MARGIN:  # far above any failure: descend
        state.healthy_run = CONFIRM - 1  # the next healthy fetch confirms the new pace
        return x * SHRINK
    if x * PROBE_STEP >= fail_at * MARGIN:  # near the failure: probe, rarely
        if run >= PROBE_EVERY:
            state.healthy_run = CONFIRM - 1
            return x * PROBE_STEP
        return x
    if run >= FORGET_AFTER:  # nothing fits between us and the failure: hold, forget slowly
        state.fail_at = fail_at * PROBE_STEP
        state.healthy_run = CONFIRM - 1
    return x
