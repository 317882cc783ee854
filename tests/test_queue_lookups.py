"""The scheduler queue's DNS lookups: bounded, in the order the hosts are needed.

Real queue, real middleware and DNS cache; only the query itself (``_ask``) is
replaced, so each lookup ends when the test answers it. No sleeps.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
import pytest_twisted
from fakeclock import Clock
from scrapy import Request
from test_pqueue import _crawler, _queue, fake_engine, pop_hosts, url
from twisted.internet.defer import Deferred

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.scheduler import queue as pqueue


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(pqueue, "clock", c)
    return c


def _mw(**settings: Any) -> PolitenessMiddleware:
    middleware = PolitenessMiddleware.from_crawler(_crawler(**settings))
    middleware.crawler._test_middlewares = [middleware]  # type: ignore[attr-defined]
    return middleware


class Resolver:
    """Stands in for the query: records the names asked, answers when told."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.answers: dict[str, asyncio.Future[str | None]] = {}
        self.flying = 0
        self.most = 0

    async def ask(self, hostname: str) -> tuple[tuple[str, ...] | None, float, Any]:
        self.asked.append(hostname)
        self.flying += 1
        self.most = max(self.most, self.flying)
        future = self.answers[hostname] = asyncio.get_running_loop().create_future()
        try:
            ip = await future
            return (None if ip is None else (ip,)), math.inf, None
        finally:
            self.flying -= 1

    def answer(self, hostname: str, ip: str | None = "127.0.9.9") -> None:
        self.answers[hostname].set_result(ip)


async def _turns() -> None:
    for _ in range(4):
        await asyncio.sleep(0)


def _run(coro: Any) -> Deferred[Any]:
    return Deferred.fromFuture(asyncio.ensure_future(coro))


@pytest_twisted.ensureDeferred
async def test_lookups_of_new_names_are_bounded_and_in_arrival_order(clock: Clock) -> None:
    """A start list of 40 new names: at most POLITENESS_DNS_CONCURRENCY lookups run
    at once (one task each: the others wait as heap entries), asked in the order
    the names were pushed; each answer starts the next."""
    await _run(_bounded(clock))


async def _bounded(clock: Clock) -> None:
    mw = _mw(POLITENESS_DNS_CONCURRENCY=4)
    resolver = Resolver()
    mw.dns._ask = resolver.ask  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    tasks: list[object] = []
    factory = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
        tasks.append(coro)
        return asyncio.Task(coro, loop=loop)

    q = _queue(mw.crawler)
    names = [f"n{i:02d}.test" for i in range(40)]
    loop.set_task_factory(counting)  # type: ignore[arg-type]
    try:
        for name in names:
            q.push(Request(url(name)))
        await _turns()
        assert resolver.asked == names[:4]
        assert len(tasks) == 4
        for name in names:
            resolver.answer(name)
            await _turns()
    finally:
        loop.set_task_factory(factory)
    assert resolver.asked == names
    assert resolver.most == 4
    assert len(q) == 40
    assert sorted(pop_hosts(q, 40)) == names


@pytest_twisted.ensureDeferred
async def test_a_higher_priority_host_is_looked_up_first(clock: Clock) -> None:
    """Hosts waiting for a lookup go in the order their requests will: a request
    of higher priority pushed last is looked up next, before earlier arrivals."""
    await _run(_by_priority(clock))


async def _by_priority(clock: Clock) -> None:
    mw = _mw(POLITENESS_DNS_CONCURRENCY=1)
    resolver = Resolver()
    mw.dns._ask = resolver.ask  # type: ignore[method-assign]
    q = _queue(mw.crawler)
    for name in ("a.test", "b.test", "c.test"):
        q.push(Request(url(name)))
    q.push(Request(url("urgent.test"), priority=10))
    await _turns()
    for name in ("a.test", "urgent.test", "b.test", "c.test"):
        assert resolver.asked[-1] == name
        resolver.answer(name)
        await _turns()
    fake_engine(mw.crawler, None)


