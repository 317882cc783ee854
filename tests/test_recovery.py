"""The fast recovery (policy/recovery.py) on a fake clock, against a token-bucket server.

The server and the crawl are simulated (tests/ratesim.py): the crawl is the
real HostTable; only time is virtual. Speed is judged as wall / T* where T*
is the server's own limit, (pages - 1) x its interval.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ratesim import TokenBucket, crawl

from scrapy_politeness.policy import Config, HostTable, Signal, recovery
from scrapy_politeness.policy.tables import HostState

FAST = Config(recovery="fast")
BRACKET = Config(recovery="bracket")  # the same search without the round-pace prior
ADDITIVE = Config()


def test_from_above_reaches_the_floor_in_a_few_fetches_without_refusals() -> None:
    run = crawl(FAST, TokenBucket(0.25, retry_after=2), 40)
    assert run.refused() == 0
    floor_at = run.intervals.index(0.25)
    assert floor_at <= 6  # the seed's additive narrow needs 15 fetches
    assert run.intervals[floor_at:] == [0.25] * (40 - floor_at)
    # a monotone descent, no saw-tooth
    assert all(a >= b for a, b in zip(run.intervals, run.intervals[1:], strict=False))
    slow = crawl(ADDITIVE, TokenBucket(0.25, retry_after=2), 40)
    assert slow.intervals.index(0.25) >= 14  # 15 fetches (index 14)


@pytest.mark.parametrize("rate", [1, 2, 3])  # 3/s: no power of two of the 1 s start
@pytest.mark.parametrize("retry_after", [1, 2, 5])
def test_rate_limited_host_settles_near_its_pace(rate: int, retry_after: int) -> None:
    pages = 100
    fast = crawl(FAST, TokenBucket(1 / rate, retry_after=retry_after), pages)
    seed = crawl(ADDITIVE, TokenBucket(1 / rate, retry_after=retry_after), pages)
    assert fast.early() == 0
    assert seed.early() == 0
    assert fast.refused() <= 3  # <= 3% of the requests
    assert fast.wall < 0.8 * seed.wall
    t_star = (pages - 1) / rate
    assert fast.wall <= t_star + 5 * retry_after  # the learning costs a few pauses at most
    held = max(fast.intervals[-30:])  # the pace held (a rare probe goes below it)
    assert held >= 1 / rate  # at or above the server's pace ...
    assert held <= 1 / rate / recovery.SHRINK  # ... never worse than the descent left it
    if retry_after <= 2:  # ... and where a failed probe is cheap, within 10% of it
        assert held <= 1.1 / rate


def test_the_bracket_closes_better_than_the_descent_left_it() -> None:
    """3/s from a 1 s start: the x0.75 descent fails at 0.316 s and last held
    0.42 s (26% slow); probes paid for by the slack find the pace."""
    fast = crawl(FAST, TokenBucket(1 / 3, retry_after=1), 100)
    assert fast.refused() <= 2
    assert fast.intervals[-1] <= 1.03 / 3
    wall = fast.wall / (99 / 3)
    assert wall < 1.2  # the previous controller (hold, probe every 64 fetches): 1.31


def test_probes_wait_until_the_slack_paid_for_a_failed_one() -> None:
    """Holding 0.5625 s above a failure at 0.42 s may waste 0.1425 s a fetch; a
    probe 30% of the way down fails with a chance of 0.3, so it is expected to
    cost 0.3 x the pause: a Retry-After of 1 s is paid for after 3 fetches
    (2 x 0.1425 < 0.3), one of 5 s after 11 (10 x 0.1425 < 1.5)."""
    assert recovery.PATIENCE == recovery.PROBE_SHARE == 0.3
    for cost, holds in ((1.0, 3), (5.0, 11)):
        state = HostState(BRACKET, adaptive=0.5625, fail_at=0.42, good_at=0.5625, fail_cost=cost)
        steps = [recovery.fast_step(BRACKET, state, Signal(200)) for _ in range(holds)]
        assert steps[:-1] == [0.5625] * (holds - 1)
        probe = 0.5625 * (0.42 / 0.5625) ** recovery.PROBE_SHARE
        assert steps[-1] == pytest.approx(probe)
        assert 0.5 < probe < 0.5625  # 30% of the way in log scale: most probes succeed


def test_a_probe_narrows_the_bracket_from_either_side() -> None:
    table = HostTable(FAST)
    state = table.get("h")
    state.adaptive, state.fail_at, state.good_at, state.fail_cost = 0.52, 0.42, 0.5625, 1.0
    table.start("h", 0.0)
    table.start("h", 0.52)
    table.feedback("h", Signal(429, 2.0), 0.53)  # the probe failed: 0.52 is too fast
    # the next probe must pay for this refusal and, doubled, the last one (2 s + 2 x 1 s)
    assert (state.fail_at, state.adaptive, state.fail_cost) == (0.52, 0.5625, 4.0)
    state.adaptive, state.healthy_run = 0.54, 1
    table.start("h", 3.0)
    table.start("h", 3.54)
    table.feedback("h", Signal(200), 3.55)  # a probe that held: 0.54 works
    assert state.good_at == 0.54
    state.healthy_run, state.adaptive = 50, 0.53
    assert recovery.fast_step(FAST, state, Signal(200)) == 0.53  # 0.53 <= 0.52 x 1.03: closed


def test_retry_after_is_a_pause_not_the_interval() -> None:
    table = HostTable(FAST)
    state = table.get("h")
    state.adaptive, state.good_at, state.healthy_run = 0.42, 0.5625, 5
    table.feedback("h", Signal(429, 5.0, 0.01), 100.0)
    assert state.not_before == 105.0  # honoured exactly
    assert state.adaptive == 0.5625  # back to the last known-good pace, not 5 s
    assert state.fail_at == 0.42
    seed = HostTable(ADDITIVE)
    seed.get("h").adaptive = 0.42
    seed.feedback("h", Signal(429, 5.0, 0.01), 100.0)
    assert seed.get("h").adaptive == 5.0  # the reference design: Retry-After is a floor


def test_the_first_fetch_after_a_pause_proves_nothing() -> None:
    state = HostState(BRACKET, adaptive=1.0, fail_at=0.5, fail_cost=1.0)
    assert recovery.fast_step(BRACKET, state, Signal(200)) == 1.0
    assert state.good_at == 0.0
    # confirmed; 2 fetches x 0.5 s of slack paid for a failed probe's 1 s
    assert recovery.fast_step(BRACKET, state, Signal(200)) == pytest.approx(
        0.5 ** recovery.PROBE_SHARE)
    assert state.good_at == 1.0


def test_a_closed_bracket_holds_then_forgets_slowly() -> None:
    state = HostState(FAST, adaptive=0.44, fail_at=0.43, good_at=0.44, fail_cost=1.0)
    steps = [recovery.fast_step(FAST, state, Signal(200)) for _ in range(recovery.FORGET_AFTER)]
    assert steps == [0.44] * recovery.FORGET_AFTER  # 0.44 <= 0.43 x 1.03: no probe fits
    assert state.fail_at == pytest.approx(0.43 * recovery.FORGET_STEP)


def test_limit_drop_backs_off_and_settles() -> None:
    run = crawl(FAST, TokenBucket(0.25, retry_after=2), 100, limits={40: 1.0})
    assert run.early() == 0
    after = run.statuses[40:]
    assert after.count(429) <= 0.1 * len(after)
    assert 1.0 <= max(run.intervals[-20:]) <= 1.05  # held within 5% (a rare probe below)


def test_failing_host_still_reaches_the_ceiling_and_dies() -> None:
    config = Config(ceiling=8.0, recovery="fast")
    table = HostTable(config, dead_after=3)
    for _ in range(3):
        table.feedback("h", Signal(200), 0.0)
    outcomes = [table.feedback("h", Signal(503), 1.0) for _ in range(10)]
    assert table.get("h").adaptive == 8.0
    assert table.get("h").dead
    assert sum(o.became_dead for o in outcomes) == 1


def test_rising_latency_still_widens_softly() -> None:
    table = HostTable(FAST)
    table.feedback("h", Signal(200, 0.0, 0.1), 0.0)
    out = table.feedback("h", Signal(200, 0.0, 0.5), 1.0)
    assert out.soft_widened
    assert out.after == pytest.approx(out.before * 1.25)


@pytest.mark.parametrize("recovery_name", ["fast", "additive"])
def test_floor_zero_still_backs_off(recovery_name: str) -> None:
    """Issue 9 item 2: with POLITENESS_FLOOR = 0 the interval could reach 0, and
    0 x backoff = 0: no failure ever widened it again."""
    config = Config(default=0.0, floor=0.0, ceiling=4.0, recovery=recovery_name)
    table = HostTable(config)
    assert table.get("h").interval() == 0.0
    table.feedback("h", Signal(503), 0.0)
    first = table.get("h").interval()
    table.feedback("h", Signal(503), 0.0)
    assert 0.0 < first < table.get("h").interval()


def test_backoff_one_still_widens() -> None:
    config = Config(backoff=1.0)
    assert config.widen(0.5) == pytest.approx(0.55)
    assert Config(backoff=1.0, narrow=0.0).widen(0.5) == pytest.approx(0.55)
    assert config.adapt(0.5, Signal(429)) > 0.5


# -- properties --------------------------------------------------------------------

bands = st.builds(
    lambda floor, extra, ceil_extra, backoff: Config(
        default=floor + extra, floor=floor, ceiling=floor + extra + ceil_extra,
        backoff=backoff, recovery="fast"),
    st.floats(0.0, 1.0), st.floats(0.0, 2.0), st.floats(0.01, 30.0), st.floats(1.0, 4.0),
)
signals = st.builds(
    Signal,
    status=st.sampled_from([0, 200, 200, 200, 404, 429, 503]),
    retry_after=st.one_of(st.just(0.0), st.floats(0.0, 10.0)),
    latency=st.floats(0.0, 2.0),
)


@settings(max_examples=300, deadline=None)
@given(bands, st.lists(signals, min_size=1, max_size=80))
def test_band_and_failures_always_widen(config: Config, seq: list[Signal]) -> None:
    table = HostTable(config)
    for i, signal in enumerate(seq):
        before = table.get("h").adaptive
        table.feedback("h", signal, float(i))
        after = table.get("h").adaptive
        assert config.floor <= after <= config.ceiling
        if signal.status in (0, 429, 503) and before < config.ceiling:
            assert after > before


@settings(max_examples=60, deadline=None)
@given(st.floats(0.25, 2.0), st.sampled_from([1.0, 2.0, 5.0]), st.sampled_from([FAST, BRACKET]))
def test_converges_to_a_token_bucket_pace(interval: float, retry_after: float,
                                          config: Config) -> None:
    pages = 100
    run = crawl(config, TokenBucket(interval, retry_after=retry_after), pages)
    assert run.early() == 0
    # a server slower than the 1 s start costs one more 429 on the way up; a
    # round pace tried first may cost one more (a server at 0.42 s refuses 1/3 s)
    refusals = 3 if interval <= config.default else 4
    assert run.refused() <= refusals + (config is FAST)
    tail = run.intervals[-30:]
    assert max(tail) <= max(0.25, interval) / recovery.SHRINK + 1e-9
    assert run.wall <= 1.35 * (pages - 1) * interval + 2 * retry_after


def test_judged_at_the_pace_the_server_saw() -> None:
    """The IP bucket was spent at the old interval, so the gap lags the interval
    by a fetch: a 429 after a 0.75 s gap says 0.75 s is too fast, not 0.5625 s."""
    table = HostTable(FAST)
    table.start("h", 0.0)
    table.start("h", 0.75)
    state = table.get("h")
    state.adaptive, state.good_at, state.healthy_run = 0.5625, 1.0, 4
    table.feedback("h", Signal(429, 2.0), 0.76)
    assert state.fail_at == 0.75
    assert state.adaptive == 1.0
    # and a healthy fetch confirms the gap it really had
    table.start("h", 3.0)
    table.start("h", 4.0)
    table.feedback("h", Signal(200), 4.01)
    table.feedback("h", Signal(200), 4.02)
    assert state.good_at == 1.0


def test_a_fetch_after_an_idle_gap_proves_nothing() -> None:
    """The gap across an idle spell or a resumed crawl is no test of the pace
    held: it must not become the known-good pace a 429 jumps back to."""
    table = HostTable(FAST)
    state = table.get("h")
    state.adaptive, state.fail_at, state.good_at, state.fail_cost = 0.5, 0.4, 0.5, 1.0
    state.healthy_run = 1
    table.start("h", 0.0)
    table.start("h", 30.0)  # the host was idle 30 s
    table.feedback("h", Signal(200), 30.01)
    assert (state.good_at, state.healthy_run) == (0.5, 1)
    table.start("h", 30.5)
    table.feedback("h", Signal(200), 30.51)
    assert (state.good_at, state.healthy_run) == (0.5, 2)  # this one ran at the pace
    state.adaptive = 0.45
    table.start("h", 30.95)  # a probe 0.45 s after, refused
    table.feedback("h", Signal(429, 1.0), 30.96)
    assert state.adaptive == 0.5  # back to 0.5 s, not to the idle 30 s


def test_a_failure_after_an_idle_gap_is_a_failure_at_the_pace_held() -> None:
    """One failed fetch after an idle spell must not record the idle gap as the
    failing pace: the bracket would count as closed far above the server's pace
    and the host would hold there for good."""
    table = HostTable(FAST)
    state = table.get("h")
    t = 0.0
    for _ in range(10):  # settles at the floor
        table.start("h", t)
        table.feedback("h", Signal(200), t + 0.01)
        t += state.interval()
    held = state.interval()
    t += 30.0  # idle
    table.start("h", t)
    table.feedback("h", Signal(0), t + 0.01)  # a transport error
    assert state.fail_at == pytest.approx(held)
    for _ in range(40):
        t += state.interval()
        table.start("h", t)
        table.feedback("h", Signal(200), t + 0.01)
    assert state.interval() < 1.5 * held  # it came back (the idle gap as fail_at held it at 2x)


def test_a_resumed_crawl_needs_no_fresh_429_to_relearn() -> None:
    """The recovery memory saved with JOBDIR (persistence.py): the resumed crawl
    holds the learnt pace from its first fetch; a crawl that forgot pays again.
    The first crawl is long enough (100 pages, 33 s) for its bracket to close:
    one stopped mid-search goes on probing after the resume, as it would have."""
    from scrapy_politeness.jobdir import persistence

    server = TokenBucket(1 / 3, retry_after=2)
    first = HostTable(FAST)
    before = crawl(FAST, server, 100, table=first)
    assert before.refused() >= 1  # it learnt the pace the hard way
    doc = persistence.snapshot(first.items(), before.starts[-1] + 0.02, 1000.0)
    resumed = HostTable(FAST)
    persistence.restore(resumed, doc, 0.0, 1060.0)  # a minute later
    after = crawl(FAST, server, 50, table=resumed, now=60.0)
    assert after.refused() == 0
    assert after.wall <= 1.1 * 49 / 3
    forgot = crawl(FAST, TokenBucket(1 / 3, retry_after=2), 50, now=60.0)
    assert forgot.refused() >= 1


def test_refused_probes_in_a_row_make_the_next_one_much_rarer() -> None:
    """A probe refused right below the known-good pace is evidence that the pace
    sits at that end (a 1/s server crawled from the 1 s start holds exactly its
    pace: every probe is refused). It counts double in what the next probe must
    pay for: after a 5 s pause for the descent and one for a refused probe, the
    next waits for 5 + 2 x 5 = 15 s of expected price (0.3 x 15 / 0.083 = 54
    fetches at 1 s above a failure at 0.917 s), not 5 + 5 (36 fetches)."""
    table = HostTable(BRACKET)
    state = table.get("h")
    state.adaptive, state.fail_at, state.good_at, state.fail_cost = 1.0, 0.75, 1.0, 5.0
    state.healthy_run = 1
    t = 0.0
    table.start("h", t)
    while state.adaptive == 1.0:
        t += 1.0
        table.start("h", t)
        table.feedback("h", Signal(200), t + 0.01)
    probe = state.adaptive
    assert probe == pytest.approx(0.75 ** recovery.PROBE_SHARE)
    t += 1.0  # the IP's lag: still at 1 s, healthy
    table.start("h", t)
    table.feedback("h", Signal(200), t + 0.01)
    t += probe
    table.start("h", t)
    table.feedback("h", Signal(429, 5.0), t + 0.01)  # refused at its own pace
    assert (state.fail_at, state.adaptive) == (pytest.approx(probe), 1.0)
    assert state.fail_cost == 15.0
    t += 5.0
    held = 0
    while state.adaptive == 1.0:
        t += 1.0
        table.start("h", t)
        table.feedback("h", Signal(200), t + 0.01)
        held += 1
    # the first fetch after the pause proves nothing; then the rent for 0.3 x 15 s
    assert held == 1 + math.ceil(0.3 * 15.0 / (1.0 - probe))


def test_a_host_held_at_exactly_its_pace_pays_two_pauses_at_most() -> None:
    """Servers whose pace is the known-good one the descent left (1/s and 4/3/s
    from the 1 s start: x0.75 steps land on them): every probe is refused. With
    Retry-After 5, a 60-page crawl (the bench's 1/s cells) pays the descent's
    pause and one refused probe's; the linear record paid a third pause. The
    pauses become rarer (each refusal doubles the price of the next probe),
    never none: a longer crawl still probes, and forgetting halves the record."""
    for rate in (1.0, 4 / 3):
        run = crawl(FAST, TokenBucket(1 / rate, retry_after=5.0), 60, slip=0.01)
        assert run.early() == 0
        assert run.refused() <= 2


def test_a_server_that_got_faster_is_found_again() -> None:
    """Issue 10 review: forgetting lowered ``fail_at`` but kept the refusal
    record, so after a few refused probes (``fail_cost`` 5 -> 15 -> 35 ...) the
    rent for the next probe ran to thousands of fetches: a 1/s server that
    doubled its rate was not found in 11,000 fetches. Forgetting halves the
    record too (a refusal doubled it). The bound is the design's arithmetic:
    from a failing pace near 1 s, reaching 0.5 s takes
    ceil(log(0.5) / log(FORGET_STEP)) = 14 forgets of FORGET_AFTER = 100 held
    fetches each, 1,400 fetches at least; allowed twice that (found after
    ~2,040)."""
    slip = 0.01
    forgets = math.ceil(math.log(0.5) / math.log(recovery.FORGET_STEP))
    assert forgets == 14
    bound = 2 * forgets * recovery.FORGET_AFTER
    table = HostTable(FAST)
    run = crawl(FAST, TokenBucket(1.0, retry_after=5.0), 300 + bound, slip=slip,
                limits={300: 0.5}, table=table)
    assert run.early() == 0
    assert run.refused() <= 0.05 * len(run.statuses)
    assert max(run.intervals[-100:]) + slip <= 1.1 * 0.5  # held within 10% of the new pace


def test_no_round_pace_between_subnormal_intervals() -> None:
    """Found by hypothesis: a floor of 0 let an interval reach 1e-323, where
    ``1 / top`` overflows; there is no round pace there, and no error."""
    assert recovery.round_pace_in(5e-324, 1e-323) == 0.0
    assert not recovery.is_round(5e-324)
