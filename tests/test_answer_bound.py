"""A frontier booking answered sooner than where its pop spent the buckets moves them back.

The pop spends the host and IP buckets at the booked start plus the process's
expected send slip (twice its loop lag plus the pop's round trip), so that
another process's next booking is spaced from when the bytes are expected to
leave. In the fleet's broad crawl the bytes reached the farm a median 3-4 ms
after the booked start while 10-20 ms were booked for, and every gap on an IP
came out that much (plus the 10 ms margin) over its spacing. The answer bounds
the real start from above (the server read the request before it answered),
so the fetch's feedback moves both shared buckets back to it, less the margin
every spacing adds back, as the gate's own buckets already do: only while
that booking is still the last spend on each (nobody booked behind it).
Against a real redis-server for the script; the client's part on a fake clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import pytest_twisted
from redis_server import RedisServer, aio, redis_server_fixture
from test_frontier_lua import IP_FLOOR, MARGIN, NS, Frontier

from scrapy_politeness.distributed.redis_backend import RedisBackend
from scrapy_politeness.downloader.send_lateness import AnswerBound, Dispatch, SendSlip
from scrapy_politeness.policy import Config, HostTable, IPTable, Signal

IP = "127.2.0.1"  # the Frontier helper's default IP
CONFIG = Config(default=0.3, floor=0.3, ceiling=60.0, ip_floor=IP_FLOOR)
HEALTHY = Signal(200, 0.0, 0.01, 0.0)
SLIP = 0.2  # ample: the answer comes before the spend even on a busy machine


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from redis_server_fixture()


async def _opened(server: RedisServer) -> tuple[Frontier, RedisBackend]:
    """A frontier client (the pops) and a backend (the feedback) on ``server``."""
    b = RedisBackend(server.url, namespace=NS, margin=MARGIN)
    await b.open()
    return Frontier(server), b


async def _moves_back_while_its_own(server: RedisServer) -> None:
    f, b = await _opened(server)
    loop = asyncio.get_running_loop()
    try:
        f.push("a.test", "a1")
        f.push("b.test", "b1")  # the same IP
        reply = f.pop(slip=SLIP)
        assert reply[1] == "a1"
        spent = float(reply[7]) + SLIP  # the booked start on the server's clock + the slip
        host, ip_key = f"{NS}:host:a.test", f"{NS}:ip:{IP}"
        assert float(f.r.get(ip_key)) == pytest.approx(spent + IP_FLOOR, abs=1e-9)
        # Answered about now, before the spend: both buckets move back to it.
        before = f.now()
        await b.feedback("a.test", HEALTHY, CONFIG, 5,
                         early=AnswerBound(IP, loop.time(), spent, IP_FLOOR, MARGIN))
        after = f.now()
        moved = float(f.r.get(ip_key))
        assert before - MARGIN + IP_FLOOR <= moved <= after - MARGIN + IP_FLOOR
        assert moved < spent + IP_FLOOR - MARGIN
        last = float(f.r.hget(host, "last_start"))
        assert before - MARGIN <= last <= after - MARGIN
        # The next pop of the IP (another process) is spaced from the answer, no sooner.
        kind, wait = f.pop("p2", claim=0)
        assert kind == "wait"
        assert f.now() + float(wait) >= moved + MARGIN - 0.05 - 1e-6  # lead 50 ms
        # Booked behind it since (the IP spent once more): nothing moves any more.
        f.r.set(ip_key, repr(moved + IP_FLOOR))
        f.r.hset(host, "last_start", repr(last + 0.3))
        await b.feedback("a.test", HEALTHY, CONFIG, 5,
                         early=AnswerBound(IP, loop.time() - 0.03, moved - IP_FLOOR + MARGIN,
                                           IP_FLOOR, MARGIN))
        assert float(f.r.get(ip_key)) == moved + IP_FLOOR
        assert float(f.r.hget(host, "last_start")) == last + 0.3
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_a_sooner_answer_moves_the_shared_buckets_back_while_they_are_its_own(
        redis_server: RedisServer) -> None:
    await aio(_moves_back_while_its_own(redis_server))


async def _never_forward(server: RedisServer) -> None:
    """An answer later than the spend (a slow server) moves nothing: later
    starts are the late-start path's, and the answer is only an upper bound."""
    f, b = await _opened(server)
    loop = asyncio.get_running_loop()
    try:
        f.push("a.test", "a1")
        reply = f.pop(slip=0.0)
        spent = float(reply[7])
        ip_key = f"{NS}:ip:{IP}"
        await asyncio.sleep(0.03)  # answered 30 ms after the spend
        await b.feedback("a.test", HEALTHY, CONFIG, 5,
                         early=AnswerBound(IP, loop.time(), spent, IP_FLOOR, MARGIN))
        assert float(f.r.get(ip_key)) == pytest.approx(spent + IP_FLOOR, abs=1e-9)
    finally:
        await b.close()


