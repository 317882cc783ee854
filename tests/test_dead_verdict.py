"""One rule for how long a dead host stays dead once its process is gone.

Redis lets a host's key expire ``POLITENESS_IDLE_TTL`` after the longest wait
it encodes (``feedback.lua``); ``JOBDIR`` restores a dead host's verdict for
exactly as long (``persistence.dead_verdict_expired``). The contract test
declares a host dead in a real redis-server and in the local tables with the
same outcomes, and checks that the key's remaining life is where the JOBDIR
rule flips.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import pytest_twisted
import redis
from redis_server import RedisServer, aio
from scrapy.utils.test import get_crawler

from scrapy_politeness.distributed.redis_backend import RedisBackend
from scrapy_politeness.jobdir import persistence
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Config, HostTable, Signal
from scrapy_politeness.settings import PolitenessSettings

CONFIG = Config(default=0.5, floor=0.5, ceiling=1.0)
IDLE_TTL = 2.0




def _local_entry(signals: list[Signal], booked: bool) -> dict[str, Any]:
    """The JOBDIR entry of a host fed ``signals`` at t=100, saved at once."""
    table = HostTable(CONFIG, dead_after=1)
    if booked:
        table.start("h.test", 100.0)
    for sig in signals:
        table.feedback("h.test", sig, 100.0)
    assert table.get("h.test").dead
    entry: dict[str, Any] = persistence.snapshot(table.items(), 100.0, 0.0)["hosts"]["h.test"]
    return entry


async def _redis_life(server: RedisServer, signals: list[Signal], booked: bool) -> float:
    """Seconds the dead host's key has left in Redis right after the outcomes."""
    b = RedisBackend(server.url, namespace=f"t:{uuid.uuid4().hex[:8]}", margin=0.0,
                     idle_margin=IDLE_TTL)
    await b.open()
    try:
        if booked:
            await b.reserve("h.test", None, CONFIG)
        shared = None
        for sig in signals:
            shared = await b.feedback("h.test", sig, CONFIG, 1)
        assert shared is not None
        assert shared.dead
        client = redis.Redis(host="127.0.0.1", port=server.port)
        return int(client.pttl(f"{b.namespace}:host:h.test")) / 1000.0
    finally:
        await b.close()


CASES = {
    "declared dead": ([Signal(503)], False),
    "after a booked start": ([Signal(503)], True),
    "inside a Retry-After window": ([Signal(503, retry_after=2.5)], True),
}


@pytest.mark.parametrize(("signals", "booked"), list(CASES.values()), ids=list(CASES))
@pytest_twisted.ensureDeferred
async def test_jobdir_forgets_a_dead_host_when_redis_does(
        redis_server: RedisServer, signals: list[Signal], booked: bool) -> None:
    life = await aio(_redis_life(redis_server, signals, booked))
    entry = _local_entry(signals, booked)
    assert life > IDLE_TTL  # the key outlives its wait by POLITENESS_IDLE_TTL, no less
    # The JOBDIR verdict holds while the key lives and runs out when it expires
    # (50 ms for the round trips between the feedback and PTTL).
    assert not persistence.dead_verdict_expired(entry, CONFIG.ceiling, IDLE_TTL, life - 0.05)
    assert persistence.dead_verdict_expired(entry, CONFIG.ceiling, IDLE_TTL, life + 0.05)


def test_redis_keeps_shared_state_for_politeness_idle_ttl() -> None:
    crawler = get_crawler(settings_dict={"POLITENESS_BACKEND": "redis://127.0.0.1:1/0",
                                         "POLITENESS_IDLE_TTL": 7.0})
    mw = PolitenessMiddleware(crawler, PolitenessSettings.from_settings(crawler.settings))
    assert isinstance(mw.backend, RedisBackend)
    assert mw.backend.idle_margin == 7.0


def test_a_restored_dead_host_is_revived_once_its_verdict_ran_out() -> None:
    old = HostTable(Config(default=1.0, floor=0.25, ceiling=60.0), dead_after=1)
    old.set_crawl_delay("dead.test", 2.0)
    old.start("dead.test", 100.0)
    old.feedback("dead.test", Signal(503), 100.0)
    old.get("dead.test").adaptive = 60.0
    old.feedback("dead.test", Signal(503), 100.0)
    assert old.get("dead.test").dead
    doc = persistence.snapshot(old.items(), 100.0, 1_000.0)
    # The key would live 60 s (ceiling) + 300 s (POLITENESS_IDLE_TTL) after the outcome.
    kept, revived = HostTable(old.config), HostTable(old.config)
    persistence.restore(kept, doc, 5.0, 1_000.0 + 359.0, 300.0)
    persistence.restore(revived, doc, 5.0, 1_000.0 + 361.0, 300.0)
    assert kept.get("dead.test").dead
    assert kept.get("dead.test").adaptive == 60.0
    fresh = revived.get("dead.test")
    assert (fresh.dead, fresh.ceiling_streak, fresh.adaptive) == (False, 0, 1.0)
    assert fresh.crawl_delay == 2.0  # robots.txt is not fetched again: keep its delay
