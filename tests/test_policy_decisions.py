"""The decisions moved out of the glue: Retry-After, Crawl-delay, shared state, causes."""

from __future__ import annotations

import pytest

from scrapy_politeness.policy import (
    Config,
    HostTable,
    SharedHost,
    Signal,
    backoff_cause_of,
    crawl_delay_verdict,
    merge_shared,
    retry_after_verdict,
)


def test_retry_after_within_the_limit_is_a_pause_and_above_it_parks() -> None:
    assert retry_after_verdict(None, 600) == (0.0, False)
    assert retry_after_verdict(120.0, 600) == (120.0, False)
    assert retry_after_verdict(600.0, 600) == (600.0, False)  # the limit itself is honoured
    assert retry_after_verdict(601.0, 600) == (0.0, True)


@pytest.mark.parametrize(("delay", "limit", "policy", "expected"), [
    (5.0, 60.0, "skip", 5.0),
    (5.0, None, "skip", 5.0),  # no limit: any delay is honoured
    (90.0, 60.0, "skip", None),
    (90.0, 60.0, "cap", 60.0),
    (90.0, 60.0, "honour", 90.0),
    (60.0, 60.0, "skip", 60.0),
])
def test_crawl_delay_verdict(delay: float, limit: float | None, policy: str,
                             expected: float | None) -> None:
    assert crawl_delay_verdict(delay, limit, policy) == expected


def test_an_unknown_crawl_delay_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown Crawl-delay policy 'maybe'"):
        crawl_delay_verdict(90.0, 60.0, "maybe")


@pytest.mark.parametrize(("status", "signal", "cause"), [
    (429, Signal(429), "429"),
    (503, Signal(503), "5xx"),
    (0, Signal(0), "transport"),
    (200, Signal(200, latency=2.0, prev_latency=0.1), "latency"),
    (200, Signal(200, latency=0.1, prev_latency=0.1), None),
])
def test_backoff_cause_names_what_widened_the_interval(status: int, signal: Signal,
                                                       cause: str | None) -> None:
    table = HostTable(Config(recovery="additive"))
    table.get("a.test").latency = signal.prev_latency
    outcome = table.feedback("a.test", signal, 10.0)
    assert backoff_cause_of(status, outcome) == cause


def test_merge_keeps_the_larger_crawl_delay_and_the_later_pause() -> None:
    state = HostTable(Config()).get("a.test")
    state.crawl_delay = 5.0
    state.not_before = 130.0
    assert not merge_shared(state, SharedHost(2.0, 3.0, 10.0, 0.2, 1, False), now=100.0)
    assert state.adaptive == 2.0
    assert state.crawl_delay == 5.0  # ours was larger: kept (the next reserve pushes it back)
    assert state.not_before == 130.0  # the shared pause (110) ends sooner: ours stays
    assert state.latency == 0.2
    assert state.ceiling_streak == 1
    assert not merge_shared(state, SharedHost(2.0, 8.0, 50.0, 0.2, 1, False), now=100.0)
    assert state.crawl_delay == 8.0
    assert state.not_before == 150.0


def test_merge_reports_a_death_once_and_keeps_the_recovery_memory_when_absent() -> None:
    state = HostTable(Config()).get("a.test")
    state.fail_at, state.good_at, state.healthy_run = 2.0, 1.0, 3
    assert not merge_shared(state, SharedHost(1.0, 0.0, 0.0, 0.0, 0, False), now=0.0)
    assert (state.fail_at, state.good_at, state.healthy_run) == (2.0, 1.0, 3)  # a reservation
    assert not merge_shared(state, SharedHost(1.0, 0.0, 0.0, 0.0, 0, False, 4.0, 2.0, 0), 0.0)
    assert (state.fail_at, state.good_at, state.healthy_run) == (4.0, 2.0, 0)  # a feedback
    assert merge_shared(state, SharedHost(60.0, 0.0, 0.0, 0.0, 5, True), now=0.0)
    assert state.dead
    assert not merge_shared(state, SharedHost(60.0, 0.0, 0.0, 0.0, 5, True), now=0.0)
