"""The Redis backend against a real ``redis-server``: Lua steps vs the Python policy.

The Lua scripts re-implement ``HostTable.feedback`` and the gate's booking
rule; these tests hold them to the pure-Python reference on random signal
sequences, and check spacing, server-clock use, expiry, outages and that a
password never reaches a message or a log line.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
import uuid
from typing import Any

import pytest
import pytest_twisted
import redis
from redis_server import RedisServer, aio, require_redis_server

from scrapy_politeness.distributed import make_backend
from scrapy_politeness.distributed.redis_backend import BackendUnavailable, RedisBackend, redact_url
from scrapy_politeness.policy import Config, Signal, recovery
from scrapy_politeness.policy.tables import HostTable

LOGGER = "scrapy_politeness.distributed.redis_backend"





def backend(server: RedisServer, **kw: Any) -> RedisBackend:
    kw.setdefault("margin", 0.0)
    return RedisBackend(server.url, namespace=f"t:{uuid.uuid4().hex[:8]}", **kw)


def sync_client(server: RedisServer) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.port, decode_responses=True)


def last_start(server: RedisServer, b: RedisBackend, key: str) -> float:
    return float(sync_client(server).hget(f"{b.namespace}:host:{key}", "last_start") or "nan")


# -- the AIMD contract -----------------------------------------------------------

CONFIGS = [
    Config(default=1.0, floor=0.25, ceiling=8.0),
    Config(default=0.3, floor=0.3, ceiling=2.0, backoff=3.0, narrow=0.1, latency_min_rise=0.0),
    Config(default=2.0, floor=0.0, ceiling=4.0, soft_widen=1.5, latency_rise=1.2),
]
# The fast recovery (policy/recovery.py); floor 0 and backoff 1 exercise the
# "a failure always widens" rule (issue 9 item 2) on both sides too.
FAST_CONFIGS = [
    Config(recovery="fast"),
    Config(default=0.0, floor=0.0, ceiling=4.0, recovery="fast"),
    Config(default=0.5, floor=0.1, ceiling=3.0, backoff=1.0, narrow=0.0, recovery="fast"),
    Config(default=0.0, floor=0.0, ceiling=4.0, backoff=1.5),  # additive, floor 0
]


def random_signal(rng: random.Random, healthy: float = 0.0) -> Signal:
    if rng.random() < healthy:
        return Signal(200, 0.0, rng.choice([0.0, 0.01]))
    status = rng.choice([200, 200, 200, 200, 301, 404, 429, 500, 503, 0])
    retry_after = rng.choice([0.0, 0.0, 0.0, rng.uniform(0.1, 6.0)])
    latency = rng.choice([0.0, rng.uniform(0.001, 0.05), rng.uniform(0.05, 1.5)])
    return Signal(status, retry_after, latency)


async def _feedback_contract(server: RedisServer, seed: int, configs: list[Config] = CONFIGS,
                             steps: int = 60, healthy: float = 0.0,
                             *, script: list[Signal] | None = None,
                             backlogs: tuple[int, ...] = (-1,)) -> HostTable:
    rng = random.Random(seed)
    config = configs[seed % len(configs)]
    dead_after = rng.choice([2, 3, 5])
    b = backend(server)
    await b.open()
    try:
        table = HostTable(config, dead_after=dead_after)
        for step in range(len(script) if script else steps):
            signal = script[step] if script else random_signal(rng, healthy)
            backlog = rng.choice(backlogs)  # what the queue reported (recovery.pays_back)
            shared = await b.feedback("h", signal, config, dead_after, backlog=backlog)
            now = time.monotonic()
            table.get("h").backlog = backlog
            table.feedback("h", signal, now)
            ref = table.get("h")
            where = f"seed {seed} step {step} {signal}"
            assert shared.adaptive == pytest.approx(ref.adaptive, abs=1e-9), where
            assert shared.latency == pytest.approx(ref.latency, abs=1e-9), where
            assert shared.ceiling_streak == ref.ceiling_streak, where
            assert shared.dead == ref.dead, where
            assert shared.fail_at == pytest.approx(ref.fail_at, abs=1e-9), where
            assert shared.good_at == pytest.approx(ref.good_at, abs=1e-9), where
            assert shared.healthy_run == ref.healthy_run, where
            assert shared.fail_cost == pytest.approx(ref.fail_cost, abs=1e-9), where
            # The Retry-After window, anchored on each side's own clock.
            assert shared.not_before_in == pytest.approx(max(0.0, ref.not_before - now),
                                                         abs=0.05), where
        return table
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("seed", range(6))
async def test_feedback_equals_host_table(redis_server: RedisServer, seed: int) -> None:
    await aio(_feedback_contract(redis_server, seed))


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("seed", range(8))
async def test_fast_recovery_feedback_equals_host_table(redis_server: RedisServer,
                                                        seed: int) -> None:
    """Long mostly-healthy runs reach the probes (PATIENCE x fail_cost) and the forgetting."""
    await aio(_feedback_contract(redis_server, seed, FAST_CONFIGS, steps=400,
                                 healthy=0.97 if seed % 2 else 0.8))


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("seed", range(4))
async def test_probes_priced_by_the_backlog_alike(redis_server: RedisServer, seed: int) -> None:
    """The backlog the queue reports prices each probe on both sides alike."""
    await aio(_feedback_contract(redis_server, seed, FAST_CONFIGS, steps=400, healthy=0.97,
                                 backlogs=(-1, 0, 2, 20, 400)))


async def _probe_script(server: RedisServer) -> None:
    """A scripted run through every branch of the fast recovery: the descent, a
    429, the hold, probes paid for by the slack, a closed bracket, forgetting."""
    script = [Signal(200), Signal(200), Signal(429, 1.0), *[Signal(200)] * 300]
    table = await _feedback_contract(server, 0, FAST_CONFIGS, script=script)
    state = table.get("h")
    assert state.fail_at < 0.5625  # forgotten below the 429's pace (0.5625 s)
    assert state.adaptive < 0.75  # probed below the known-good pace (0.75 s)


@pytest_twisted.ensureDeferred
async def test_fast_recovery_probes_and_forgets_alike(redis_server: RedisServer) -> None:
    await aio(_probe_script(redis_server))


async def _paces(server: RedisServer) -> None:
    """The same memory and gap on both sides give the same step: a fetch at the
    pace held counts toward a probe, one after an idle gap proves nothing."""
    config = Config(recovery="fast")
    b = backend(server)
    await b.open()
    try:
        client = sync_client(server)
        for n, gap in enumerate((0.5, 0.53, 0.6, 3.0)):
            key = f"pace{n}"
            memory = {"adaptive": 0.5, "fail_at": 0.4, "good_at": 0.5, "run": 9,
                      "cost": 1.0, "gap": gap}
            client.hset(f"{b.namespace}:host:{key}", mapping=memory)
            state = HostTable(config).get(key)
            state.adaptive, state.fail_at, state.good_at = 0.5, 0.4, 0.5
            state.healthy_run, state.fail_cost, state.gap = 9, 1.0, gap
            expected = recovery.fast_step(config, state, Signal(200))
            shared = await b.feedback(key, Signal(200), config, 5)
            assert shared.adaptive == pytest.approx(expected, abs=1e-9), gap
            assert (shared.healthy_run, shared.good_at) == (state.healthy_run,
                                                            pytest.approx(state.good_at))
        assert shared.adaptive == 0.5
        assert shared.healthy_run == 9
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_fast_recovery_judges_only_fetches_at_the_pace_held(
        redis_server: RedisServer) -> None:
    await aio(_paces(redis_server))


async def _pushed_behind(server: RedisServer) -> None:
    config = Config(default=0.4, floor=0.25, ceiling=10.0, recovery="fast")
    b = backend(server)
    await b.open()
    try:
        await b.reserve("r", None, config)
        second, _ = await b.reserve("r", None, config)  # booked 0.4 s ahead
        await b.feedback("r", Signal(429, 1.0), config, 5)  # a pause of 1 s, learnt meanwhile
        third, shared = await b.reserve("r", None, config)  # booked for the pause's end
        assert shared is not None
        interval = max(shared.adaptive, config.floor)
        await asyncio.sleep(second)  # the second booking's time comes: the pause holds it
        extra = await b.wait_before_send("r", None, config)
        # it must not start with the third at the pause's end: behind it instead
        assert extra >= third - second + interval - 0.02
        # the client reports its moved start, as after every pushed recheck ...
        await b.correct_start("r", None, -extra, interval, interval)
        await asyncio.sleep(max(0.0, third - second - 0.01))
        # ... which must not hold back the third booking, now ahead of it
        assert await b.wait_before_send("r", None, config) < 0.05
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_a_booking_pushed_past_a_pause_goes_behind_later_ones(
        redis_server: RedisServer) -> None:
    """Two processes' bookings both held by one Retry-After must not start together
    at its end (issue 10: three processes on Redis, a second 429 right after the pause)."""
    await aio(_pushed_behind(redis_server))


async def _booked_gap(server: RedisServer) -> None:
    config = Config(default=0.4, floor=0.25, ceiling=10.0, recovery="fast")
    b = backend(server)
    await b.open()
    try:
        table = HostTable(config)
        for _ in range(2):  # two bookings 0.4 s apart (server side); the same locally
            await b.reserve("g", None, config)
        table.start("g", 10.0)
        table.start("g", 10.4)
        for signal in (Signal(200), Signal(429, 1.0)):
            shared = await b.feedback("g", signal, config, 5)
            table.feedback("g", signal, 11.0)
            ref = table.get("g")
            # instants on the server's clock: float seconds since 1970, ~1e-7 s apart
            assert shared.good_at == pytest.approx(ref.good_at, abs=1e-6)
            assert shared.fail_at == pytest.approx(ref.fail_at, abs=1e-6)
            assert shared.adaptive == pytest.approx(ref.adaptive, abs=1e-6)
        assert shared.fail_at == pytest.approx(0.4)  # the booked gap, not the interval (0.3)
        # With several processes booking ahead, the host's last booked gap is
        # another fetch's: each reservation answers its own, the outcome carries it.
        _, booked = await b.reserve("g", None, config)
        assert booked is not None
        assert booked.gap == pytest.approx(max(0.4, shared.adaptive), abs=0.01)
        gap = 0.9 * shared.adaptive  # another gap than booked (several starts in flight)
        own = await b.feedback("g", Signal(429, 1.0), config, 5, gap=gap)
        assert own.fail_at == pytest.approx(gap)
        # A gap of idle time (30 s) is no pace: the failure is at the interval held.
        idle = await b.feedback("g", Signal(429, 1.0), config, 5, gap=30.0)
        assert idle.fail_at == pytest.approx(own.adaptive)
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_fast_recovery_judges_the_booked_gap(redis_server: RedisServer) -> None:
    """reserve.lua records the start-to-start gap; feedback.lua judges that pace."""
    await aio(_booked_gap(redis_server))


# -- reserve: spacing, the IP rule, no IP bucket, the server's clock ----------------

async def _spacing(server: RedisServer) -> None:
    config = Config(default=0.4, floor=0.25, ceiling=10.0, ip_floor=0.1)
    b = backend(server)
    await b.open()
    try:
        delays, starts = [], []
        for _ in range(4):
            delay, shared = await b.reserve("one", "127.0.0.1", config)
            assert shared is not None
            delays.append(delay)
            starts.append(last_start(server, b, "one"))
        assert delays[0] == 0.0
        for earlier, later in itertools.pairwise(starts):
            assert later - earlier == pytest.approx(0.4, abs=1e-6)
        # The delays are relative to the server's now: ~0.4, 0.8, 1.2 minus round trips.
        for i, delay in enumerate(delays[1:], 1):
            assert 0.4 * i - 0.05 < delay <= 0.4 * i
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_consecutive_reserves_are_one_interval_apart(redis_server: RedisServer) -> None:
    await aio(_spacing(redis_server))


async def _ip_rule(server: RedisServer) -> None:
    config = Config(default=0.5, floor=0.25, ceiling=10.0, ip_floor=0.3)
    b = backend(server)
    await b.open()
    try:
        # a's crawl-delay spaces a only; its IP spacing is the clamped adaptive (0.5).
        await b.set_crawl_delay("a", 2.0)
        await b.set_crawl_delay("a", 1.0)  # keeps the max
        _, shared = await b.reserve("a", "127.0.0.9", config)
        assert shared is not None
        assert shared.crawl_delay == 2.0
        a0 = last_start(server, b, "a")
        await b.reserve("b", "127.0.0.9", config)
        b0 = last_start(server, b, "b")
        assert b0 - a0 == pytest.approx(0.5, abs=1e-6)  # max(ip_floor, a's ip interval)
        await b.reserve("a", "127.0.0.9", config)
        a1 = last_start(server, b, "a")
        assert a1 - a0 == pytest.approx(2.0, abs=1e-6)  # a's own interval: the crawl-delay
        # Two hosts with no IP share nothing: both start now.
        d1, _ = await b.reserve("x", None, config)
        d2, _ = await b.reserve("y", None, config)
        d3, _ = await b.reserve("z", "0.0.0.0", config)
        assert d1 == d2 == d3 == 0.0
        keys = sync_client(server).keys(f"{b.namespace}:ip:*")
        assert keys == [f"{b.namespace}:ip:127.0.0.9"]
    finally:
        await b.close()


async def _ip_spacing_rule(server: RedisServer) -> None:
    """Decoupled (POLITENESS_IP_MODEL): the IP is spaced by the spacing the
    client's IPTable gives, not by the host's interval, as IPTable.spend."""
    config = Config(default=1.0, floor=0.25, ceiling=10.0, ip_floor=0.3)
    b = backend(server)
    await b.open()
    try:
        await b.reserve("a", "127.0.0.7", config, ip_spacing=0.3)
        a0 = last_start(server, b, "a")
        await b.reserve("b", "127.0.0.7", config, ip_spacing=0.3)
        b0 = last_start(server, b, "b")
        assert b0 - a0 == pytest.approx(0.3, abs=1e-6)  # coupled: 1.0, a's interval
        await b.reserve("a", "127.0.0.7", config, ip_spacing=0.3)
        assert last_start(server, b, "a") - a0 == pytest.approx(1.0, abs=1e-6)
    finally:
        await b.close()


async def _own_gap(server: RedisServer) -> None:
    """A booking pushed later by its IP (a neighbour's wide spacing) records the
    host's own gap, as HostTable.start: the pace its controller chose."""
    config = Config(default=0.5, floor=0.25, ceiling=10.0, ip_floor=0.1)
    b = backend(server)
    await b.open()
    try:
        await b.reserve("fast", "127.0.0.8", config, ip_spacing=0.1)
        await b.reserve("slow", "127.0.0.8", config, ip_spacing=2.0)  # holds the IP 2 s
        _, shared = await b.reserve("fast", "127.0.0.8", config, ip_spacing=0.1)
        assert shared is not None
        f0 = last_start(server, b, "fast")
        assert shared.gap == pytest.approx(0.5, abs=1e-6)  # its own, not the 2 s it waited
        assert f0 - float(sync_client(server).hget(f"{b.namespace}:host:slow", "last_start")
                          or "nan") == pytest.approx(2.0, abs=1e-6)
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_a_booking_held_by_its_ip_keeps_its_own_gap(redis_server: RedisServer) -> None:
    await aio(_own_gap(redis_server))


@pytest_twisted.ensureDeferred
async def test_decoupled_ip_spacing_is_the_clients(redis_server: RedisServer) -> None:
    await aio(_ip_spacing_rule(redis_server))


@pytest_twisted.ensureDeferred
async def test_two_hosts_on_one_ip_and_no_ip_bucket_for_unknown_ip(
        redis_server: RedisServer) -> None:
    await aio(_ip_rule(redis_server))


async def _skew(server: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    config = Config(default=0.5, floor=0.25, ceiling=10.0)
    b = backend(server)
    await b.open()
    try:
        d0, _ = await b.reserve("skew", "127.0.0.2", config)
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 3600.0)  # an hour ahead
        d1, _ = await b.reserve("skew", "127.0.0.2", config)
        monkeypatch.setattr(time, "time", lambda: real() - 7200.0)  # two hours behind
        d2, _ = await b.reserve("skew", "127.0.0.2", config)
        assert d0 == 0.0
        assert 0.45 < d1 <= 0.5
        assert 0.95 < d2 <= 1.0
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_client_clock_is_irrelevant(redis_server: RedisServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    await aio(_skew(redis_server, monkeypatch))


# -- expiry, round trips ---------------------------------------------------------------

async def _expiry(server: RedisServer) -> None:
    config = Config(default=0.3, floor=0.1, ceiling=0.5, ip_floor=0.1)
    b = backend(server, idle_margin=0.3)
    await b.open()
    client = sync_client(server)
    try:
        for i in range(20):
            await b.reserve(f"h{i}", f"10.1.0.{i % 3}", config)
            await b.feedback(f"h{i}", Signal(503 if i % 4 == 0 else 200, 0.0, 0.01), config, 5)
        keys = client.keys(f"{b.namespace}:*")
        assert len(keys) == 20 + 3 + 1
        assert all(client.pttl(k) > 0 for k in keys)
        # Gone once idle: the last booked start (~2 s ahead: 7 hosts per IP at
        # 0.3 s) + max(ceiling 0.5, interval) + the 0.3 s margin.
        deadline = time.monotonic() + 6
        while client.keys(f"{b.namespace}:*") and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert client.keys(f"{b.namespace}:*") == []
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_every_key_expires_when_idle(redis_server: RedisServer) -> None:
    await aio(_expiry(redis_server))


def _command_calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name: int(v["calls"]) for name, v in stats.items()}


async def _round_trips(server: RedisServer) -> None:
    config = Config()
    b = backend(server)
    await b.open()
    client = sync_client(server)
    try:
        before = _command_calls(client)
        for i in range(25):
            await b.reserve(f"r{i % 5}", "127.2.0.1", config)
            await b.feedback(f"r{i % 5}", Signal(200, 0.0, 0.02), config, 5)
        after = _command_calls(client)
        delta = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
        delta.pop("cmdstat_info", None)  # our own measurement
        # Commands run inside scripts are not counted as client round trips... but
        # Redis counts them in commandstats too: keep only what the client sent.
        assert delta.get("cmdstat_evalsha") == 50
        sent = {k: v for k, v in delta.items() if k in (
            "cmdstat_evalsha", "cmdstat_eval", "cmdstat_script|load", "cmdstat_ping")}
        assert sent == {"cmdstat_evalsha": 50}
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_one_round_trip_per_reserve_and_per_feedback(redis_server: RedisServer) -> None:
    await aio(_round_trips(redis_server))


# -- start-up failure and password redaction ----------------------------------------

def test_redact_url() -> None:
    assert redact_url("redis://:hunter2@h:1/0") == "redis://:***@h:1/0"
    assert redact_url("rediss://u:p%40ss@h/0") == "rediss://u:***@h/0"
    assert redact_url("redis://h/0?password=pw&db=1") == "redis://h/0?password=***&db=1"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"


async def _unreachable(url: str) -> BackendUnavailable:
    b = make_backend(url, namespace="t", on_loss="hold")
    assert isinstance(b, RedisBackend)
    with pytest.raises(BackendUnavailable) as info:
        await b.open()
    return info.value


@pytest_twisted.ensureDeferred
async def test_unreachable_at_start_raises_without_the_password(
        caplog: pytest.LogCaptureFixture) -> None:
    require_redis_server()
    from redis_server import free_port

    secret = "s3cr3t-Pa55"
    url = f"redis://crawler:{secret}@127.0.0.1:{free_port()}/0"
    caplog.set_level(logging.DEBUG)
    exc = await aio(_unreachable(url))
    assert secret not in str(exc)
    assert secret not in repr(exc)
    assert "redis://crawler:***@127.0.0.1" in str(exc)
    assert exc.__cause__ is None
    assert exc.__suppress_context__
    assert secret not in caplog.text


async def _wrong_password(server: RedisServer) -> BackendUnavailable:
    # A server without a password refuses AUTH: the message must not echo it either.
    return await _unreachable(f"redis://user:verysecret@127.0.0.1:{server.port}/0")


@pytest_twisted.ensureDeferred
async def test_auth_error_does_not_leak_the_password(redis_server: RedisServer) -> None:
    exc = await aio(_wrong_password(redis_server))
    assert "verysecret" not in str(exc)


# -- losing Redis mid-crawl -------------------------------------------------------------

async def _hold(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    config = Config(default=0.3, floor=0.3, ceiling=10.0, ip_floor=0.3)
    b = backend(server, on_loss="hold", backoff=(0.05, 0.4))
    await b.open()
    try:
        for _ in range(3):  # books up to ~0.9 s ahead
            await b.reserve("held", "127.3.0.1", config)
        booked_until = time.monotonic() + 0.9
        server.kill()
        waiters = [asyncio.ensure_future(b.reserve("held", "127.3.0.1", config))
                   for _ in range(5)]
        with pytest.raises(BackendUnavailable):
            await b.feedback("held", Signal(200), config, 5)  # dropped, not held
        await asyncio.sleep(0.5)
        assert not any(w.done() for w in waiters)  # nothing leaves without a booking
        server.start()  # the same port, an empty dataset
        results = await asyncio.wait_for(asyncio.gather(*waiters), 10)
        assert all(shared is not None for _, shared in results)
        got_at = time.monotonic()
        starts = sorted(got_at + delay for delay, _ in results)
        # The restarted server knew nothing, yet no new booking lands on the old ones.
        assert starts[0] >= booked_until - 0.05
        warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
        infos = [r for r in caplog.records if r.name == LOGGER and "is back after" in r.message]
        assert len(warnings) == 1
        assert "holding" in warnings[0].message
        assert len(infos) == 1
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_hold_mode_waits_for_redis_and_keeps_old_bookings(
        own_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await aio(_hold(own_redis, caplog))


async def _local(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    config = Config(default=0.3, floor=0.3, ceiling=10.0)
    b = backend(server, on_loss="local", backoff=(0.05, 0.2))
    await b.open()
    try:
        _, shared = await b.reserve("loc", "127.4.0.1", config)
        assert shared is not None
        server.kill()
        # Local mode answers without waiting for Redis: a wait would hang here (guard only).
        async def ten() -> list[Any]:
            return [await b.reserve("loc", "127.4.0.1", config) for _ in range(10)]

        answers = await asyncio.wait_for(ten(), 10)
        assert all(a == (0.0, None) for a in answers)
        await b.set_crawl_delay("loc", 3.0)  # not shared, not raised
        server.start()
        deadline = time.monotonic() + 5
        shared = None
        while shared is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            _, shared = await b.reserve("loc", "127.4.0.1", config)
        assert shared is not None
        warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "local buckets" in warnings[0].message
        assert sum("is back after" in r.message for r in caplog.records) == 1
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_local_mode_falls_back_at_once_and_logs_once(
        own_redis: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    await aio(_local(own_redis, caplog))


async def _unnoticed_restart(server: RedisServer) -> None:
    config = Config(default=0.4, floor=0.4, ceiling=10.0, ip_floor=0.4)
    a, b = backend(server, grace=0.5), backend(server, grace=0.5)
    b.namespace = a.namespace
    await a.open()
    await b.open()
    try:
        await b.reserve("x", "127.5.0.1", config)
        for _ in range(3):  # a books x up to ~1.6 s ahead
            await a.reserve("x", "127.5.0.1", config)
        booked_until = time.monotonic() + 1.6
        server.kill()
        server.start()  # empty, and neither client made a call while it was down
        # b wants x again; a, still sleeping towards its bookings, makes any call
        # within the grace window and re-seeds them.
        (delay, shared), _ = await asyncio.gather(
            b.reserve("x", "127.5.0.1", config), a.reserve("y", "127.5.0.9", config))
        assert shared is not None
        assert time.monotonic() + delay >= booked_until - 0.05
    finally:
        await a.close()
        await b.close()


@pytest_twisted.ensureDeferred
async def test_restart_nobody_noticed_still_keeps_old_bookings(own_redis: RedisServer) -> None:
    await aio(_unnoticed_restart(own_redis))
