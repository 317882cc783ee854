"""The latency the controller reads is the server's, not the crawl's own loop lag.

A crawl whose every response holds the event loop (tests/cpu_burn.py) measures
``download_latency`` inflated by its own busy loop; against servers that answer
at once, no host may back off for latency. A server that really slows down
still widens its interval, on an idle loop and on a CPU-bound one. Real crawls
of the farm.
"""

from __future__ import annotations

from typing import Any

import pytest
from crawling import CrawlResult, farm_settings, run_crawl

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness.meta import BUCKET

pytestmark = pytest.mark.integration

IPS = [f"127.0.0.{2 + i}" for i in range(4)]
FAST = {"ips": IPS, "hosts": {f"f{i}.farm.test": {"ip": IPS[i % len(IPS)], "kind": "normal",
                                                 "pages": 15} for i in range(8)}}


def _crawl(farm: Farm, urls: list[str], *, burn: bool, meta: dict[str, Any] | None = None,
           **extra: Any) -> CrawlResult:
    settings = farm_settings(
        farm, POLITENESS_DEFAULT=0.05, POLITENESS_FLOOR=0.05, POLITENESS_IP_FLOOR=0.0,
        CONCURRENT_REQUESTS=32, RETRY_ENABLED=False, CLOSESPIDER_TIMEOUT=90, **extra)
    if burn:
        settings["DOWNLOADER_MIDDLEWARES"] = {"cpu_burn.BurnCpu": 100}
    return run_crawl(urls, settings, follow=False, timeout=150, meta=meta)


def test_a_cpu_bound_crawl_backs_off_no_fast_host_for_latency(farm_factory: Any) -> None:
    farm = farm_factory(FAST)
    urls = [farm.url(h, f"/p/{i}") for i in range(15) for h in FAST["hosts"]]
    result = _crawl(farm, urls, burn=True)
    assert result.stat("finish_reason", "") == "finished", result.log[-3000:]
    assert result.stat("downloader/response_status_count/200") == len(urls)
    assert result.stat("politeness/backoff/latency") == 0, result.log[-3000:]


@pytest.mark.parametrize("burn", [False, True], ids=["idle-loop", "cpu-bound"])
def test_a_server_that_slows_down_still_widens(farm_factory: Any, burn: bool) -> None:
    spec = {"ips": IPS[:2], "hosts": {
        "quick.farm.test": {"ip": IPS[0], "kind": "normal", "pages": 6},
        "slow.farm.test": {"ip": IPS[1], "kind": "slow", "latency": 0.4, "pages": 6}}}
    farm = farm_factory(spec)
    # One bucket for both: its latency jumps from the quick host's to the slow one's.
    urls = ([farm.url("quick.farm.test", f"/p/{i}") for i in range(6)]
            + [farm.url("slow.farm.test", f"/p/{i}") for i in range(6)])
    result = _crawl(farm, urls, burn=burn, meta={BUCKET: "one.bucket"},
                    CONCURRENT_REQUESTS_PER_DOMAIN=1)
    assert result.stat("finish_reason", "") == "finished", result.log[-3000:]
    assert result.stat("politeness/backoff/latency") >= 1, result.log[-3000:]
