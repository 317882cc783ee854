"""Scrapy's robots.txt parsers follow the active hosts (``downloader.robots_parsers``).

Scrapy's robots middleware keeps a parser per netloc for the whole crawl (~1 KB
each with Protego): a host idle for ``PARSER_IDLE`` loses its parser at the next
eviction pass; a host still in use, with a Crawl-delay (whole or as a compact
verdict), or whose robots.txt is still being fetched keeps it. Fake clock, no crawl.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scrapy import Request
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from twisted.internet.defer import Deferred

from scrapy_politeness.downloader.host_keys import HostKeys
from scrapy_politeness.downloader.robots_parsers import PARSER_IDLE, RobotsParsers
from scrapy_politeness.policy import Config, HostTable

TTL = 300.0


class _Crawler:
    def __init__(self, parsers: dict[str, Any]) -> None:
        self.middleware = SimpleNamespace(_parsers=parsers)

    def get_downloader_middleware(self, cls: type) -> Any:
        assert cls is RobotsTxtMiddleware
        return self.middleware


def _setup() -> tuple[RobotsParsers, HostTable, dict[str, Any], list[float]]:
    clock = [0.0]
    hosts = HostTable(Config())
    parsers: dict[str, Any] = {}
    tracker = RobotsParsers(_Crawler(parsers), hosts, HostKeys("host"),  # type: ignore[arg-type]
                            lambda: clock[0])
    return tracker, hosts, parsers, clock


def _parse(tracker: RobotsParsers, parsers: dict[str, Any], url: str) -> None:
    request = Request(url)
    parsers[url.split("/")[2]] = object()  # what the middleware keeps
    tracker.parsed(request=request, robotparser=None)


def _pass(tracker: RobotsParsers, hosts: HostTable, now: float) -> int:
    """The middleware's eviction pass: the host table first, then the parsers."""
    hosts.evict(now - TTL)
    return tracker.evict(now, now - PARSER_IDLE)


def test_an_idle_host_loses_its_parser_and_an_active_one_keeps_it() -> None:
    tracker, hosts, parsers, clock = _setup()
    for name in ("idle.test", "busy.test"):
        _parse(tracker, parsers, f"http://{name}:8080/robots.txt")
        hosts.start(name, 0.0)
    clock[0] = 100.0
    hosts.start("busy.test", 90.0)  # still crawled
    assert _pass(tracker, hosts, clock[0]) == 1
    assert list(parsers) == ["busy.test:8080"]
    assert hosts.whole("idle.test") is not None  # its state lasts longer (POLITENESS_IDLE_TTL)
    assert len(tracker) == 1  # busy: looked at again later
    clock[0] = 200.0
    assert _pass(tracker, hosts, clock[0]) == 1
    assert parsers == {}
    assert len(tracker) == 0


def test_a_host_the_table_forgot_loses_its_parser() -> None:
    tracker, hosts, parsers, _clock = _setup()
    _parse(tracker, parsers, "http://gone.test/robots.txt")
    hosts.start("gone.test", 0.0)
    assert _pass(tracker, hosts, 400.0) == 1
    assert "gone.test" not in hosts
    assert parsers == {}


def test_a_crawl_delay_keeps_the_parser_it_is_read_again_from() -> None:
    tracker, hosts, parsers, _clock = _setup()
    _parse(tracker, parsers, "https://slow.test/robots.txt")
    hosts.get("slow.test").crawl_delay = 5.0
    hosts.start("slow.test", 0.0)
    assert _pass(tracker, hosts, 100.0) == 0  # a whole state, idle: its Crawl-delay binds
    assert _pass(tracker, hosts, 340.0) == 0  # a compact verdict now
    assert "slow.test" in hosts
    assert hosts.whole("slow.test") is None
    assert list(parsers) == ["slow.test"]
    assert _pass(tracker, hosts, 400.0) == 1  # the record expired: the parser goes
    assert "slow.test" not in hosts
    assert parsers == {}


def test_a_robots_txt_still_being_fetched_is_left_alone() -> None:
    tracker, hosts, parsers, _clock = _setup()
    _parse(tracker, parsers, "http://again.test/robots.txt")
    parsers["again.test"] = Deferred()  # dropped, came back: fetched again
    assert _pass(tracker, hosts, 400.0) == 0
    assert "again.test" in parsers


def test_a_parse_not_yet_due_stops_the_pass() -> None:
    """The pass pops from the oldest end and stops at the first one too recent."""
    tracker, _hosts, parsers, clock = _setup()
    for i in range(3):
        clock[0] = float(i * 100)
        _parse(tracker, parsers, f"http://h{i}.test/robots.txt")
    assert tracker.evict(350.0, 150.0) == 2
    assert list(parsers) == ["h2.test"]


def test_without_scrapy_s_map_nothing_is_kept() -> None:
    clock = [0.0]
    crawler = _Crawler({})
    crawler.middleware = SimpleNamespace()  # another robots middleware
    tracker = RobotsParsers(crawler, HostTable(Config()), HostKeys("host"),  # type: ignore[arg-type]
                            lambda: clock[0])
    tracker.parsed(request=Request("http://a.test/"), robotparser=None)
    assert tracker.evict(400.0, 100.0) == 0
    assert len(tracker) == 0


def test_a_host_with_requests_in_the_scheduler_queue_keeps_its_parser() -> None:
    """Its page waited there longer than a minute after its robots.txt: dropping the
    parser would fetch robots.txt again (seen at 20,000 hosts on a loaded machine)."""
    tracker, hosts, parsers, _clock = _setup()
    queued: dict[str, object] = {"waiting.test": object()}
    tracker.queues.append(queued)
    _parse(tracker, parsers, "http://waiting.test/robots.txt")
    hosts.start("waiting.test", 0.0)
    assert _pass(tracker, hosts, 100.0) == 0
    del queued["waiting.test"]  # handed out: its last request
    assert _pass(tracker, hosts, 200.0) == 1
    assert parsers == {}
