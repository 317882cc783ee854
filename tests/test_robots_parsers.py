"""Scrapy's robots.txt parsers follow the active hosts (``downloader.robots_parsers``).

Scrapy's robots middleware keeps a parser per netloc for the whole crawl (~1.2 KB
each with Protego): a host the host table forgot loses its parser at the next
eviction pass; a host still known, with a compact verdict (a Crawl-delay), or
whose robots.txt is still being fetched keeps it. Fake clock, no crawl.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scrapy import Request
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from twisted.internet.defer import Deferred

from scrapy_politeness.downloader.host_keys import HostKeys
from scrapy_politeness.downloader.robots_parsers import RobotsParsers
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


def test_a_forgotten_host_loses_its_parser_and_an_active_one_keeps_it() -> None:
    tracker, hosts, parsers, clock = _setup()
    for name in ("gone.test", "busy.test"):
        _parse(tracker, parsers, f"http://{name}:8080/robots.txt")
        hosts.start(name, 0.0)
    clock[0] = 400.0
    hosts.start("busy.test", 390.0)  # still crawled
    hosts.evict(clock[0] - TTL)
    assert tracker.evict(clock[0], clock[0] - TTL) == 1
    assert list(parsers) == ["busy.test:8080"]
    assert len(tracker) == 1  # looked at again one idle time later
    clock[0] = 800.0
    hosts.evict(clock[0] - TTL)
    assert tracker.evict(clock[0], clock[0] - TTL) == 1
    assert parsers == {} and len(tracker) == 0


def test_a_crawl_delay_record_keeps_the_parser_it_is_read_again_from() -> None:
    tracker, hosts, parsers, clock = _setup()
    _parse(tracker, parsers, "https://slow.test/robots.txt")
    hosts.get("slow.test").crawl_delay = 5.0
    hosts.start("slow.test", 0.0)
    clock[0] = 340.0  # idle past the TTL, within its record's ceiling + TTL
    hosts.evict(clock[0] - TTL)  # a compact verdict now
    assert "slow.test" in hosts and hosts.whole("slow.test") is None
    assert tracker.evict(clock[0], clock[0] - TTL) == 0
    assert list(parsers) == ["slow.test"]
    clock[0] = 400.0  # the record expired: the parser goes at the next pass after it
    hosts.evict(clock[0] - TTL)
    assert "slow.test" not in hosts
    assert tracker.evict(700.0, 400.0) == 1


def test_a_robots_txt_still_being_fetched_is_left_alone() -> None:
    tracker, hosts, parsers, clock = _setup()
    _parse(tracker, parsers, "http://again.test/robots.txt")
    parsers["again.test"] = Deferred()  # forgotten, came back: fetched again
    clock[0] = 400.0
    assert tracker.evict(clock[0], clock[0] - TTL) == 0
    assert "again.test" in parsers


def test_a_parse_not_yet_due_stops_the_pass() -> None:
    """The pass pops from the oldest end and stops at the first one too recent."""
    tracker, hosts, parsers, clock = _setup()
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