@pytest_twisted.ensureDeferred
async def test_a_name_cached_meanwhile_needs_no_query(clock: Clock) -> None:
    """A waiting name that another request resolved meanwhile is not asked again."""
    await _run(_cached_meanwhile(clock))


async def _cached_meanwhile(clock: Clock) -> None:
    mw = _mw(POLITENESS_DNS_CONCURRENCY=1)
    resolver = Resolver()
    mw.dns._ask = resolver.ask  # type: ignore[method-assign]
    q = _queue(mw.crawler)
    q.push(Request(url("a.test")))
    q.push(Request(url("b.test")))
    await _turns()
    mw.dns._cache["b.test"] = ("127.0.9.8", math.inf)
    resolver.answer("a.test")
    await _turns()
    assert resolver.asked == ["a.test"]
    assert sorted(pop_hosts(q, 2)) == ["a.test", "b.test"]


def test_dns_concurrency_setting_is_checked() -> None:
    with pytest.raises(ValueError, match=r"POLITENESS_DNS_CONCURRENCY.*0"):
        _mw(POLITENESS_DNS_CONCURRENCY=0)


@pytest_twisted.ensureDeferred
async def test_a_retry_of_a_transient_failure_waits_for_its_lookup_in_the_queue(
        clock: Clock) -> None:
    """A retried request of a name whose failure was transient is looked up again
    by the queue, in the background, and waits there; handed out only once the
    answer is in (it used to be handed out at once and wait for DNS in the
    middleware, holding a download slot)."""
    await _run(_retry_waits(clock))


async def _retry_waits(clock: Clock) -> None:
    from scrapy_politeness.policy import FailureKind

    mw = _mw()
    resolver = Resolver()
    mw.dns._ask = resolver.ask  # type: ignore[method-assign]
    mw.dns._cache["flaky.test"] = (None, math.inf)
    mw.dns._failed["flaky.test"] = FailureKind.DNS_TIMEOUT
    q = _queue(mw.crawler)
    q.push(Request(url("flaky.test"), meta={"retry_times": 1}))
    await _turns()
    assert resolver.asked == ["flaky.test"]
    assert q.pop() is None
    assert len(q) == 1
    resolver.answer("flaky.test")
    await _turns()
    request = q.pop()
    assert request is not None
    assert request in mw.buckets.from_queue  # the middleware will not wait for DNS for it


@pytest_twisted.ensureDeferred
async def test_a_host_whose_answer_expired_in_the_queue_is_looked_up_there(
        clock: Clock) -> None:
    """A host whose answer ran out while it waited is looked up again before its
    request is handed out: the middleware would hold a slot for the lookup."""
    await _run(_expired(clock))


async def _expired(clock: Clock) -> None:
    mw = _mw()
    resolver = Resolver()
    mw.dns._ask = resolver.ask  # type: ignore[method-assign]
    mw.dns._cache["old.test"] = ("127.0.9.7", math.inf)
    q = _queue(mw.crawler)
    q.push(Request(url("old.test")))
    mw.dns._cache["old.test"] = ("127.0.9.7", 0.0)  # its TTL ran out
    assert q.pop() is None
    await _turns()
    assert resolver.asked == ["old.test"]
    resolver.answer("old.test", "127.0.9.6")
    await _turns()
    assert pop_hosts(q, 1) == ["old.test"]


@pytest_twisted.ensureDeferred
async def test_the_middleware_never_waits_for_dns_for_a_queued_request(
        clock: Clock) -> None:
    """For a request the queue handed out, a cached transient failure fails at
    once even on a retry, and an answer that expired on the way is used as is;
    a request that bypassed the queue still asks again."""
    await _run(_no_wait(clock))


