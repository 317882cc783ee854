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

from scrapy_politeness.backends.redis import RedisBackend
from scrapy_politeness.policy import Config, HostTable, Signal

FAST = Config(recovery="fast")


def _outcomes(rate: float, retry_after: float, slip: float) -> list[tuple[float, Signal]]:
    run = crawl(FAST, TokenBucket(1 / rate, retry_after=retry_after), 60, slip=slip)
    gaps = [0.0] + [b - a for a, b in pairwise(run.starts)]
    return [(gap, Signal(status, retry_after if status == 429 else 0.0, 0.01))
            for gap, status in zip(gaps, run.statuses, strict=True)]


async def _replay(server: RedisServer, outcomes: list[tuple[float, Signal]]) -> HostTable:
    b = RedisBackend(server.url, namespace=f"t:{uuid.uuid4().hex[:8]}", margin=0.0)
    await b.open()
    try:
        table = HostTable(FAST)
        state = table.get("h")
        for step, (gap, signal) in enumerate(outcomes):
            shared = await b.feedback("h", signal, FAST, 5, gap=gap)
            state.gap = gap
            table.feedback("h", signal, time.monotonic())
            where = f"step {step} gap {gap:.4f} {signal}"
            assert shared.adaptive == pytest.approx(state.adaptive, abs=1e-9), where
            assert shared.fail_at == pytest.approx(state.fail_at, abs=1e-9), where
            assert shared.good_at == pytest.approx(state.good_at, abs=1e-9), where
            assert shared.healthy_run == state.healthy_run, where
            assert shared.fail_cost == pytest.approx(state.fail_cost, abs=1e-9), where
        return table
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize(("rate", "retry_after"), [(3.0, 2.0), (2.0, 1.0), (2.6, 5.0)])
async def test_lua_and_python_agree_on_a_crawl_with_a_send_slip(
        redis_server: RedisServer, rate: float, retry_after: float) -> None:
    outcomes = _outcomes(rate, retry_after, 0.01)
    assert any(s.status == 429 for _, s in outcomes)
    table = await aio(_replay(redis_server, outcomes))
    state = table.get("h")
    assert 0 < state.fail_at < state.good_at
