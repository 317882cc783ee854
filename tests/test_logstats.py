"""The periodic log line and the closing report (``politeness/report``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.observe.live_line import LOG_FORMAT, PeriodWaits, report_text, snapshot
from scrapy_politeness.policy import Config, HostTable
from scrapy_politeness.settings import PolitenessSettings


def test_period_waits_mean_max_and_reset() -> None:
    w = PeriodWaits()
    assert w.take() == (0, 0.0, 0.0)
    for waited in (0.0, 1.0, 5.0):
        w.add(waited)
    assert w.take() == (3, 2.0, 5.0)
    assert w.take() == (0, 0.0, 0.0)  # a new period


def test_snapshot_counts_backing_off_and_dead_hosts() -> None:
    table = HostTable(Config(default=1.0, floor=0.25, ceiling=60.0))
    table.get("rest.test")
    table.get("narrowed.test").adaptive = 0.5  # below its default: not backing off
    table.get("backed.test").adaptive = 4.0
    table.get("delayed.test").crawl_delay = 10.0  # the site asked: not a backoff
    dead = table.get("dead.test")
    dead.adaptive, dead.dead = 60.0, True
    waits = PeriodWaits()
    waits.add(0.5)
    waits.add(1.5)
    snap = snapshot(table, waits, "7 waiting in the gate (oldest 12.5s)")
    assert (snap.hosts, snap.where) == (5, "7 waiting in the gate (oldest 12.5s)")
    assert (snap.dispatched, snap.mean_wait, snap.max_wait) == (2, 1.0, 1.5)
    assert (snap.backing_off, snap.dead) == (1, 1)


def test_log_line_uses_lazy_args(caplog: pytest.LogCaptureFixture) -> None:
    table = HostTable(Config())
    table.get("a.test").adaptive = 2.0
    log = logging.getLogger("test.politeness")
    with caplog.at_level(logging.INFO, logger="test.politeness"):
        snapshot(table, PeriodWaits(), "3 waiting in the gate (oldest 4.2s)").log(log)
    (record,) = caplog.records
    assert record.msg == LOG_FORMAT  # formatted only when emitted
    assert record.getMessage() == (
        "Politeness: 3 waiting in the gate (oldest 4.2s); 0 dispatched "
        "(gate wait mean 0.00s, max 0.00s); 1 host, 1 backing off, 0 dead")


@pytest.mark.parametrize(
    ("value", "message"),
    [(-1, "POLITENESS_LOG_INTERVAL must be >= 0, got -1"),
     ("soon", "POLITENESS_LOG_INTERVAL must be a number, got 'soon'"),
     (float("inf"), "POLITENESS_LOG_INTERVAL must be finite, got inf")],
)
def test_log_interval_is_validated(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PolitenessSettings.from_settings({"POLITENESS_LOG_INTERVAL": value})


def _middleware(**settings: Any) -> PolitenessMiddleware:
    crawler = get_crawler(settings_dict=settings)
    return PolitenessMiddleware(crawler, PolitenessSettings.from_settings(crawler.settings))


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def _spider() -> Any:
    return type("S", (), {"name": "s"})()


@pytest.mark.parametrize(("interval", "expected"), [(0, None), ("0", None), (30, 30.0),
                                                    (None, 10.0)])
def test_log_interval_schedules_the_line(loop: asyncio.AbstractEventLoop, interval: Any,
                                         expected: float | None) -> None:
    mw = _middleware(POLITENESS_LOG_INTERVAL=interval)
    mw.loop = loop
    mw.observer.open(_spider(), loop.time())
    if expected is None:  # 0 disables it
        assert mw.observer.next_log == float("inf")
    else:
        assert mw.observer.next_log == pytest.approx(mw.observer.start + expected)
    assert mw.observer.trace is None  # no POLITENESS_TRACE: no writer at all


def test_middleware_log_line_reports_the_oldest_waiter(
        loop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture) -> None:
    mw = _middleware()
    mw.loop = loop
    mw.observer.waits.add(2.0)
    mw.driver.waiters[loop.create_future()] = 10.0  # oldest first
    mw.driver.waiters[loop.create_future()] = 14.0
    mw.hosts.get("a.test").adaptive = 3.0
    with caplog.at_level(logging.INFO, logger="scrapy_politeness.middleware"):
        mw.observer.next_log = 25.0  # the line is due
        mw.observer.tick(25.0, len(mw.driver.waiters), next(iter(mw.driver.waiters.values())))
    assert caplog.records[-1].getMessage() == (
        "Politeness: 2 waiting in the gate (oldest 15.0s); 1 dispatched "
        "(gate wait mean 2.00s, max 2.00s); 1 host, 1 backing off, 0 dead")


def test_closing_report_lists_the_hosts_that_held_the_crawl_longest(
        caplog: pytest.LogCaptureFixture) -> None:
    mw = _middleware(POLITENESS_REPORT_HOSTS=2, POLITENESS_REPORT_STAT=True,
                     POLITENESS_CEILING=30.0)
    facts = {  # host: (requests, alone, scheduler, gate, adaptive, backoffs, crawl-delay, dead)
        "cheap.test": (50, 0.0, 3.0, 1.0, 1.0, None, 0.0, False),
        "costly.test": (12, 0.0, 300.0, 40.0, 8.0, {"429": 2, "5xx": 1}, 0.0, False),
        "slow.test": (10, 125.0, 1350.0, 0.4, 30.0, {"5xx": 10}, 0.0, False),
        "delayed.test": (5, 0.0, 20.0, 20.0, 1.0, None, 4.0, False),
        "gone.test": (6, 0.0, 5.0, 5.0, 30.0, {"transport": 6}, 0.0, True),
    }
    for host, (requests, alone, queued, waited, adaptive, backoffs, delay, dead) in facts.items():
        s = mw.hosts.get(host)
        s.requests, s.alone, s.queue_wait, s.waited = requests, alone, queued, waited
        s.adaptive, s.backoffs, s.crawl_delay, s.dead = adaptive, backoffs, delay, dead
    with caplog.at_level(logging.INFO, logger="scrapy_politeness.middleware"):
        mw.observer.report(0.0)
    assert mw.stats.get_value("politeness/report") == [
        {"host": "slow.test", "requests": 10, "alone": 125.0, "scheduler_wait": 1350.0,
         "waited": 0.4, "interval": 30.0, "state": "ceiling", "backoffs": {"5xx": 10},
         "crawl_delay": 0.0, "dead": False},
        {"host": "costly.test", "requests": 12, "alone": 0.0, "scheduler_wait": 300.0,
         "waited": 40.0, "interval": 8.0, "state": "backing-off",
         "backoffs": {"429": 2, "5xx": 1}, "crawl_delay": 0.0, "dead": False},
    ]
    text = caplog.records[-1].getMessage()
    assert text.startswith("Politeness report (hosts that held the crawl longest):")
    assert ("  slow.test: the only host with requests waiting for 2m05s; 10 requests waited "
            "22m30s (22m30s in the scheduler, 0.4s in the gate); interval 30s, at its ceiling; "
            "backoffs 5xx:10") in text
    assert ("  costly.test: 12 requests waited 5m40s (5m00s in the scheduler, 40.0s in the "
            "gate); interval 8s, backing off; backoffs 429:2 5xx:1") in text
    assert "cheap.test" not in text
    # Every host, dead ones flagged, when asked for more rows than hosts.
    rows = mw.host_report(10)
    assert [r["host"] for r in rows] == ["slow.test", "costly.test", "delayed.test",
                                         "gone.test", "cheap.test"]
    assert rows[2]["state"] == "crawl-delay"
    assert rows[3]["dead"] is True
    assert rows[3]["backoffs"] == {"transport": 6}
    assert "crawl-delay 4s" in report_text(rows)


def test_report_is_in_the_log_not_the_stats_by_default(caplog: pytest.LogCaptureFixture) -> None:
    mw = _middleware()
    mw.hosts.get("a.test").requests = 1
    with caplog.at_level(logging.INFO, logger="scrapy_politeness.middleware"):
        mw.observer.report()
    assert mw.stats.get_value("politeness/report") is None
    assert "a.test: 1 request waited" in caplog.records[-1].getMessage()


def test_report_numbers_carry_no_float_noise(caplog: pytest.LogCaptureFixture) -> None:
    mw = _middleware()
    s = mw.hosts.get("a.test")
    s.requests, s.adaptive, s.crawl_delay = 3, 0.1 * 3 * 3, 0.1 + 0.2  # 0.9000000000000001
    with caplog.at_level(logging.INFO, logger="scrapy_politeness.middleware"):
        mw.observer.report()
    text = caplog.records[-1].getMessage()
    assert "interval 0.9s" in text
    assert "crawl-delay 0.3s" in text


def test_wait_seconds_stat_is_rounded_at_the_end() -> None:
    mw = _middleware()
    for _ in range(3):
        mw.stats.inc_value("politeness/wait_seconds", 0.1)  # 0.30000000000000004
    mw.observer.report()
    assert mw.stats.get_value("politeness/wait_seconds") == 0.3


def test_counts_of_one_are_singular_in_every_line() -> None:
    """"1 hosts", "1 requests", "1 fetches" read as a bug to a user."""
    from scrapy_politeness.observe.live_line import plural

    assert [plural(n, "host") for n in (0, 1, 2)] == ["0 hosts", "1 host", "2 hosts"]
    assert plural(1, "fetch", "fetches") == "1 fetch"
    assert plural(5, "fetch", "fetches") == "5 fetches"
    row = {"host": "a.test", "requests": 1, "alone": 0.0, "scheduler_wait": 0.0, "waited": 0.0,
           "interval": 1.0, "state": "", "backoffs": {}, "crawl_delay": 0.0, "dead": False}
    assert report_text([row]).startswith("  a.test: 1 request waited")
    one = LOG_FORMAT % ("", 0, 0.0, 0.0, 1, "", 1, 0, "", "")
    assert "; 1 host, 1 backing off" in one


@pytest.mark.parametrize(("dead_after", "said"), [(1, "for 1 consecutive fetch;"),
                                                  (3, "for 3 consecutive fetches;")])
def test_dead_host_warning_counts_fetches_in_english(
        caplog: pytest.LogCaptureFixture, dead_after: int, said: str) -> None:
    mw = _middleware(POLITENESS_DEAD_AFTER=dead_after)
    state = mw.hosts.get("a.test")
    with caplog.at_level(logging.WARNING, logger="scrapy_politeness"):
        mw.observer.died(0.0, "a.test", state, 60.0, "politeness: host a.test is dead")
    assert said in caplog.text


def test_the_live_line_counts_suspended_and_probed_hosts(
        caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test.politeness")
    with caplog.at_level(logging.INFO, logger="test.politeness"):
        snapshot(HostTable(Config()), PeriodWaits(), "0 waiting in the gate",
                 suspended=(2, 1)).log(log)
    (record,) = caplog.records
    assert record.getMessage().endswith("0 hosts, 0 backing off, 0 dead, 2 suspended (1 probed)")