async def _no_wait(clock: Clock) -> None:
    from scrapy_politeness.downloader.failure_kinds import NameNotResolvedError
    from scrapy_politeness.policy import FailureKind

    mw = _mw()
    resolver = Resolver()
    mw.dns._ask = resolver.ask  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    mw.dns._cache["flaky.test"] = (None, math.inf)
    mw.dns._failed["flaky.test"] = FailureKind.DNS_TIMEOUT
    mw.dns._cache["old.test"] = ("127.0.9.7", 0.0)

    def check(key: str, now: float) -> None:
        return None

    with pytest.raises(NameNotResolvedError):
        await mw.buckets.address("flaky.test", "flaky.test", loop, check, ask_again=True,
                                 queued=True)
    assert await mw.buckets.address("old.test", "old.test", loop, check,
                                    queued=True) == "127.0.9.7"
    assert resolver.asked == []
    asking = asyncio.ensure_future(mw.buckets.address("flaky.test", "flaky.test", loop, check,
                                                      ask_again=True))
    await _turns()
    assert resolver.asked == ["flaky.test"]
    resolver.answer("flaky.test", "127.0.9.5")
    assert await asking == "127.0.9.5"


@pytest_twisted.ensureDeferred
async def test_a_host_restored_from_jobdir_learns_its_name_before_it_is_served(
        clock: Clock, tmp_path: Any) -> None:
    """A resumed JOBDIR knows its hosts by key only: before a restored host is
    served its name is read from its next request and looked up in the queue,
    and its IP bucket applies (it was handed out blind, to wait in the gate
    holding a download slot)."""
    await _run(_restored(clock, tmp_path))


async def _restored(clock: Clock, tmp_path: Any) -> None:
    from scrapy.squeues import PickleFifoDiskQueue

    mw = _mw()
    resolver = Resolver()
    mw.dns._ask = resolver.ask  # type: ignore[method-assign]
    key = str(tmp_path / "requests.queue")
    mw.dns._cache["back.test"] = ("127.0.9.4", math.inf)
    first = _queue(mw.crawler, PickleFifoDiskQueue, key)
    first.push(Request(url("back.test")))
    state = first.close()
    del mw.dns._cache["back.test"]  # a new run: nothing cached
    mw.ips.spend("127.0.9.4", clock.now + 1, 1.0)  # its IP is busy until now + 2
    again = _queue(mw.crawler, PickleFifoDiskQueue, key, state)
    assert again.pop() is None
    await _turns()
    assert resolver.asked == ["back.test"]
    assert again.pop() is None
    resolver.answer("back.test", "127.0.9.4")
    await _turns()
    assert again.pop() is None  # the IP bucket applies
    assert again.next_eligible() == clock.now + 2
    assert pop_hosts(again, 1) == ["back.test"]
    again.close()


@pytest_twisted.ensureDeferred
async def test_one_pop_sends_a_bounded_number_of_restored_hosts_to_their_lookup(
        clock: Clock, tmp_path: Any) -> None:
    """A resumed JOBDIR of many hosts: one pop reads the names of at most
    HOLD_PER_POP hosts (it read every restored host's next request in one go,
    holding the event loop for seconds at 20,000 hosts)."""
    await _run(_bounded_restore(clock, tmp_path))


async def _bounded_restore(clock: Clock, tmp_path: Any) -> None:
    from scrapy.squeues import PickleFifoDiskQueue

    from scrapy_politeness.scheduler.lookups import HOLD_PER_POP

    mw = _mw()
    resolver = Resolver()
    mw.dns._ask = resolver.ask  # type: ignore[method-assign]
    key = str(tmp_path / "requests.queue")
    first = _queue(mw.crawler, PickleFifoDiskQueue, key)
    for i in range(100):
        mw.dns._cache[f"r{i}.test"] = ("127.0.9.4", math.inf)
        first.push(Request(url(f"r{i}.test")))
    state = first.close()
    mw.dns._cache.clear()
    again = _queue(mw.crawler, PickleFifoDiskQueue, key, state)
    assert again.pop() is None
    named = [h for h in again._index.hosts.values() if h.hostname is not None]
    assert len(named) == HOLD_PER_POP
    again.close()
