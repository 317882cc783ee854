"""feedback.lua against policy/recovery.py on whole crawls with a send slip.

A fake-clock crawl (tests/ratesim.py) of a token bucket, each start 10 ms after
its buckets permit, gives each fetch's gap and outcome: the descent, the 429,
holds, pending and confirmed probes, refused ones. Replayed through the real
``feedback.lua`` (each outcome with its own gap, as ``reserve.lua`` books it)
and through the in-process HostTable, both must agree on every field after
every step.
"""

from __future__ import annotations

import time
import uuid
from itertools import pairwise

import pytest
import pytest_twisted
from ratesim import TokenBucket, crawl
from redis_server import RedisServer, aio

from scrapy_politeness.distributed import SharedHost
from scrapy_politeness.distributed.redis_backend import RedisBackend
from scrapy_politeness.policy import Config, HostState, HostTable, Signal

FAST = Config(recovery="fast")
BRACKET = Config(recovery="bracket")  # the same search without the round-pace prior


class _Judged(HostTable):
    judged_pending = 0
    forgets = 0


def _outcomes(rate: float, retry_after: float, slip: float, pages: int = 60,
              config: Config = FAST) -> list[tuple[float, Signal]]:
    run = crawl(config, TokenBucket(1 / rate, retry_after=retry_after), pages, slip=slip)
    gaps = [0.0] + [b - a for a, b in pairwise(run.starts)]
    return [(gap, Signal(status, retry_after if status == 429 else 0.0, 0.01))
            for gap, status in zip(gaps, run.statuses, strict=True)]


def _assert_same(shared: SharedHost, state: HostState, where: str) -> None:
    """Redis's answer holds the controller state the Python tables computed."""
    assert shared.adaptive == pytest.approx(state.adaptive, abs=1e-9), where
    assert shared.fail_at == pytest.approx(state.fail_at, abs=1e-9), where
    assert shared.good_at == pytest.approx(state.good_at, abs=1e-9), where
    assert shared.healthy_run == state.healthy_run, where
    assert shared.fail_cost == pytest.approx(state.fail_cost, abs=1e-9), where


async def _replay(server: RedisServer, outcomes: list[tuple[float, Signal]],
                  config: Config = FAST) -> HostTable:
    """Both sides fed the same outcomes; ``table.judged_pending`` counts the
    probes judged at their own pace although their gaps reached the known-good
    pace (a probe step smaller than the slip, ``PENDING_AT_MOST``),
    ``table.forgets`` the failing paces forgotten (with the refusal record)."""
    b = RedisBackend(server.url, namespace=f"t:{uuid.uuid4().hex[:8]}", margin=0.0)
    await b.open()
    try:
        table = _Judged(config)
        state = table.get("h")
        for step, (gap, signal) in enumerate(outcomes):
            shared = await b.feedback("h", signal, config, 5, gap=gap)
            pending = state.fail_at > 0 and state.adaptive < state.good_at <= gap
            fail_at = state.fail_at
            state.gap = gap
            table.feedback("h", signal, time.monotonic())
            table.judged_pending += pending and state.good_at == state.adaptive
            table.forgets += signal.status == 200 and state.fail_at < fail_at
            where = f"step {step} gap {gap:.4f} {signal}"
            _assert_same(shared, state, where)
        return table
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("config", [FAST, BRACKET], ids=["fast", "bracket"])
@pytest.mark.parametrize(("rate", "retry_after"), [(3.0, 2.0), (2.0, 1.0), (2.6, 5.0), (1.0, 5.0)])
async def test_lua_and_python_agree_on_a_crawl_with_a_send_slip(
        redis_server: RedisServer, rate: float, retry_after: float, config: Config) -> None:
    outcomes = _outcomes(rate, retry_after, 0.01, config=config)
    assert any(s.status == 429 for _, s in outcomes)
    table = await aio(_replay(redis_server, outcomes, config))
    state = table.get("h")
    assert 0 < state.fail_at < state.good_at


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize(("rate", "retry_after", "round_pace"),
                         [(2.0, 5.0, 0.5), (3.0, 2.0, 1 / 3)])
async def test_lua_and_python_agree_on_round_paces(
        redis_server: RedisServer, rate: float, retry_after: float, round_pace: float) -> None:
    """Both sides probe the round pace inside the bracket and hold it: 1/3 s is
    read back from Redis as a float and must still count as round."""
    table = await aio(_replay(redis_server, _outcomes(rate, retry_after, 0.01, pages=80)))
    assert table.get("h").adaptive == pytest.approx(round_pace, abs=1e-12)


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize(("rate", "retry_after", "slip"), [(3.0, 2.0, 0.01), (3.0, 2.0, 0.03)])
async def test_lua_and_python_agree_when_the_slip_exceeds_a_probe_step(
        redis_server: RedisServer, rate: float, retry_after: float, slip: float) -> None:
    """Probe steps below the slip: the gaps at the probe's pace reach the
    known-good pace, and both sides judge the probe after ``PENDING_AT_MOST``."""
    outcomes = _outcomes(rate, retry_after, slip, pages=120, config=BRACKET)
    table = await aio(_replay(redis_server, outcomes, BRACKET))
    assert table.judged_pending >= 1


@pytest_twisted.ensureDeferred
async def test_lua_and_python_agree_on_forgetting(redis_server: RedisServer) -> None:
    """A 1/s server crawled long enough for the closed bracket to forget its
    failing pace (and halve the refusal record) several times. (Round paces
    first, 1/s is held at its own pace with the probe below it priced 16x:
    the bracket never closes in 500 fetches, so the search alone is run.)"""
    outcomes = _outcomes(1.0, 5.0, 0.01, pages=500, config=BRACKET)
    table = await aio(_replay(redis_server, outcomes, BRACKET))
    assert table.forgets >= 2



async def _late_starts(server: RedisServer, late: float) -> HostTable:
    """A token bucket at 2/s crawled with each start 10 ms late and, every 9th
    fetch, one ``late`` x the interval held, answered 503: the gap follows the
    interval of the moment, so the late failures land in the descent and in
    the hold."""
    b = RedisBackend(server.url, namespace=f"t:{uuid.uuid4().hex[:8]}", margin=0.0)
    await b.open()
    try:
        table = HostTable(FAST)
        state = table.get("h")
        bucket, t, lates = TokenBucket(0.5, retry_after=1.0), 0.0, 0
        for step in range(90):
            x = state.adaptive
            gap = x * (late if step % 9 == 4 else 1.0) + 0.01
            t += gap
            status = 503 if step % 9 == 4 else bucket.answer(t)
            signal = Signal(status, 1.0 if status == 429 else 0.0, 0.01)
            shared = await b.feedback("h", signal, FAST, 5, gap=gap)
            state.gap = gap
            table.feedback("h", signal, time.monotonic())
            lates += status == 503 and state.fail_at == x  # judged at the pace held
            where = f"step {step} gap {gap:.4f} {signal}"
            _assert_same(shared, state, where)
        assert lates >= 5
        return table
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("late", [1.2, 1.4])
async def test_lua_and_python_agree_on_failures_after_short_idle_gaps(
        redis_server: RedisServer, late: float) -> None:
    """Failures after a gap 1.1-1.5x the pace held (a late start) are judged at
    the pace held on both sides."""
    await aio(_late_starts(redis_server, late))
