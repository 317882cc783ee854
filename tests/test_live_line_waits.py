"""Where requests wait, who holds the crawl's end: the live line's and the report's figures.

Unit tests on a fake clock: the holder rule and its wording (``observe/holding``),
the scheduler queue's waits (``scheduler/waits``: each request's wait added up,
with no time kept per request), and the observer reading both.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fakeclock import Clock
from scrapy import Request
from test_pqueue import _crawler, _queue, on_ip, reached, ready_at, take

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.observe.holding import duration, holders, holders_text
from scrapy_politeness.policy import Config, HostTable
from scrapy_politeness.scheduler import queue as pqueue

NOW = 1000.0


def _table() -> HostTable:
    return HostTable(Config(default=1.0, floor=0.25, ceiling=30.0))


def _at_ceiling(table: HostTable, key: str, now: float = NOW) -> None:
    """``key`` answered 503s up to its 30 s ceiling and just started a fetch."""
    state = table.get(key)
    state.adaptive, state.last_start = 30.0, now


@pytest.mark.parametrize(("seconds", "said"), [
    (0.0, "0.0s"), (0.04, "0.0s"), (31.24, "31.2s"), (59.9, "59.9s"), (59.96, "1m00s"),
    (270.0, "4m30s"), (3599.4, "59m59s"), (3725.0, "1h02m"), (-1.0, "0.0s")])
def test_durations_read_as_people_write_them(seconds: float, said: str) -> None:
    assert duration(seconds) == said


def test_one_host_at_its_ceiling_holds_the_end() -> None:
    table = _table()
    _at_ceiling(table, "slow.test")
    waiting = {"slow.test": 9} | {f"h{n}.test": 2 for n in range(50)}  # 100 others at 20/s: 5 s
    found = holders(waiting, table, NOW, rate=20.0, min_tail=10.0)
    assert [(h.key, h.interval, h.left, h.tail, h.state) for h in found] == [
        ("slow.test", 30.0, 9, 270.0, "ceiling")]  # its next turn in 30 s, then 8 more
    assert holders_text(found) == (
        "1 host at its ceiling holds the end: slow.test (30s interval, 9 left, ~4m30s)")


def test_no_host_holds_the_end_while_the_rest_takes_longer() -> None:
    """A broad crawl's bulk outlasts the slow host: no host to blame."""
    table = _table()
    _at_ceiling(table, "slow.test")
    waiting = {"slow.test": 9} | {f"h{n}.test": 10 for n in range(1000)}
    assert holders(waiting, table, NOW, rate=20.0, min_tail=10.0) == []  # 500 s > 270 s
    # ... nor does a short tail, however alone: it is over before the next line.
    assert holders({"a.test": 3}, table, NOW, rate=0.0, min_tail=10.0) == []


def test_hosts_with_tails_alike_hold_the_end_together() -> None:
    table = _table()
    _at_ceiling(table, "slow.test")
    _at_ceiling(table, "slower.test", NOW - 10)  # its next turn in 20 s
    waiting = {"slow.test": 5, "slower.test": 6, "fast.test": 4}
    found = holders(waiting, table, NOW, rate=4.0, min_tail=10.0)
    assert [(h.key, h.tail) for h in found] == [("slower.test", 170.0), ("slow.test", 150.0)]
    assert holders_text(found) == (
        "2 hosts at their ceiling hold the end: slower.test (30s interval, 6 left, ~2m50s), "
        "slow.test (30s interval, 5 left, ~2m30s)")


def test_each_holder_says_what_keeps_it_slow_when_they_differ() -> None:
    table = _table()
    _at_ceiling(table, "slow.test")
    table.get("polite.test").crawl_delay = 20.0  # what the site asked, not a back-off
    table.get("paused.test").not_before = NOW + 100.0  # a Retry-After
    table.get("plain.test")  # at its default pace, with many requests left
    dead = table.get("dead.test")
    dead.adaptive, dead.dead = 30.0, True
    waiting = {"slow.test": 6, "polite.test": 8, "paused.test": 3, "plain.test": 170,
               "dead.test": 500}
    found = holders(waiting, table, NOW, rate=0.0, min_tail=10.0)
    assert holders_text(found) == (
        "4 hosts hold the end: slow.test (at its ceiling, 30s interval, 6 left, ~3m00s), "
        "plain.test (1s interval, 170 left, ~2m49s), "
        "polite.test (slowed by its Crawl-delay, 20s interval, 8 left, ~2m20s), "
        "and 1 more")  # a dead host's requests are dropped at once: it holds nothing
    assert found[-1].key == "paused.test"
    assert found[-1].state == "retry-after"


# -- the scheduler queue's waits, and the observer reading them ----------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock(NOW)
    monkeypatch.setattr(pqueue, "clock", c)
    return c


@pytest.fixture
def mw() -> PolitenessMiddleware:
    """The real middleware with its gate on a 30 s ceiling; names on a known IP."""
    middleware = PolitenessMiddleware.from_crawler(_crawler(
        POLITENESS_CEILING=30.0, POLITENESS_LOG_INTERVAL=10.0))
    middleware.crawler._test_middlewares = [middleware]  # type: ignore[attr-defined]
    return middleware


def _spider() -> Any:
    return type("S", (), {"name": "s"})()


def _fill(mw: PolitenessMiddleware, q: Any, host: str, n: int, ip: str) -> None:
    on_ip(mw, host, ip)
    for i in range(n):
        q.push(Request(f"http://{host}/{i}"))


