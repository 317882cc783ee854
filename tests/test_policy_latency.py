"""The server's share of a latency (policy/latency.py), on a fake clock."""

from __future__ import annotations

import pytest
from fakeclock import Clock

from scrapy_politeness.policy.latency import BLOCKED, SATURATED, LoopLag, server_latency

PERIOD = 0.01


def _run(lag: LoopLag, clock: Clock, until: float, *, slack: float = 0.0) -> None:
    """Fire the timer as an event loop would, ``slack`` late each time, up to ``until``."""
    while lag.due + slack <= until:
        clock.now = lag.due + slack
        lag.fired(clock.now)


def test_an_idle_loop_accumulates_only_its_timer_slack() -> None:
    clock = Clock()
    lag = LoopLag(PERIOD)
    lag.start(clock.now)
    before = lag.busy(clock.now)
    _run(lag, clock, clock.now + 1.0, slack=0.0001)
    assert lag.busy(clock.now) - before == pytest.approx(100 * 0.0001, rel=0.05)


def test_a_held_loop_counts_the_hold_and_a_period_more() -> None:
    clock = Clock()
    lag = LoopLag(PERIOD)
    lag.start(clock.now)
    sent = lag.busy(clock.now)
    clock.now = lag.due + 0.2  # a callback held the loop 0.2 s past the firing's instant
    assert lag.busy(clock.now) - sent == pytest.approx(0.2 + PERIOD)  # overdue counts now
    lag.fired(clock.now)
    assert lag.busy(clock.now) - sent == pytest.approx(0.2 + PERIOD)  # and once only
    _run(lag, clock, clock.now + 0.5)
    assert lag.busy(clock.now) - sent == pytest.approx(0.2 + PERIOD)


def test_readings_never_go_back() -> None:
    clock = Clock()
    lag = LoopLag(PERIOD)
    lag.start(clock.now)
    readings = []
    for step in (0.001, 0.003, 0.0039, 0.0041, 0.02, 0.05):
        clock.now = lag.due + step
        readings.append(lag.busy(clock.now))
    lag.fired(clock.now)
    readings.append(lag.busy(clock.now))
    assert readings == sorted(readings)
    assert readings[3] - readings[2] > BLOCKED  # past BLOCKED: a hold, the period added


def test_server_latency_is_net_of_the_loop_lag() -> None:
    assert server_latency(0.4, 0.0) == 0.4
    assert server_latency(0.4, 0.1) == pytest.approx(0.3)
    assert server_latency(0.4, -0.01) == 0.4  # no lag measured


def test_a_sample_the_loop_mostly_explains_is_no_sample() -> None:
    assert server_latency(0.08, 0.08 * SATURATED) == 0.0
    assert server_latency(0.08, 0.2) == 0.0


def test_a_bad_period_is_refused() -> None:
    with pytest.raises(ValueError, match="period"):
        LoopLag(0.0)


def test_a_paused_count_skips_the_idle_time() -> None:
    clock = Clock()
    lag = LoopLag(PERIOD)
    lag.start(clock.now)
    clock.now = lag.due + 0.05
    lag.fired(clock.now)
    before = lag.busy(clock.now)
    lag.pause()  # nothing in flight: the timer sleeps
    clock.now += 30.0
    assert lag.busy(clock.now) == before  # the idle half minute is no lag
    lag.start(clock.now)
    assert lag.busy(clock.now) == before