@pytest_twisted.ensureDeferred
async def test_an_answer_after_the_spend_moves_nothing(redis_server: RedisServer) -> None:
    await aio(_never_forward(redis_server))


class _Late:
    def __init__(self) -> None:
        self.reported: list[float] = []

    def late_arrival(self, dispatch: Dispatch, state: object, arrived: float,
                     now: float) -> None:
        self.reported.append(arrived)


def _slip() -> tuple[SendSlip, HostTable, IPTable, _Late]:
    hosts = HostTable(Config(default=0.5, floor=0.5, ceiling=60.0))
    ips = IPTable(0.25)
    slip = SendSlip(hosts, ips, margin=MARGIN)
    slip.shared = late = _Late()
    return slip, hosts, ips, late


def test_a_booked_send_answered_sooner_than_its_spend_carries_its_answer() -> None:
    """The client's half: with a shared backend, a send that went as the frontier
    booked it and was answered before its booking's spend (at + booked slip)
    keeps its answer for the feedback, and its local buckets move back too (the
    same process books the IP's next start most often: its gate must not hold
    it behind the old spend)."""
    slip, hosts, ips, late = _slip()
    state = hosts.get("b.test")
    sent = Dispatch("b.test", 10.0, "127.0.0.2", booked_slip=0.03, server_spent=5000.04)
    state.last_start = 10.03
    ips.spend("127.0.0.2", 10.03, state.ip_clamped)
    slip.sent(sent, 10.0, state)
    slip.headers_received(sent, 0.002, 10.005)  # answered 5 ms after the booked start
    assert late.reported == []
    spacing = ips.spacing("127.0.0.2", state.ip_interval())
    assert sent.answer == AnswerBound("127.0.0.2", 10.005, 5000.04, spacing, MARGIN)
    assert state.last_start == pytest.approx(10.005 - MARGIN)
    assert ips.eligible_at("127.0.0.2") == pytest.approx(10.005 - MARGIN + spacing)


def test_no_answer_bound_for_a_late_send_nor_for_a_send_not_booked_by_the_frontier() -> None:
    slip, hosts, ips, late = _slip()
    state = hosts.get("b.test")
    late_send = Dispatch("b.test", 10.0, "127.0.0.2", booked_slip=0.01, server_spent=5000.01)
    slip.sent(late_send, 10.0, state)
    slip.headers_received(late_send, 0.002, 10.05)  # read 50 ms late: reported, not bounded
    assert late.reported
    assert late_send.answer is None
    reserved = Dispatch("c.test", 20.0, "127.0.0.3", booked_slip=0.03)  # booked by reserve
    other = hosts.get("c.test")
    ips.spend("127.0.0.3", 20.03, other.ip_clamped)
    held = ips.eligible_at("127.0.0.3")
    slip.sent(reserved, 20.0, other)
    slip.headers_received(reserved, 0.002, 20.005)
    assert reserved.answer is None
    assert ips.eligible_at("127.0.0.3") == held  # the others space from the estimate
