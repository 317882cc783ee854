"""PolitenessAwarePriorityQueue against a real Crawler and the real middleware.

The gate's view is set by writing the middleware's host/IP tables and DNS
cache; time is the queue's ``clock`` replaced by a fake one. No sleeps.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_twisted
from fakeclock import Clock
from scrapy import Request, signals
from scrapy.pqueues import _path_safe
from scrapy.squeues import FifoMemoryQueue, PickleFifoDiskQueue, PickleLifoDiskQueue
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.downloader.send_lateness import Dispatch
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.scheduler import handed_out as handout
from scrapy_politeness.scheduler import queue as pqueue
from scrapy_politeness.scheduler.queue import PolitenessAwarePriorityQueue

INTERVAL = 1.0




@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(pqueue, "clock", c)
    return c


def _crawler(**settings: Any) -> Any:
    return get_crawler(settings_dict={
        "POLITENESS_DEFAULT": INTERVAL, "POLITENESS_FLOOR": INTERVAL,
        "POLITENESS_IP_FLOOR": INTERVAL, "POLITENESS_SEND_MARGIN": 0.0,
        "POLITENESS_DNS_HOSTS_FILE": None, **settings})


@pytest.fixture
def mw() -> PolitenessMiddleware:
    """The real middleware; names not set with ``on_ip`` count as looked up with no
    answer and carried by a proxy (spaced by their host alone), so no query leaves
    the machine (``test_new_name_waits_for_its_lookup`` covers the lookup itself;
    ``test_a_name_that_fails_is_handed_out_at_once``, a name with no proxy)."""
    middleware = PolitenessMiddleware.from_crawler(_crawler())
    real_lookup = middleware.dns.lookup

    def lookup(hostname: str) -> object:
        found = real_lookup(hostname)
        return None if found is DnsCache.MISS else found

    middleware.dns.lookup = lookup  # type: ignore[method-assign]
    middleware.buckets.routes.carries = lambda hostname: True  # type: ignore[method-assign]
    middleware.crawler._test_middlewares = [middleware]  # type: ignore[attr-defined]
    return middleware



class _LookUps:
    """Counts the queue's gate look-ups (``mw.buckets.readiness_for``: ``mw.readiness`` too)."""

    def __init__(self, mw: PolitenessMiddleware, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = mw.buckets.readiness_for

        def counting(key: str, hostname: str) -> Any:
            self.calls += 1
            return real(key, hostname)

        monkeypatch.setattr(mw.buckets, "readiness_for", counting)

def _queue(crawler: Any, cls: Any = FifoMemoryQueue, key: str = "",
           startprios: Any = None) -> PolitenessAwarePriorityQueue:
    """A queue built as the scheduler builds it: once the engine and its middlewares exist."""
    middlewares = [mw for mw in getattr(crawler, "_test_middlewares", ())]
    engine = SimpleNamespace(downloader=SimpleNamespace(
        middleware=SimpleNamespace(middlewares=middlewares), active=set()))
    setattr(crawler, "engine", engine)  # noqa: B010
    try:
        return PolitenessAwarePriorityQueue(crawler, cls, key, startprios)
    finally:
        setattr(crawler, "engine", None)  # noqa: B010


def ready_at(mw: PolitenessMiddleware, host: str, at: float) -> None:
    """Make ``host``'s bucket eligible at ``at``."""
    state = mw.hosts.get(host)
    state.last_start = at - state.interval()


def on_ip(mw: PolitenessMiddleware, host: str, ip: str) -> None:
    mw.dns._cache[host] = (ip, math.inf)


def fake_engine(crawler: Any, active: set[Request] | None) -> None:
    """An engine whose downloader holds ``active`` (None: no engine, as before a crawl)."""
    engine = None if active is None else SimpleNamespace(downloader=SimpleNamespace(active=active))
    setattr(crawler, "engine", engine)  # noqa: B010 (the attribute is typed as always set)


def url(host: str, n: int = 0) -> str:
    return f"http://{host}/{n}"


def reached(mw: PolitenessMiddleware, request: Request) -> None:
    mw.crawler.signals.send_catch_log(signals.request_reached_downloader, request=request,
                                      spider=None)


def take(q: PolitenessAwarePriorityQueue) -> Request | None:
    """The next request, moving the fake clock to when the queue hands it out."""
    if not len(q):
        assert q.pop() is None
        return None
    c = pqueue.clock
    for _ in range(100):
        at = q.next_eligible()  # a lower bound of the soonest instant
        if at > c.now:  # type: ignore[attr-defined]
            c.now = at  # type: ignore[attr-defined]
        r = q.pop()
        if r is not None:
            return r
    raise AssertionError("the queue holds requests but never hands one out")


def drain(q: PolitenessAwarePriorityQueue) -> list[Request]:
    out = []
    while (r := take(q)) is not None:
        out.append(r)
    return out


def pop_hosts(q: PolitenessAwarePriorityQueue, n: int) -> list[str]:
    out = []
    for _ in range(n):
        r = take(q)
        assert r is not None
        out.append(r.url.split("/")[2])
    return out


def test_empty_queue(mw: PolitenessMiddleware, clock: Clock) -> None:
    q = _queue(mw.crawler)
    assert q.pop() is None
    assert len(q) == 0
    q.push(Request(url("a.test")))
    assert len(q) == 1
    assert q.pop() is not None
    assert q.pop() is None
    assert len(q) == 0


def test_soonest_eligible_host_first(mw: PolitenessMiddleware, clock: Clock) -> None:
    ready_at(mw, "late.test", clock.now + 5)
    ready_at(mw, "soon.test", clock.now + 2)
    ready_at(mw, "past.test", clock.now - 3)  # eligible now, as a new host is
    q = _queue(mw.crawler)
    for host in ("late.test", "soon.test", "past.test", "new.test"):
        q.push(Request(url(host)))
    assert pop_hosts(q, 4) == ["past.test", "new.test", "soon.test", "late.test"]


def test_requests_wait_in_the_queue_until_both_buckets_allow(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    """Handed out at most ``_LEAD`` early: the gate's timer then releases it on time."""
    lead = pqueue._LEAD
    ready_at(mw, "a.test", clock.now + 2)
    on_ip(mw, "b.test", "127.0.9.2")
    mw.ips.spend("127.0.9.2", clock.now + 2, INTERVAL)  # IP eligible at now + 3
    q = _queue(mw.crawler)
    q.push(Request(url("a.test")))
    q.push(Request(url("b.test")))
    start = clock.now
    assert q.pop() is None
    assert q.next_eligible() == start + 2
    clock.now = start + 2 - lead - 0.001
    assert q.pop() is None
    clock.now = start + 2 - lead
    assert pop_hosts(q, 1) == ["a.test"]
    clock.now = start + 3 - lead - 0.001
    assert q.pop() is None
    assert q.next_eligible() == start + 3
    clock.now = start + 3 - lead
    assert pop_hosts(q, 1) == ["b.test"]
    assert len(q) == 0


def test_a_host_the_gate_retimes_earlier_comes_forward(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    """Stored estimates are lower bounds; a narrowed interval must not wait for them."""
    q = _queue(mw.crawler)
    q.push(Request(url("a.test", 0)))
    q.push(Request(url("a.test", 1)))
    first = take(q)
    assert first is not None
    start = clock.now
    ready_at(mw, "z.test", start + 3)
    q.push(Request(url("z.test")))
    reached(mw, first)
    mw.hosts.get("a.test").adaptive = 5.0  # backed off while its request was in flight
    mw.hosts.get("a.test").last_start = start
    assert q.pop() is None
    assert q.next_eligible() == start + 3  # z; a is stored at start + 5
    mw.hosts.get("a.test").adaptive = 2.0  # then a healthy answer narrowed it
    mw.driver.retime("a.test")  # what feedback does when it moves a host
    clock.now = start + 2
    second = q.pop()
    assert second is not None
    assert second.url == url("a.test", 1)


def test_busy_ip_pushes_its_hosts_back(mw: PolitenessMiddleware, clock: Clock) -> None:
    on_ip(mw, "vhost.test", "127.0.9.1")
    mw.ips.spend("127.0.9.1", clock.now + 2, INTERVAL)  # IP eligible at now + 3
    ready_at(mw, "other.test", clock.now + 1)
    q = _queue(mw.crawler)
    q.push(Request(url("vhost.test")))
    q.push(Request(url("other.test")))
    assert pop_hosts(q, 2) == ["other.test", "vhost.test"]


def test_uncached_ip_counts_as_eligible_now(mw: PolitenessMiddleware, clock: Clock) -> None:
    """The IP term applies only once DNS has answered: the first request goes out quickly."""
    mw.ips.spend("127.0.9.1", clock.now + 10, INTERVAL)
    ready_at(mw, "waiting.test", clock.now + 1)
    q = _queue(mw.crawler)
    q.push(Request(url("waiting.test")))
    q.push(Request(url("unresolved.test")))  # will resolve to 127.0.9.1, not cached yet
    assert pop_hosts(q, 1) == ["unresolved.test"]


def test_pending_handed_out_requests_push_a_host_back(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    q = _queue(mw.crawler)
    for n in range(3):
        q.push(Request(url("big.test", n)))
    ready_at(mw, "small.test", clock.now + 0.5)
    q.push(Request(url("small.test")))
    # big is eligible now; once one of its requests waits in the gate it is
    # eligible at now + 1, after small (now + 0.5). A queue blind to handed-out
    # requests would give big twice in a row.
    first = take(q)
    assert first is not None
    assert first.url.startswith("http://big.test")
    assert pop_hosts(q, 1) == ["small.test"]
    assert q._handed.by_key == {"big.test": 1, "small.test": 1}
    # The gate releases the first big request: pending drops, the bucket moves.
    reached(mw, first)
    mw.hosts.get("big.test").last_start = clock.now
    assert q._handed.by_key == {"small.test": 1}
    assert pop_hosts(q, 2) == ["big.test", "big.test"]


def test_pending_on_one_ip_spaces_its_vhosts(mw: PolitenessMiddleware, clock: Clock) -> None:
    for host in ("v1.test", "v2.test"):
        on_ip(mw, host, "127.0.9.7")
    ready_at(mw, "solo.test", clock.now + 1.5)
    q = _queue(mw.crawler)
    q.push(Request(url("v1.test")))
    q.push(Request(url("v2.test")))
    q.push(Request(url("solo.test")))
    # v1 goes now; v2 shares its IP, so it is eligible at now + 1 (before solo);
    # then the IP has two requests ahead of a third, solo comes first.
    assert pop_hosts(q, 3) == ["v1.test", "v2.test", "solo.test"]
    assert q._handed.by_ip == {"127.0.9.7": 2}


def test_priorities_and_fifo_within_a_host(mw: PolitenessMiddleware, clock: Clock) -> None:
    q = _queue(mw.crawler)
    for n, prio in enumerate([0, 5, -1, 5, 0]):
        q.push(Request(url("a.test", n), priority=prio))
    got = [r.url.rsplit("/", 1)[1] for r in drain(q)]
    assert got == ["1", "3", "0", "4", "2"]


def test_without_middleware_hosts_take_turns(clock: Clock) -> None:
    crawler = _crawler(POLITENESS_ENABLED=False)
    q = _queue(crawler)
    assert q._mw is None
    for host in ("a.test", "b.test", "c.test"):
        for n in range(2):
            q.push(Request(url(host, n)))
    assert pop_hosts(q, 6) == ["a.test", "b.test", "c.test"] * 2


def test_non_network_requests_are_not_held_back(mw: PolitenessMiddleware, clock: Clock) -> None:
    ready_at(mw, "a.test", clock.now + 5)
    q = _queue(mw.crawler)
    q.push(Request(url("a.test")))
    q.push(Request("data:,hello"))
    first = q.pop()
    assert first is not None
    assert first.url.startswith("data:")
    assert q.pop() is None  # a.test waits in the queue, not in the gate
    assert not q._handed.requests  # the gate ignores it: nothing to count


def test_dropped_requests_do_not_leak_counts(mw: PolitenessMiddleware, clock: Clock) -> None:
    """IgnoreRequest in a middleware fires no signal: the sweep clears it."""
    q = _queue(mw.crawler)
    for n in range(4):
        q.push(Request(url("a.test", n)))
    handed = drain(q)
    assert len(handed) == 4
    assert q._handed.by_key == {"a.test": 4}
    # request_dropped / response_received also clear (request_left_downloader is not
    # listened to: whatever leaves the downloader reached it, and was forgotten then).
    mw.crawler.signals.send_catch_log(signals.request_dropped, request=handed[0], spider=None)
    mw.crawler.signals.send_catch_log(signals.response_received, request=handed[1],
                                      response=None, spider=None)
    assert q._handed.by_key == {"a.test": 2}
    # With an engine, requests the downloader no longer holds are forgotten.
    active = {handed[2]}
    fake_engine(mw.crawler, active)
    try:
        q.push(Request(url("b.test")))
        clock.now += 1
        b = q.pop()
        assert b is not None
        active.add(b)  # as the engine does right after the scheduler hands it out
        assert q._handed.by_key == {"a.test": 1, "b.test": 1}
        # Once every queue is empty the engine asks after each download that ends:
        # each ask sweeps, so a finished crawl leaves nothing for close() to rescue.
        assert q.pop() is None
        assert q._handed.by_key == {"a.test": 1, "b.test": 1}  # still in the downloader
        fake_engine(mw.crawler, set())
        assert q.pop() is None
        assert q._handed.by_key == {}
    finally:
        fake_engine(mw.crawler, None)
    # Without one (unit tests, a custom scheduler), old entries age out.
    q.push(Request(url("c.test")))
    clock.now += handout.MAX_AGE + 1
    q.pop()
    assert q._handed.by_key == {"c.test": 1}


def test_random_push_pop_loses_and_duplicates_nothing(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    for seed in range(5):
        rng = random.Random(seed)
        q = _queue(mw.crawler)
        hosts = [f"h{i}.test" for i in range(rng.randint(1, 40))]
        for i, host in enumerate(hosts[: len(hosts) // 2]):
            on_ip(mw, host, f"10.1.0.{i % 4}")
        pushed: Counter[str] = Counter()
        popped: Counter[str] = Counter()
        outstanding: list[Request] = []
        r: Request | None
        serial = 0
        for _ in range(2000):
            op = rng.random()
            if op < 0.5:
                r = Request(url(rng.choice(hosts), serial), priority=rng.randint(-2, 2))
                serial += 1
                q.push(r)
                pushed[r.url] += 1
            elif op < 0.9:
                r = q.pop()
                if r is None:
                    assert len(q) == 0 or q.next_eligible() > clock.now
                else:
                    popped[r.url] += 1
                    outstanding.append(r)
            elif outstanding:
                r = outstanding.pop(rng.randrange(len(outstanding)))
                reached(mw, r)
                mw.hosts.get(r.url.split("/")[2]).last_start = clock.now
            clock.now += rng.random() * 0.3
            assert len(q) == sum(pushed.values()) - sum(popped.values())
        for r in drain(q):
            popped[r.url] += 1
        assert popped == pushed
        assert max(popped.values()) == 1
        assert len(q) == 0


def test_many_hosts_cost_few_gate_lookups_per_pop(
        mw: PolitenessMiddleware, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """No scan over hosts: gate look-ups per pop stay bounded with 5 000 hosts."""
    q = _queue(mw.crawler)
    n = 5_000
    for i in range(n):
        q.push(Request(url(f"h{i}.test")))
        q.push(Request(url(f"h{i}.test", 1)))
    look_ups = _LookUps(mw, monkeypatch)
    for _ in range(2 * n):
        assert take(q) is not None
        clock.now += 0.001
    assert q.pop() is None
    calls = look_ups.calls
    print(f"gate look-ups per take (pop + next-eligible checks): {calls / (2 * n):.2f}")
    # one to settle the top, one when the host is entered: the settled view is reused
    assert calls <= 2 * n * 2, calls / (2 * n)


def test_jobdir_round_trip(mw: PolitenessMiddleware, clock: Clock, tmp_path: Path) -> None:
    key = str(tmp_path / "requests.queue")
    q = _queue(mw.crawler, PickleLifoDiskQueue, key)
    urls = set()
    for i in range(60):
        u = url(f"h{i % 7}.test:80{i % 2}" if i % 5 else "we!rd_host.test", i)
        urls.add(u)
        q.push(Request(u, priority=i % 3))
    assert len(q) == 60
    state = json.loads(json.dumps(q.close()))  # as the scheduler writes active.json
    assert state == {" store": [60]}  # every host's requests in the one store
    assert [p.name for p in (tmp_path / "requests.queue").iterdir()] == ["queue.sqlite3"]
    again = _queue(mw.crawler, PickleLifoDiskQueue, key, state)
    assert len(again) == 60
    got = [popped.url for popped in drain(again)]
    assert sorted(got) == sorted(urls)
    assert again.close() == {}
    assert [p.name for p in (tmp_path / "requests.queue").iterdir()] == ["queue.sqlite3"]


def test_a_jobdir_saved_with_a_directory_per_host_moves_into_the_store(
        mw: PolitenessMiddleware, clock: Clock, tmp_path: Path) -> None:
    """A JOBDIR saved by the per-host layout resumes: its requests move into the
    store, in their order, and the host directories are removed."""
    from scrapy.pqueues import ScrapyPriorityQueue

    key = str(tmp_path / "requests.queue")
    state = {}
    for host in ("a.test", "b.test"):
        old = ScrapyPriorityQueue(mw.crawler, PickleLifoDiskQueue, key + "/" + _path_safe(host))
        for n in range(4):
            old.push(Request(url(host, n), priority=n % 2))
        state[host] = old.close()
    again = _queue(mw.crawler, PickleLifoDiskQueue, key, json.loads(json.dumps(state)))
    assert len(again) == 8
    assert {p.name for p in (tmp_path / "requests.queue").iterdir()} <= {
        "queue.sqlite3", "queue.sqlite3-wal", "queue.sqlite3-shm"}  # open: its log too
    by_host: dict[str, list[str]] = {}
    for request in drain(again):
        by_host.setdefault(request.url.split("/")[2], []).append(request.url)
    assert by_host == {h: [url(h, 3), url(h, 1), url(h, 2), url(h, 0)]
                       for h in ("a.test", "b.test")}


def test_close_takes_back_requests_the_gate_dropped(
        mw: PolitenessMiddleware, clock: Clock, tmp_path: Path) -> None:
    """Requests handed out that never reached the downloader go back to disk on close."""
    key = str(tmp_path / "q")
    q = _queue(mw.crawler, PickleFifoDiskQueue, key)
    for n in range(5):
        q.push(Request(url("a.test", n)))
    first, second = take(q), take(q)
    assert first is not None
    assert second is not None
    reached(mw, first)  # downloaded: must not come back
    fake_engine(mw.crawler, set())
    try:
        state = q.close()
    finally:
        fake_engine(mw.crawler, None)
    again = _queue(mw.crawler, PickleFifoDiskQueue, key, state)
    got = {r.url for r in drain(again)}
    assert got == {url("a.test", n) for n in range(1, 5)}
    assert mw.crawler.stats.get_value("politeness/scheduler/rescued") == 1


def test_state_of_another_queue_class_is_refused(mw: PolitenessMiddleware) -> None:
    with pytest.raises(ValueError, match="another SCHEDULER_PRIORITY_QUEUE"):
        _queue(mw.crawler, PickleLifoDiskQueue, "/nonexistent", [0, 1])


def test_close_counts_and_logs_requests_it_cannot_serialise(
        mw: PolitenessMiddleware, clock: Clock, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """A handed-out request from the memory queue that pickle refuses is lost, but not silently."""
    memory = _queue(mw.crawler)
    disk = _queue(mw.crawler, PickleFifoDiskQueue, str(tmp_path / "q"))
    memory.push(Request(url("a.test"), callback=lambda response: None))  # no pickle for this
    assert take(memory) is not None
    fake_engine(mw.crawler, set())
    try:
        disk.close()
    finally:
        fake_engine(mw.crawler, None)
    assert mw.crawler.stats.get_value("politeness/scheduler/lost_unserializable") == 1
    assert mw.crawler.stats.get_value("politeness/scheduler/rescued") is None
    assert "cannot be serialised" in caplog.text


@pytest_twisted.ensureDeferred
async def test_new_name_waits_for_its_lookup(
        mw: PolitenessMiddleware, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new name is resolved when enqueued; its request is held until the answer
    is in, so the IP bucket applies to the very first request; the engine is woken."""
    await Deferred.fromFuture(asyncio.ensure_future(_new_name_waits(mw, clock, monkeypatch)))


async def _new_name_waits(mw: PolitenessMiddleware, clock: Clock,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    asked: list[str] = []

    async def ask(hostname: str) -> tuple[tuple[str, ...] | None, float, None]:  # the query
        asked.append(hostname)
        ip = await answer
        return (None if ip is None else (ip,)), math.inf, None

    monkeypatch.setattr(mw.dns, "lookup", DnsCache.lookup.__get__(mw.dns))  # real misses
    monkeypatch.setattr(mw.dns, "_ask", ask)
    mw.ips.spend("127.0.9.9", clock.now + 1, INTERVAL)  # the IP is busy until now + 2
    wakes: list[float] = []
    nextcall = SimpleNamespace(schedule=lambda: wakes.append(clock.now))
    q = _queue(mw.crawler)
    setattr(mw.crawler, "engine", SimpleNamespace(  # noqa: B010
        _slot=SimpleNamespace(nextcall=nextcall), downloader=SimpleNamespace(active=set())))
    try:
        q.push(Request(url("fresh.test")))
        await asyncio.sleep(0)
        assert asked == ["fresh.test"]
        assert q.pop() is None  # still resolving: not handed out blind
        assert len(q) == 1
        answer.set_result("127.0.9.9")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert wakes  # the engine is asked to pull once the answer is in
        assert q.pop() is None  # the IP bucket applies to the first request
        assert q.next_eligible() == clock.now + 2
        clock.now += 2
        assert pop_hosts(q, 1) == ["fresh.test"]
    finally:
        fake_engine(mw.crawler, None)


@pytest_twisted.ensureDeferred
async def test_a_new_name_costs_the_queue_no_task_of_its_own(
        mw: PolitenessMiddleware, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue waits for a new name's lookup with a callback on the DNS cache's
    own single-flight task: one task per new name (it made a second one, around
    ``resolve``, for every new host). An IP literal needs no lookup at all."""
    await Deferred.fromFuture(asyncio.ensure_future(_new_names_tasks(mw, monkeypatch)))


async def _new_names_tasks(mw: PolitenessMiddleware, monkeypatch: pytest.MonkeyPatch) -> None:
    async def ask(hostname: str) -> tuple[tuple[str, ...], float, None]:
        return ("127.0.9.9",), math.inf, None

    monkeypatch.setattr(mw.dns, "lookup", DnsCache.lookup.__get__(mw.dns))  # real misses
    monkeypatch.setattr(mw.dns, "_ask", ask)
    loop = asyncio.get_running_loop()
    made: list[object] = []
    factory = loop.get_task_factory()

    def counting(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
        made.append(coro)
        return asyncio.Task(coro, loop=loop)

    q = _queue(mw.crawler)
    loop.set_task_factory(counting)  # type: ignore[arg-type]
    try:
        for i in range(5):
            q.push(Request(url(f"new{i}.test")))
        q.push(Request(url("127.0.9.8")))
        for _ in range(3):
            await asyncio.sleep(0)
    finally:
        loop.set_task_factory(factory)
    assert len(made) == 5
    assert all(mw.dns.lookup(f"new{i}.test") == "127.0.9.9" for i in range(5))
    assert len(q) == 6


def test_a_late_wake_up_moves_the_sends_a_stall_held(mw: PolitenessMiddleware,
                                                     clock: Clock) -> None:
    """In queue mode requests rarely wait for a gate timer: the queue's own late
    wake-up is what reveals a loop stall, and the sends it held move to its end."""
    from scrapy_politeness.downloader.send_lateness import Dispatch

    q = _queue(mw.crawler)
    on_ip(mw, "a.test", "127.0.9.3")
    mw.hosts.get("a.test").last_start = clock.now
    mw.ips.spend("127.0.9.3", clock.now, INTERVAL)
    mw.slip.sent(Dispatch("a.test", clock.now, "127.0.9.3"), clock.now, mw.hosts.get("a.test"))
    q._waker.at = clock.now + 0.01  # the wake-up was due 10 ms later ...
    clock.now += 0.09  # ... and ran 80 ms late: the loop stood still
    q._waker.fire()
    assert mw.ips.eligible_at("127.0.9.3") >= clock.now + INTERVAL
    assert mw.hosts.get("a.test").eligible_at() >= clock.now + INTERVAL


def test_only_a_response_that_moves_a_host_retimes_it(mw: PolitenessMiddleware,
                                                      clock: Clock) -> None:
    """Re-timing costs a gate look-up and a heap entry in the queue: a response that
    left the host's interval and not-before as they were re-times nothing."""
    retimed: list[str] = []
    mw.add_listener(retimed.append)
    mw.loop = SimpleNamespace(time=lambda: clock.now)  # type: ignore[assignment]
    mw.hosts.get("a.test")  # at its floor: a healthy answer keeps its interval
    sent = Dispatch("a.test", clock.now)
    mw.outcomes.feed(sent, 200, None, 0.01, clock.now)
    assert retimed == []
    mw.outcomes.feed(sent, 503, None, 0.01, clock.now)  # backs off
    assert retimed == ["a.test"]
    state = mw.hosts.get("a.test")
    state.adaptive = state.config.ceiling  # nowhere further to back off to ...
    mw.outcomes.feed(sent, 200, 30.0, 0.01, clock.now)  # ... but a Retry-After moves its not-before
    assert retimed == ["a.test", "a.test"]


def test_a_host_that_empties_keeps_its_queue_for_a_while(
        mw: PolitenessMiddleware, clock: Clock, tmp_path: Path) -> None:
    """At high rates a host's queue empties and refills on every request: it is
    kept (not rebuilt) for ``IDLE_KEEP`` seconds, then closed and its directory
    reclaimed (a disk queue class other than Scrapy's pickle ones: a directory
    per host)."""
    from scrapy.squeues import MarshalFifoDiskQueue

    from scrapy_politeness.scheduler import host_heap as hostheap

    key = str(tmp_path / "q")
    q = _queue(mw.crawler, MarshalFifoDiskQueue, key)
    built: list[str] = []
    real_factory = q._queues.make

    def counting_factory(host_key: str, startprios: Any = ()) -> Any:
        built.append(host_key)
        return real_factory(host_key, startprios)

    q._queues.make = counting_factory  # type: ignore[method-assign]
    for n in range(3):
        q.push(Request(url("a.test", n)))
        assert take(q) is not None
        assert "a.test" not in q  # empty, though kept
    assert built == ["a.test"]
    assert (tmp_path / "q" / _path_safe("a.test")).is_dir()
    clock.now += hostheap.IDLE_KEEP + 1
    assert q.pop() is None
    assert not (tmp_path / "q" / _path_safe("a.test")).exists()
    q.push(Request(url("a.test", 9)))
    assert built == ["a.test", "a.test"]
    assert [r.url for r in drain(q)] == [url("a.test", 9)]
    assert q.close() == {}
    assert not any((tmp_path / "q").iterdir())


def test_no_more_than_idle_max_hosts_are_kept(mw: PolitenessMiddleware, clock: Clock,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``IDLE_MAX`` emptied hosts, the oldest are closed even while fresh."""
    from scrapy_politeness.scheduler import host_heap as hostheap

    monkeypatch.setattr(hostheap, "IDLE_MAX", 2)
    q = _queue(mw.crawler)
    hosts = [f"h{n}.test" for n in range(4)]
    for host in hosts:  # each empties in turn: four idle, oldest first
        q.push(Request(url(host)))
        assert take(q) is not None
    assert q.pop() is None  # nothing pending; the idle hosts are trimmed on the way
    assert list(q._index.idle) == hosts[-2:]
    assert set(q._index.hosts) == set(hosts[-2:])


def test_memory_hosts_keep_their_requests_on_deques_disk_hosts_in_the_store(
        mw: PolitenessMiddleware, clock: Clock, tmp_path: Path) -> None:
    """Scrapy's memory queues: a MemoryHostQueue per host (no factory call and
    about eight objects fewer per host that fills); Scrapy's pickle disk queues
    (JOBDIR): a count per host, the requests in the one store."""
    from scrapy_politeness.jobdir.request_store import StoredHost
    from scrapy_politeness.scheduler.host_queue import MemoryHostQueue

    memory = _queue(mw.crawler)
    disk = _queue(mw.crawler, PickleFifoDiskQueue, str(tmp_path / "q"))
    for q in (memory, disk):
        q.push(Request(url("a.test", 1), priority=1))
        q.push(Request(url("a.test", 2), priority=5))
    assert isinstance(memory._index.hosts["a.test"].queue, MemoryHostQueue)
    assert isinstance(disk._index.hosts["a.test"].queue, StoredHost)
    assert [r.url for r in drain(memory)] == [url("a.test", 2), url("a.test", 1)]
    assert [r.url for r in drain(disk)] == [url("a.test", 2), url("a.test", 1)]
    memory.close()
    disk.close()


def test_hosts_behind_a_busy_ip_cost_no_gate_lookups_each(
        mw: PolitenessMiddleware, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """20 IPs x 50 hosts: every start on an IP leaves its 49 other hosts' heap
    entries behind. The IP's state read once in a settle moves them, instead
    of one gate look-up each (up to MAX_REEVAL per pop)."""
    q = _queue(mw.crawler)
    hosts = [(f"h{i}.test", f"127.0.8.{i % 20}") for i in range(1000)]
    for host, ip in hosts:
        on_ip(mw, host, ip)
        q.push(Request(url(host)))
    look_ups = _LookUps(mw, monkeypatch)
    starts: dict[str, list[float]] = {}
    for _ in range(len(hosts)):
        r = take(q)
        assert r is not None
        host = r.url.split("/")[2]
        ip = mw.dns._cache[host][0]
        assert ip is not None
        reached(mw, r)  # the gate releases it at once: the IP is spent now
        mw.ips.spend(ip, clock.now, INTERVAL)
        mw.hosts.get(host).last_start = clock.now
        starts.setdefault(ip, []).append(clock.now)
    assert q.pop() is None
    assert all(b - a >= INTERVAL - 1e-9 for s in starts.values() for a, b in itertools.pairwise(s))
    calls = look_ups.calls
    print(f"gate look-ups per take (pop + next-eligible checks): {calls / len(hosts):.2f}")
    assert calls <= 10 * len(hosts), calls / len(hosts)  # 28 per take before


def test_hosts_sharing_an_ip_take_turns(mw: PolitenessMiddleware, clock: Clock) -> None:
    """Three hosts on one IP whose spacing equals theirs: whenever the IP is free all
    three are due at once, and each must get its turn. (Moving the others to the IP's
    bound gave them a later place in ties: the first host took every start.)"""
    q = _queue(mw.crawler)
    for host in ("a.test", "b.test", "c.test"):
        on_ip(mw, host, "127.0.9.3")
        for n in range(10):
            q.push(Request(url(host, n)))
    served: Counter[str] = Counter()
    for _ in range(12):
        r = take(q)
        assert r is not None
        host = r.url.split("/")[2]
        reached(mw, r)
        mw.ips.spend("127.0.9.3", clock.now, INTERVAL)
        mw.hosts.get(host).last_start = clock.now
        served[host] += 1
    assert served == {"a.test": 4, "b.test": 4, "c.test": 4}


def test_a_name_that_fails_is_handed_out_at_once(mw: PolitenessMiddleware, clock: Clock) -> None:
    """A name known not to resolve (and no proxy to carry it) fails in the
    middleware at once: the queue hands all its requests out now, not one per
    host interval (they held a crawl open for their host's pace)."""
    mw.buckets.routes.carries = lambda hostname: hostname == "internal.test"  # type: ignore[method-assign]
    q = _queue(mw.crawler)
    for n in range(5):
        q.push(Request(url("nx.test", n)))
    for n in range(2):
        q.push(Request(url("internal.test", n)))
    start = clock.now
    for _ in range(5 + 1):  # every failing one, and the proxied name's first
        assert q.pop() is not None
    assert clock.now == start
    assert q.pop() is None  # the proxied name's second waits for its host's interval
    assert take(q) is not None
    assert clock.now == pytest.approx(start + INTERVAL)


def test_a_dead_hosts_requests_are_handed_out_at_once(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    """With the default ceiling too: the middleware drops them, so they must not
    wait for the dead host's interval (at the ceiling) in the queue."""
    crawler = _crawler()
    mw = PolitenessMiddleware.from_crawler(crawler)
    crawler._test_middlewares = [mw]  # type: ignore[attr-defined]
    on_ip(mw, "dead.test", "127.0.9.1")
    state = mw.hosts.get("dead.test")
    state.adaptive = mw.settings.config.ceiling  # the default 60 s
    ready_at(mw, "dead.test", clock.now + 60)
    q = _queue(crawler)
    for n in range(4):
        q.push(Request(url("dead.test", n)))
    assert q.pop() is None  # alive: it waits for its interval
    state.dead = True
    mw.driver.retime("dead.test")
    for _ in range(4):
        assert q.pop() is not None
    assert q.pop() is None


def test_a_parked_hosts_requests_are_handed_out_at_once(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    """A host parked (a Retry-After above the limit) has its requests dropped by
    the middleware: the queue hands them out now, not one per interval."""
    mw.buckets.now = clock  # type: ignore[method-assign]
    on_ip(mw, "parked.test", "127.0.9.1")
    q = _queue(mw.crawler)
    for n in range(4):
        q.push(Request(url("parked.test", n)))
    assert take(q) is not None
    start = clock.now
    assert q.pop() is None  # its next waits for the interval
    mw.dropped.park("parked.test", clock.now, clock.now + 3600, "parked for the test")
    for _ in range(3):
        assert q.pop() is not None
    assert clock.now == start


def test_gate_look_ups_per_take_do_not_grow_with_the_hosts_seen(
        mw: PolitenessMiddleware, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long crawl's cost per request stays flat: 200 new hosts cost as many gate
    look-ups per request after 10,000 hosts were seen and done as at the start."""
    q = _queue(mw.crawler)
    look_ups = _LookUps(mw, monkeypatch)

    def look_ups_per_take(prefix: str, n: int) -> float:
        for i in range(n):
            q.push(Request(url(f"{prefix}{i}.test")))
            q.push(Request(url(f"{prefix}{i}.test", 1)))
        look_ups.calls = 0
        for _ in range(2 * n):
            assert take(q) is not None
            clock.now += 0.001
        clock.now += 10.0  # every host done and idle long enough to be forgotten
        assert q.pop() is None
        return look_ups.calls / (2 * n)

    first = look_ups_per_take("a", 200)
    for k in range(10):
        look_ups_per_take(f"b{k}x", 1000)
    assert mw.hosts.get("a0.test") is not None  # the host table still knows them
    later = look_ups_per_take("c", 200)
    print(f"gate look-ups per take: {first:.2f} first, {later:.2f} after 10,200 hosts")
    assert later <= first * 1.1 + 0.05, (first, later)



class _Prefetch:
    """The robots.txt prefetch as the queue sees it: no host waits for robots.txt; the
    asks the queue could not answer are counted."""

    def __init__(self) -> None:
        self.asks = 0

    def pace(self, on_done: Any) -> None:
        pass

    def hold(self, host: Any, *, serving: bool = False) -> bool:
        return False

    def starved(self) -> None:
        self.asks += 1


def test_an_ask_with_nothing_ready_is_the_robots_prefetchs_capacity_signal(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    prefetch = _Prefetch()
    mw.robots_prefetch = prefetch  # type: ignore[assignment]
    q = _queue(mw.crawler)
    assert q.pop() is None  # empty: the downloader has room, nothing to give it
    assert prefetch.asks == 1
    on_ip(mw, "a.test", "10.0.0.1")
    ready_at(mw, "a.test", clock.now)
    q.push(Request(url("a.test", 0)))
    q.push(Request(url("a.test", 1)))
    assert q.pop() is not None  # answered: no signal
    assert prefetch.asks == 1
    assert q.pop() is None  # its second page waits for the host's interval
    assert prefetch.asks == 2
