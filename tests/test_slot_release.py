"""A request's in-flight slot is freed however its download ends.

Real crawls of an 18-host farm with a middleware above the plugin (priority
960, nearer the downloader) that ends every 3rd download its own way: a new
Request from ``process_response``, ``IgnoreRequest``, another exception. The
plugin's own ``process_response``/``process_exception`` never see those ends;
the crawl must still finish with every page (or the dropped ones reported),
keep every host and IP spacing on the server side, and never need the
watchdog. A crawl timeout turns a wedged gate into a failure, not a hang.
"""

from __future__ import annotations

from typing import Any

import pytest
from crawling import ADDON, CrawlResult, farm_settings, run_crawl
from slot_middlewares import at_960

from scrapy_politeness._sitefarm import Farm, starts_by, violations

pytestmark = pytest.mark.integration

TOL = 0.015
INTERVAL = 0.1
IPS = [f"127.0.0.{2 + i}" for i in range(6)]
SPEC = {"ips": IPS, "hosts": {f"h{i:02d}.farm.test": {"ip": IPS[i % len(IPS)], "kind": "normal",
                                                     "pages": 10} for i in range(18)}}
WATCHDOG = "politeness watchdog"


def _crawl(farm: Farm, middleware: str | None, **extra: Any) -> tuple[list[str], CrawlResult]:
    urls = [farm.url(h, f"/p/{i}") for i in range(10) for h in SPEC["hosts"]]
    settings = farm_settings(
        farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_IP_FLOOR=INTERVAL, CONCURRENT_REQUESTS_PER_DOMAIN=2,
        CLOSESPIDER_TIMEOUT=60, RETRY_ENABLED=False)
    settings.update(extra)
    if middleware is not None:
        settings["DOWNLOADER_MIDDLEWARES"] = at_960(middleware)
    return urls, run_crawl(urls, settings, follow=False, errback=True, timeout=150)


def _assert_polite(farm: Farm, result: CrawlResult, dispatched: int | None = None) -> None:
    arrivals = farm.arrivals()
    assert result.stat("finish_reason", "") == "finished", result.log[-3000:]
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        assert not violations(sorted(times), INTERVAL, TOL), host
    for ip, times in starts_by(arrivals, lambda a: a.ip).items():
        assert not violations(sorted(times), INTERVAL, TOL), ip
    assert result.stat("politeness/dispatched") == (dispatched or len(arrivals))
    assert WATCHDOG not in result.log
    assert result.stat("politeness/watchdog_released") == 0


def test_a_new_request_from_a_middleware_above_frees_the_slot(farm_factory: Any) -> None:
    farm = farm_factory(SPEC)
    urls, result = _crawl(farm, "ReissueEveryThird")
    _assert_polite(farm, result)
    fetched = {item["url"] for item in result.items if item.get("status") == 200}
    assert fetched == set(urls)
    assert len(farm.arrivals()) == len(urls) + len(urls) // 3  # every 3rd fetched twice
    assert result.stat("politeness/released_unreported") == 0  # the download's own end


def test_a_new_request_before_the_download_frees_the_slot_by_the_sweep(
        farm_factory: Any) -> None:
    farm = farm_factory(SPEC)
    urls, result = _crawl(farm, "ReplaceEveryThirdRequest")
    _assert_polite(farm, result, dispatched=len(urls) + len(urls) // 3)
    assert {item["url"] for item in result.items if item.get("status") == 200} == set(urls)
    assert len(farm.arrivals()) == len(urls)
    assert result.stat("politeness/released_unreported") == len(urls) // 3


def test_the_same_request_object_re_entering_loses_no_slot(farm_factory: Any) -> None:
    """The object comes back before anything reported its first pass: that
    pass's slot is freed when it re-enters, not overwritten (lost until the
    watchdog). With Scrapy's own queue and room in the downloader it is back
    in the plugin at once, waiting in the gate inside Scrapy's downloader, so
    the sweep cannot tell its first pass ended."""
    farm = farm_factory(SPEC)
    urls, result = _crawl(farm, "ReturnEveryThirdRequestItself", CONCURRENT_REQUESTS=256,
                          SCHEDULER_PRIORITY_QUEUE="scrapy.pqueues.ScrapyPriorityQueue")
    _assert_polite(farm, result, dispatched=len(urls) + len(urls) // 3)
    assert {item["url"] for item in result.items if item.get("status") == 200} == set(urls)
    assert len(farm.arrivals()) == len(urls)
    assert result.stat("politeness/released_unreported") == len(urls) // 3


@pytest.mark.parametrize(("middleware", "error"), [("IgnoreEveryThird", "IgnoreRequest"),
                                                    ("FailEveryThird", "ValueError")])
def test_an_exception_from_a_middleware_above_frees_the_slot(
        farm_factory: Any, middleware: str, error: str) -> None:
    farm = farm_factory(SPEC)
    urls, result = _crawl(farm, middleware)
    _assert_polite(farm, result)
    fetched = {item["url"] for item in result.items if item.get("status") == 200}
    dropped = {item["url"] for item in result.items if item.get("error") == error}
    assert len(dropped) == len(urls) // 3
    assert fetched | dropped == set(urls)
    assert not fetched & dropped
    assert len(farm.arrivals()) == len(urls)


def test_a_plain_crawl_never_needs_the_watchdog(farm_factory: Any) -> None:
    farm = farm_factory(SPEC)
    urls, result = _crawl(farm, None)
    _assert_polite(farm, result)
    assert {item["url"] for item in result.items if item.get("status") == 200} == set(urls)


def test_a_failed_download_answered_above_is_fed_back_from_the_download() -> None:
    """Connection refused (nothing listens on 127.0.0.1:1), the error answered
    by a middleware above the plugin: the backoff still comes from the
    download's own end, and the stand-in answer is not fed back a second time."""
    urls = [f"http://127.0.0.1:1/p/{i}" for i in range(4)]
    result = run_crawl(urls, {
        "ADDONS": ADDON, "ROBOTSTXT_OBEY": False, "RETRY_ENABLED": False,
        "POLITENESS_DEFAULT": 0.05, "POLITENESS_FLOOR": 0.05, "POLITENESS_IP_FLOOR": 0.05,
        "CLOSESPIDER_TIMEOUT": 60, "DOWNLOADER_MIDDLEWARES": at_960("AnswerErrors")},
        follow=False, timeout=120)
    assert result.stat("finish_reason", "") == "finished"
    assert sorted(item["url"] for item in result.items if item.get("status") == 599) == urls
    assert result.stat("politeness/backoff/transport") == len(urls)
    assert result.stat("politeness/backoff/5xx") == 0
    assert result.stat("politeness/released_unreported") == 0
    assert WATCHDOG not in result.log
