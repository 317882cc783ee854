"""A host's shared state as a backend answers it, and how it folds into ours."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy_politeness.policy.tables import HostState

__all__ = ["SharedHost", "merge_shared"]


@dataclass(frozen=True, slots=True)
class SharedHost:
    """A host's shared state as the backend answered it.

    ``not_before_in`` is relative (seconds from the backend's now), so the
    answer means the same on crawler machines whose clocks disagree.
    """

    adaptive: float
    crawl_delay: float
    not_before_in: float
    latency: float
    ceiling_streak: int
    dead: bool
    # The fast recovery's memory (policy/recovery.py); None when the answer
    # does not carry it (a reservation), so the local copy is kept.
    fail_at: float | None = None
    good_at: float | None = None
    healthy_run: int | None = None
    fail_cost: float | None = None
    # A reservation's own start-to-start gap (the pace the server will see for
    # that fetch); None in a feedback answer.
    gap: float | None = None


def merge_shared(state: HostState, shared: SharedHost, now: float) -> bool:
    """Make ``state`` reflect what the shared backend answered; True if it just died.

    The shared state is the truth for what every process learnt together
    (the adaptive interval, latency, streak, the recovery's memory), except
    the crawl-delay, which keeps the larger: the shared one misses ours when
    it was learnt during an outage or the server restarted empty, and the
    next reservation carries ours back. A Retry-After pause only lengthens.
    """
    state.adaptive = shared.adaptive
    if shared.crawl_delay > state.crawl_delay:
        state.crawl_delay = shared.crawl_delay
    if shared.not_before_in > 0:
        until = now + shared.not_before_in
        if until > state.not_before:
            state.not_before = until
    state.latency = shared.latency
    state.ceiling_streak = shared.ceiling_streak
    if shared.fail_at is not None:
        state.fail_at = shared.fail_at
        state.good_at = shared.good_at  # type: ignore[assignment]
        state.healthy_run = shared.healthy_run  # type: ignore[assignment]
        state.fail_cost = shared.fail_cost  # type: ignore[assignment]
    if shared.gap is not None and shared.gap > 0:
        state.gap = shared.gap  # the fetch about to start is judged at its booked pace
    if shared.dead and not state.dead:
        state.dead = True
        return True
    return False
