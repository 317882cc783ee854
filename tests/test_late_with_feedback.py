"""A late start rides on its fetch's feedback: one Redis round trip, not two (issue 12).

Against a real ``redis-server``: the feedback script moves the shared buckets as
``late_start`` would, and the middleware's shared sync holds a late start back
for the feedback only while the report can still land before the next start on
the buckets could be booked; otherwise it goes alone.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest_twisted
from redis_server import RedisServer, aio, opened_on_this_loop, shared_middleware

from scrapy_politeness.distributed import LateStart
from scrapy_politeness.distributed.redis_backend import RedisBackend
from scrapy_politeness.downloader.send_lateness import Dispatch
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Config, Signal

IP = "127.6.0.9"
CONFIG = Config(default=0.3, floor=0.3, ceiling=10.0, ip_floor=0.3)
HEALTHY = Signal(200, 0.0, 0.01, 0.0)


async def _feedback_moves_buckets(server: RedisServer) -> None:
    b = RedisBackend(server.url, namespace=f"t:{uuid.uuid4().hex[:8]}", margin=0.0)
    await b.open()
    try:
        await b.reserve("a.test", IP, CONFIG)  # booked now: the IP is free again in 0.3 s
        # Its real start is 0.2 s from now (as a recheck's push reports it).
        await b.feedback("a.test", HEALTHY, CONFIG, 5, late=LateStart(IP, -0.2, 0.3, 0.3))
        got = time.monotonic()
        delay, _ = await b.reserve("b.test", IP, CONFIG)  # another host on the IP
        assert time.monotonic() + delay >= got + 0.2 + 0.3 - 0.01
        delay, _ = await b.reserve("a.test", None, CONFIG)  # the host itself
        assert time.monotonic() + delay >= got + 0.2 + 0.3 - 0.01
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_feedback_carrying_a_late_start_moves_host_and_ip(
        redis_server: RedisServer) -> None:
    await aio(_feedback_moves_buckets(redis_server))


async def _settled(mw: PolitenessMiddleware) -> None:
    """Until the shared sync's Redis calls in flight have answered."""
    assert mw.shared is not None
    if mw.shared._tasks:
        await asyncio.wait(list(mw.shared._tasks))


async def _rides_or_goes_alone(server: RedisServer) -> None:
    mw = shared_middleware(server)
    assert mw.backend is not None
    assert mw.shared is not None
    loop = await opened_on_this_loop(mw)
    stats = mw.stats
    try:
        # Answered in time: the report waits and rides on the feedback.
        state = mw.hosts.get("a.test")
        now = loop.time()
        sent = Dispatch("a.test", now, IP, booked_slip=0.0)
        mw.shared.late_arrival(sent, state, now + 0.2, now)
        await asyncio.sleep(0.01)
        assert stats.get_value("politeness/shared/late_starts") is None  # nothing sent yet
        timer = mw.shared._late[id(sent)].timer
        mw.shared.feedback(sent, HEALTHY)
        await _settled(mw)
        assert stats.get_value("politeness/shared/late_starts_with_feedback") == 1
        assert not mw.shared._late  # reported, and its timer cancelled
        assert timer.cancelled()
        got = time.monotonic()
        delay, _ = await mw.backend.reserve("c.test", IP, CONFIG)
        assert time.monotonic() + delay >= got + 0.19 + 0.3 - 0.02

        # No answer in time: it goes alone before half the spacing is over.
        state = mw.hosts.get("b.test")
        now = loop.time()
        lost = Dispatch("b.test", now, "127.6.0.10", booked_slip=0.0)
        mw.shared.late_arrival(lost, state, now + 0.1, now)
        await asyncio.sleep(0.05)
        assert stats.get_value("politeness/shared/late_starts") == 1  # still waiting
        for _ in range(100):
            if id(lost) not in mw.shared._late:
                break
            await asyncio.sleep(0.005)
        assert id(lost) not in mw.shared._late
        assert loop.time() - now <= (0.3 - 0.05) / 2 + 0.05
        await _settled(mw)
        assert stats.get_value("politeness/shared/late_starts") == 2
        assert stats.get_value("politeness/shared/late_starts_with_feedback") == 1
        delay, _ = await mw.backend.reserve("d.test", "127.6.0.10", CONFIG)
        assert loop.time() + delay >= now + 0.1 + 0.3 - 0.02
    finally:
        await mw.backend.close()


@pytest_twisted.ensureDeferred
async def test_a_late_start_rides_on_the_feedback_or_goes_alone_in_time(
        redis_server: RedisServer) -> None:
    await aio(_rides_or_goes_alone(redis_server))
