"""Redis backend fixes against a real ``redis-server`` (issue 9: 1, 7, 10; issue 14: 2, 4).

Crawl-delay kept across a restart, the send slip spent in the shared booking,
a booking counted in the local buckets before its sleep, one "re-seeded" line
per loss, a refused reconnect said at WARNING, and a Redis error reported as
what it is.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
import pytest_twisted
from redis_server import RedisServer, aio, opened_on_this_loop, shared_middleware
from scrapy.utils.test import get_crawler

from scrapy_politeness.distributed import SharedHost, redis_backend
from scrapy_politeness.distributed.redis_backend import (
    BackendError,
    BackendUnavailable,
    RedisBackend,
)
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Config, Release, Signal, merge_shared

LOGGER = "scrapy_politeness.distributed.redis_backend"
IP = "127.6.0.1"





def backend(server: RedisServer, url: str | None = None, **kw: Any) -> RedisBackend:
    kw.setdefault("margin", 0.0)
    return RedisBackend(url or server.url, namespace=f"t:{uuid.uuid4().hex[:8]}", **kw)


CONFIG = Config(default=0.3, floor=0.3, ceiling=10.0, ip_floor=0.3)


# -- issue 9 item 1: a crawl-delay the shared state lost comes back ------------------------

async def _crawl_delay_pushed_back(server: RedisServer) -> None:
    b = backend(server)
    await b.open()
    try:
        # The shared host knows no crawl-delay (learnt during an outage, or the
        # server restarted empty); this process knows 2 s.
        delay, shared = await b.reserve("cd", IP, CONFIG, crawl_delay=2.0)
        assert shared is not None
        assert shared.crawl_delay == 2.0
        delay, _ = await b.reserve("cd", None, CONFIG)  # another process, no crawl-delay known
        assert delay >= 2.0 - 0.05
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_reserve_pushes_the_local_crawl_delay_back(redis_server: RedisServer) -> None:
    await aio(_crawl_delay_pushed_back(redis_server))


def test_mirror_keeps_the_larger_crawl_delay() -> None:
    mw = PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_DNS_HOSTS_FILE": None}))
    state = mw.hosts.get("cd.test")
    state.crawl_delay = 5.0
    merge_shared(state, SharedHost(1.0, 0.0, 0.0, 0.0, 0, False), 0.0)
    assert state.crawl_delay == 5.0
    merge_shared(state, SharedHost(1.0, 7.0, 0.0, 0.0, 0, False), 0.0)
    assert state.crawl_delay == 7.0


# -- issue 9 item 10: the slip is spent in the shared booking -----------------------------

async def _slip_spent(server: RedisServer) -> None:
    b = backend(server)
    await b.open()
    try:
        await b.reserve("sl", IP, CONFIG, slip=0.1)
        # The next booking of any process (here: another host on the IP) is
        # spaced from the expected real send, start + 0.1 s.
        delay, _ = await b.reserve("sl2", IP, CONFIG)
        assert delay >= 0.3 + 0.1 - 0.01
        # A start later than that, corrected afterwards, moves both buckets.
        await b.correct_start("sl2", IP, 0.0, 0.3, 0.3)  # "it started just now"
        got = time.monotonic()
        delay, _ = await b.reserve("sl", IP, CONFIG)
        assert time.monotonic() + delay >= got + 0.3 - 0.01
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_reserve_spends_the_slip_and_late_starts_are_corrected(
        redis_server: RedisServer) -> None:
    await aio(_slip_spent(redis_server))


# -- issue 14 item 2: a booking counts in the local buckets before its sleep --------------

async def _booked_counts_locally(server: RedisServer) -> None:
    mw = shared_middleware(server)
    assert mw.backend is not None
    loop = await opened_on_this_loop(mw)
    try:
        state = mw.hosts.get("a.test")
        mw.hosts.get("b.test")
        await mw.backend.reserve("a.test", IP, state.config)  # books the IP until now + 0.3
        release = Release(object(), "b.test", IP, 0.3, loop.time())
        task = loop.create_task(mw.shared.reserve(release, mw.hosts.get("b.test"), loop))
        while mw.ips.eligible_at(IP) == 0 and not task.done():
            await asyncio.sleep(0.005)
        assert not task.done()  # still sleeping towards its booked start
        # Its booked start (about now + 0.3) already holds the local IP bucket:
        # a request the local gate releases now (say, after losing Redis) waits.
        assert mw.ips.eligible_at(IP) >= loop.time() + 0.3 + 0.3 - 0.05
        assert mw.hosts.get("b.test").eligible_at() >= loop.time() + 0.3 + 0.3 - 0.05
        await task
    finally:
        await mw.backend.close()


@pytest_twisted.ensureDeferred
async def test_a_shared_booking_counts_locally_before_its_sleep(
        redis_server: RedisServer) -> None:
    await aio(_booked_counts_locally(redis_server))


# -- issue 14 item 4: one "re-seeded" line per loss; a refusal said at WARNING ------------

async def _reseed_once(server: RedisServer) -> None:
    b = backend(server, backoff=(0.05, 0.2), grace=0.2)
    await b.open()
    try:
        for _ in range(3):
            await b.reserve("rs", IP, CONFIG)
        server.kill()
        server.start()  # empty; nobody noticed yet
        await asyncio.gather(*(b.reserve("rs", IP, CONFIG) for _ in range(16)))
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_state_loss_is_reseeded_and_logged_once(
        own_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await aio(_reseed_once(own_redis))
    lines = [r for r in caplog.records if "lost its state" in r.message]
    assert len(lines) == 1, [r.message for r in lines]


async def _refused_after_reconnect(server: RedisServer, secret: str) -> None:
    url = f"redis://:{secret}@127.0.0.1:{server.port}/0"
    b = backend(server, url, backoff=(0.05, 0.1))
    await b.open()
    try:
        await b.reserve("pw", IP, CONFIG)
        server.kill()
        server.extra_args = ["--requirepass", "another-one"]
        server.start()  # back, but our password is now wrong
        waiter = asyncio.ensure_future(b.reserve("pw", IP, CONFIG))
        await asyncio.sleep(0.8)  # several refused reconnects
        assert not waiter.done()  # hold: nothing leaves without a booking
        b.abort_waiting()
        with pytest.raises(BackendUnavailable):
            await waiter
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_wrong_password_after_reconnect_is_a_warning_with_its_cause(
        own_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    secret = "first-Pa55word"
    own_redis.extra_args = ["--requirepass", secret]
    own_redis.restart()
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    await aio(_refused_after_reconnect(own_redis, secret))
    refused = [r for r in caplog.records
               if r.levelno == logging.WARNING and "refuses" in r.message]
    assert len(refused) == 1, [r.message for r in caplog.records]
    assert "Authentication" in refused[0].message or "password" in refused[0].message
    assert secret not in caplog.text


# -- issue 9 item 7: a Redis error is reported as what it is ------------------------------

async def _broken_script(server: RedisServer) -> BackendError:
    b = backend(server)
    with pytest.raises(BackendError) as info:
        await b.open()
    return info.value


@pytest_twisted.ensureDeferred
async def test_a_script_redis_refuses_is_not_reported_as_unreachable(
        redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    real = redis_backend._script
    monkeypatch.setattr(redis_backend, "_script", lambda name: (
        "return {" if name == "feedback.lua" else real(name)))  # a Lua syntax error
    exc = await aio(_broken_script(redis_server))
    assert "cannot use Redis" not in str(exc)
    assert "feedback.lua" in str(exc)
    assert "ResponseError" in str(exc)


async def _wait_before_send(server: RedisServer) -> None:
    b = backend(server)
    await b.open()
    try:
        assert await b.wait_before_send("rc2", IP, CONFIG) == 0.0  # nothing reported late: no wait
        await b.reserve("rc1", IP, CONFIG)
        delay, _ = await b.reserve("rc2", IP, CONFIG)  # booked 0.3 s ahead, sleeping
        assert delay >= 0.3 - 0.01
        # Meanwhile rc1's send is found to have left only now (a stalled process):
        await b.correct_start("rc1", IP, 0.0, 0.3, 0.3)
        got = time.monotonic()
        extra = await b.wait_before_send("rc2", IP, CONFIG)
        # Just before its send, rc2 learns it must wait until rc1's real start + 0.3.
        assert time.monotonic() + extra >= got + 0.3 - 0.01
        assert await b.wait_before_send("other-host", "127.6.0.2", CONFIG) == 0.0
    finally:
        await b.close()


async def _recheck_pause(server: RedisServer) -> None:
    b = backend(server)
    await b.open()
    try:
        await b.reserve("rp", IP, CONFIG)
        delay, _ = await b.reserve("rp", IP, CONFIG)  # booked 0.3 s ahead, sleeping
        assert delay >= 0.3 - 0.01
        # Meanwhile another process's request got a 429 + Retry-After: 2.
        await b.feedback("rp", Signal(429, retry_after=2.0), CONFIG, 5)
        got = time.monotonic()
        extra = await b.wait_before_send("rp", IP, CONFIG)
        # Just before its send, the booking made before the pause waits it out.
        assert time.monotonic() + extra >= got + 2.0 - 0.01
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_a_booking_made_before_a_retry_after_pause_waits_for_it(
        redis_server: RedisServer) -> None:
    await aio(_recheck_pause(redis_server))


@pytest_twisted.ensureDeferred
async def test_a_booking_made_before_a_late_start_was_reported_waits_for_it(
        redis_server: RedisServer) -> None:
    await aio(_wait_before_send(redis_server))


# -- a booking that cannot be rechecked in hold mode is booked again ----------------------

async def _rebooked_after_loss(server: RedisServer) -> None:
    mw = shared_middleware(server)
    assert mw.backend is not None
    assert mw.shared is not None
    loop = await opened_on_this_loop(mw)
    try:
        state = mw.hosts.get("rb.test")
        await mw.shared.reserve(Release(None, "rb.test", IP, 0.3, loop.time()), state, loop)
        second = asyncio.ensure_future(
            mw.shared.reserve(Release(None, "rb.test", IP, 0.3, loop.time()), state, loop))
        await asyncio.sleep(0.1)  # booked 0.3 s ahead, sleeping towards it
        server.kill()
        killed = loop.time()
        # Another process's send may have left late meanwhile, and nobody can say
        # so: at its booked start the request cannot recheck, so it does not go.
        await asyncio.sleep(0.5)
        assert not second.done()
        server.start()  # empty: the request books again behind what Redis knows then
        release, _ = await second
        assert mw.stats.get_value("politeness/shared/rebooked_after_loss") == 1
        assert release.at >= killed + 0.5  # booked after Redis came back, not the old start
    finally:
        mw.backend.abort_waiting()
        await mw.backend.close()


@pytest_twisted.ensureDeferred
async def test_a_booking_that_cannot_be_rechecked_waits_and_books_again(
        own_redis: RedisServer) -> None:
    await aio(_rebooked_after_loss(own_redis))
