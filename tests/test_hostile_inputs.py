"""Hostile and malformed inputs: robots.txt, URLs, Retry-After headers.

A broken or hostile site must not make the crawl faster, crash it, or stall it.
(Retry-After parsing has its own file, tests/test_retry_after.py; settings of
the wrong type or out of range, tests/test_settings.py.)
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.robotstxt import ProtegoRobotParser, PythonRobotParser
from scrapy.utils.test import get_crawler

from scrapy_politeness.downloader.crawl_delays import robots_delay
from scrapy_politeness.middleware import PolitenessMiddleware

UA = "farmbot"


def _protego(body: str) -> Any:
    return ProtegoRobotParser(body.encode("utf-8"), None)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("User-agent: *\nCrawl-delay: 2\n", 2.0),
        ("User-agent: *\nCrawl-delay: 0.5\n", 0.5),
        ("User-agent: *\nCrawl-delay: -3\n", None),
        ("User-agent: *\nCrawl-delay: NaN\n", None),
        ("User-agent: *\nCrawl-delay: inf\n", None),
        ("User-agent: *\nCrawl-delay: soon\n", None),
        ("User-agent: *\nCrawl-delay: 0\n", None),
        ("\x00\xff<html>garbage</html>\n\n:::\nCrawl-delay\n", None),
        ("", None),
        ("User-agent: *\nCrawl-delay: 1000000000\n", 1e9),
        # Request-rate: 1 request per 5 seconds is a 5 s delay; the larger wins.
        ("User-agent: *\nRequest-rate: 1/5\nCrawl-delay: 2\n", 5.0),
        # Our own group wins over the catch-all, whatever the order.
        ("User-agent: *\nCrawl-delay: 10\n\nUser-agent: farmbot\nCrawl-delay: 2\n", 2.0),
        ("User-agent: farmbot\nCrawl-delay: 3\n\nUser-agent: *\nCrawl-delay: 10\n", 3.0),
        ("User-agent: otherbot\nCrawl-delay: 30\n", None),
    ],
)
def test_robots_delay_from_protego(body: str, expected: float | None) -> None:
    assert robots_delay(_protego(body), UA) == expected


def test_robots_delay_from_the_stdlib_parser_and_a_broken_parser() -> None:
    rp = PythonRobotParser(b"User-agent: *\nCrawl-delay: 4\nRequest-rate: 1/8\n", None)
    assert robots_delay(rp, UA) == 8.0

    class Broken:
        def crawl_delay(self, ua: str) -> float:
            raise RuntimeError("boom")

    assert robots_delay(Broken(), UA) is None  # type: ignore[arg-type]


def _middleware(**settings: Any) -> PolitenessMiddleware:
    crawler = get_crawler(settings_dict={"POLITENESS_DNS_HOSTS_FILE": "", **settings})
    return PolitenessMiddleware.from_crawler(crawler)


@pytest.mark.parametrize(
    ("policy", "crawl_delay", "parked"),
    [("skip", 0.0, True), ("cap", 60.0, False), ("honour", 1e9, False)],
)
def test_huge_crawl_delay_follows_the_over_max_policy(policy: str, crawl_delay: float,
                                                      parked: bool) -> None:
    mw = _middleware(POLITENESS_CRAWL_DELAY_OVER_MAX=policy)
    request = Request("http://slow.example/page")
    mw.crawl_delays.parsed(_protego("User-agent: *\nCrawl-delay: 1000000000\n"), request)
    state = mw.hosts.get("slow.example")
    assert state.crawl_delay == crawl_delay
    assert (state.parked_until == math.inf) is parked
    if parked:
        with pytest.raises(IgnoreRequest, match="POLITENESS_MAX_CRAWL_DELAY=60s"):
            mw.dropped.check("slow.example", 0.0)
    else:
        mw.dropped.check("slow.example", 0.0)  # not dropped


def test_a_garbage_crawl_delay_leaves_the_host_alone() -> None:
    mw = _middleware()
    mw.crawl_delays.parsed(_protego("User-agent: *\nCrawl-delay: -1e999\n"),
                           Request("http://a.example/"))
    assert mw.hosts.peek("a.example") is None


@pytest.mark.parametrize(
    ("url", "key", "ip"),
    [
        ("http://WWW.Example.COM/a", "www.example.com", None),
        ("http://www.example.com./a", "www.example.com", None),
        ("http://bücher.example/", "xn--bcher-kva.example", None),
        ("https://user:secret@Example.com:8443/x", "example.com", None),
        ("http://example.com:8080/", "example.com", None),
        ("http://127.0.0.2:8080/", "127.0.0.2", "127.0.0.2"),
        ("http://[::1]:8080/", "::1", "::1"),
        ("http://[0:0:0:0:0:0:0:1]/", "::1", "::1"),
    ],
)
def test_url_forms_map_to_one_bucket_key(url: str, key: str, ip: str | None) -> None:
    mw = _middleware()
    request = Request(url)
    readiness = mw.readiness(request)
    assert readiness is not None
    assert readiness.key == key
    # IP literals need no DNS: the queue knows their IP bucket (the canonical
    # address) at once; a name has none until it was resolved.
    assert readiness.ip == ip


@pytest.mark.parametrize("url", ["data:text/plain,hello", "file:///etc/hostname"])
def test_non_network_schemes_are_ignored(url: str) -> None:
    assert _middleware().readiness(Request(url)) is None
