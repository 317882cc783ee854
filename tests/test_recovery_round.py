"""Round paces first (``recovery = "fast"``), on a fake clock.

People set rate limits as n requests per second or one request per n seconds:
a round pace inside the bracket is tried first, and a round pace that held
with none left above the failing pace is believed. ``"bracket"`` runs the same
search with every pace alike, and is the yardstick here.
"""

from __future__ import annotations

import math

import pytest
from ratesim import TokenBucket, crawl

from scrapy_politeness.policy import Config, HostState, Signal, recovery
from scrapy_politeness.policy.recovery import ROUND_BELIEF, is_round, round_pace_in

FAST = Config(recovery="fast")
BRACKET = Config(recovery="bracket")
SLIP = 0.01


# 0.33333333333333: 1/3 as Redis keeps it (Lua writes 14 significant digits)
@pytest.mark.parametrize("x", [1.0, 2.0, 5.0, 0.5, 0.25, 1 / 3, 1 / 7, 0.33333333333333])
def test_whole_rates_and_whole_seconds_are_round(x: float) -> None:
    assert is_round(x)


@pytest.mark.parametrize("x", [0.0, -1.0, 0.4, 0.42, 0.5625, 0.75, 1.5, 0.3333, 2.1])
def test_other_paces_are_not_round(x: float) -> None:
    assert not is_round(x)


@pytest.mark.parametrize(("low", "high", "pace"), [
    (0.42, 0.5625, 0.5),       # the x0.75 descent on a 2/s server
    (0.327, 0.4219, 1 / 3),    # on a 3/s one: 1/3 s is 2% above the failing pace
    (0.2, 0.5625, 0.5),        # the slowest of 1/2, 1/3, 1/4 s: nearest the pace that works
    (1.0, 3.5, 3.0),           # slower than 1/s: whole seconds
    (0.9, 1.5, 1.0),
    (0.75, 1.0, 0.0),          # 1 s itself is no pace *between*: held, not probed
    (0.5, 1.0, 0.0),
    (0.42, 0.5 * (1 + 1e-12), 0.0),  # 0.5 read back with float noise is the pace held
    (0.5 * (1 - 1e-12), 0.55, 0.0),  # ... or the failing one
    (0.0, 0.0, 0.0),           # a floor of 0: no pace below 0 s
])
def test_the_round_pace_between_two_paces(low: float, high: float, pace: float) -> None:
    assert round_pace_in(low, high) == pytest.approx(pace, abs=1e-12)


def test_a_round_pace_in_the_bracket_is_tried_at_a_fraction_of_the_price() -> None:
    """After the descent failed at 0.42 s and held 0.5625 s, the plain search
    waits for 0.3 x 5 s of rent (11 fetches of 0.1425 s slack) and goes 30% of
    the (log) way; round paces first, 0.5 s is tried once 0.3 x 5 / 16 s is paid:
    the first confirmed fetch."""
    state = HostState(FAST, adaptive=0.5625, fail_at=0.42, good_at=0.5625, fail_cost=5.0,
                      healthy_run=recovery.CONFIRM - 1)
    assert recovery.fast_step(FAST, state, Signal(200)) == 0.5
    assert state.healthy_run == 0  # the probe pays its own rent from here
    plain = HostState(BRACKET, adaptive=0.5625, fail_at=0.42, good_at=0.5625, fail_cost=5.0,
                      healthy_run=recovery.CONFIRM - 1)
    assert recovery.fast_step(BRACKET, plain, Signal(200)) == 0.5625


def test_a_round_pace_held_makes_the_probe_below_it_dearer() -> None:
    """Held at 1 s above a failure at 0.75 s (a 1/s server from the 1 s start):
    no round pace lies between, so the next probe waits for 16 x the rent."""
    rent = recovery.PATIENCE * 5.0 / (1.0 - 0.75)  # fetches the plain search waits
    for config, factor in ((BRACKET, 1.0), (FAST, ROUND_BELIEF)):
        state = HostState(config, adaptive=1.0, fail_at=0.75, good_at=1.0, fail_cost=5.0,
                          healthy_run=recovery.CONFIRM - 1)
        held = 0
        while recovery.fast_step(config, state, Signal(200)) == 1.0:
            held += 1
        assert held + recovery.CONFIRM == math.ceil(factor * rent)


@pytest.mark.parametrize(("rate", "retry_after", "pages"), [
    (1, 5, 60), (2, 2, 100), (2, 5, 100), (3, 2, 100)])
def test_whole_rates_cost_one_refusal_and_are_held_at_their_pace(
        rate: int, retry_after: int, pages: int) -> None:
    """The bench's cells that the plain search missed (1.175, 1.149, 1.279 and
    1.218 x T* here): one 429 (the descent's) and the server's own pace held."""
    fast = crawl(FAST, TokenBucket(1 / rate, retry_after=retry_after), pages, slip=SLIP)
    plain = crawl(BRACKET, TokenBucket(1 / rate, retry_after=retry_after), pages, slip=SLIP)
    assert fast.early() == 0
    assert fast.refused() == 1 < plain.refused() + (rate == 3)
    assert fast.intervals[-1] == pytest.approx(1 / rate)
    assert fast.wall < plain.wall
    assert fast.wall / ((pages - 1) / rate) <= 1.15


def test_a_refused_round_pace_falls_back_to_the_plain_search() -> None:
    """A 2.8/s server (0.357 s): 1/3 s is tried and refused; the search goes on
    between 1/3 s and the 0.42 s the descent held, and settles within 10%."""
    run = crawl(FAST, TokenBucket(1 / 2.8, retry_after=1.0), 200, slip=SLIP)
    assert run.early() == 0
    assert run.refused() <= 5
    tail = run.intervals[-40:]
    assert min(tail) > 1 / 3
    assert max(tail) + SLIP <= 1.1 / 2.8


def test_what_the_prior_costs_on_rates_that_are_not_round() -> None:
    """The price, kept in view: 27 rates of 1.1-3.9/s in tenths (not whole),
    Retry-After 2 s. Round paces first, a round probe is refused or a round
    pace is held above a limit just faster than it: the mean wall/T* goes
    1.163 -> 1.191 here. It must stay within 5% of the plain search."""
    means = {}
    for config in (FAST, BRACKET):
        ratios = []
        for tenths in range(11, 40):
            if tenths % 10 == 0:
                continue
            interval = 10 / tenths
            run = crawl(config, TokenBucket(interval, retry_after=2.0), 100, slip=SLIP)
            ratios.append(run.wall / (99 * interval))
        means[config.recovery] = sum(ratios) / len(ratios)
    assert means["bracket"] < means["fast"] <= 1.05 * means["bracket"]