def test_the_queue_adds_up_each_requests_wait(mw: PolitenessMiddleware, clock: Clock) -> None:
    """Three requests queued at t0 and one at t0+1, handed out at t0+4, +6, +8, +10
    (spaced by the host's bucket): they waited 4 + 6 + 8 + 9 = 27 s in all."""
    q = _queue(mw.crawler)
    mw.hosts.get("a.test").adaptive = 2.0
    ready_at(mw, "a.test", NOW + 4)
    _fill(mw, q, "a.test", 3, "127.0.9.2")
    clock.now = NOW + 1
    q.push(Request("http://a.test/3"))
    starts = []
    while (request := take(q)) is not None:
        starts.append(clock.now - NOW)
        reached(mw, request)
        mw.hosts.start("a.test", clock.now)  # the gate releases it on arrival
    assert starts == [4.0, 6.0, 8.0, 10.0]
    assert mw.hosts.get("a.test").queue_wait == pytest.approx(27.0)
    assert q._waits is not None
    assert q._waits.total == pytest.approx(27.0)


def test_live_line_says_where_requests_wait_and_who_holds_the_end(
        mw: PolitenessMiddleware, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    q = _queue(mw.crawler)
    mw.observer.open(_spider(), NOW)
    _fill(mw, q, "slow.test", 9, "127.0.9.2")
    clock.now = NOW + 20
    for n in range(3):
        _fill(mw, q, f"fast{n}.test", 2, "127.0.9.3")
    slow = mw.hosts.get("slow.test")
    slow.adaptive, slow.last_start = 30.0, clock.now  # at its ceiling, just started
    for _ in range(20):  # 1 a second since the last line: the other 6 take 6 s
        mw.observer.waits.add(0.01)
    with caplog.at_level(logging.INFO, logger="scrapy_politeness.middleware"):
        mw.observer.next_log = clock.now
        mw.observer.tick(clock.now, 0, None)
    assert caplog.records[-1].getMessage() == (
        "Politeness: 15 waiting in the scheduler (oldest 20.0s), 0 in the gate; 20 dispatched "
        "(gate wait mean 0.01s, max 0.01s); 1 host, 1 backing off, 0 dead; "
        "1 host at its ceiling holds the end: slow.test (30s interval, 9 left, ~4m30s)")


def test_a_host_is_credited_the_time_it_alone_has_requests_waiting(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    q = _queue(mw.crawler)
    observer = mw.observer
    observer.open(_spider(), NOW)
    _fill(mw, q, "slow.test", 2, "127.0.9.2")
    _fill(mw, q, "fast.test", 1, "127.0.9.3")
    for host in ("slow.test", "fast.test"):
        ready_at(mw, host, NOW)
    for t in (0.25, 0.5):  # two hosts wait: nobody holds the crawl alone
        observer.tick(NOW + t, 0, None)
    assert mw.hosts.get("slow.test").alone == 0.0
    while (request := take(q)) is not None and "fast" not in request.url:
        pass  # slow.test's first, then fast.test's
    assert len(q) == 1
    for t in (0.75, 1.0, 1.25):  # slow.test alone now
        observer.tick(NOW + t, 0, None)
    assert mw.hosts.get("slow.test").alone == pytest.approx(0.75)
    assert mw.hosts.get("fast.test").alone == 0.0
    mw.gate.submit("fast.test", None, object(), NOW + 1.25)  # one more, in the gate
    observer.tick(NOW + 1.5, 1, NOW + 1.25)
    assert mw.hosts.get("slow.test").alone == pytest.approx(0.75)


def test_the_report_counts_the_waits_of_requests_still_queued(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    """A crawl stopped with requests left: they waited too (4 s, then 10 s so far)."""
    q = _queue(mw.crawler)
    ready_at(mw, "a.test", NOW + 4)
    _fill(mw, q, "a.test", 2, "127.0.9.2")
    assert take(q) is not None
    assert clock.now == NOW + 4
    assert mw.hosts.get("a.test").queue_wait == 0.0  # credited when its queue empties...
    mw.observer.report(NOW + 10)  # ... or at the end
    assert mw.hosts.get("a.test").queue_wait == pytest.approx(14.0)
    assert mw.stats.get_value("politeness/scheduler_wait_seconds") == 14.0


@pytest.mark.parametrize(("queued", "gate", "said"), [
    (412, 3, "412 waiting in the scheduler (oldest 31.2s), 3 in the gate (oldest 0.4s)"),
    (0, 0, "0 waiting in the scheduler, 0 in the gate"),
    (None, 3, "3 waiting in the gate (oldest 0.4s)"),  # another scheduler queue: all wait there
    (None, 0, "0 waiting in the gate"),
])
def test_where_requests_wait(queued: int | None, gate: int, said: str) -> None:
    from scrapy_politeness.observe.live_line import where_text

    assert where_text(queued, 31.24, gate, 0.4) == said


def test_a_suspended_host_is_said_suspended_not_paused_by_retry_after() -> None:
    """The breaker's suspension is kept as a pause of the host; the words must
    still say which: a host that sent no Retry-After is "suspended"."""
    from scrapy_politeness.observe.holding import WORDS, hold_state
    from scrapy_politeness.policy import Config, HostTable

    table = HostTable(Config(default=1.0, floor=0.25, ceiling=4.0))
    state = table.get("down.test")
    state.not_before = 130.0  # the probe's instant
    assert hold_state(state, 100.0) == "retry-after"
    assert hold_state(state, 100.0, suspended=True) == "suspended"
    assert WORDS["suspended"][0] == "suspended at its ceiling"
