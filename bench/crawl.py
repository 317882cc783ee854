"""One benchmark crawl in its own process: ``python -m bench.crawl job.json``.

The job file (JSON) gives ``urls``, ``settings`` and ``out`` (where this process
writes its result: Scrapy stats, CPU times, the priority queue in force). The
spider fetches exactly the start URLs (no link following), so every
configuration issues the same requests. A process per crawl keeps the reactor,
the name resolver and Scrapy's global state apart.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response

BASE_SETTINGS: dict[str, Any] = {
    "REMOTE_CONTROL_ENABLED": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "WARNING",
    "HTTPERROR_ALLOW_ALL": True,
    "RETRY_ENABLED": True,
    "ROBOTSTXT_OBEY": False,
}


class BenchSpider(scrapy.Spider):
    name = "bench"

    def __init__(self, urls: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = urls

    async def start(self) -> AsyncIterator[Any]:
        for url in self.urls:
            yield scrapy.Request(url, dont_filter=True)

    def parse(self, response: Response) -> None:
        """Nothing to extract: the benchmark judges the requests, not the items."""
        return None


def _plain(value: Any) -> Any:
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def _watch_gc() -> list[float]:
    """Seconds the garbage collector runs (CPU), summed: cProfile does not show them;
    and the wall seconds of its full (generation 2) collections, the loop stalls
    every bucket of a polite crawl pays for (docs/usage/how-it-works.md).

    Only with ``BENCH_GC=1``: the callback itself costs a little per collection."""
    total = [0.0, 0.0]
    started = [0.0, 0.0]

    def callback(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0], started[1] = time.process_time(), time.perf_counter()
        else:
            total[0] += time.process_time() - started[0]
            if info["generation"] == 2:
                total[1] += time.perf_counter() - started[1]

    gc.callbacks.append(callback)
    return total


def main(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        job = json.load(fh)
    settings = {**BASE_SETTINGS, **job["settings"]}
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BenchSpider)
    marks: dict[str, float] = {}

    def started() -> None:
        marks["cpu0"], marks["wall0"] = time.process_time(), time.monotonic()

    def closed() -> None:
        marks["cpu1"], marks["wall1"] = time.process_time(), time.monotonic()

    crawler.signals.connect(started, signal=signals.engine_started)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler, urls=job["urls"])
    gc_time = _watch_gc() if os.environ.get("BENCH_GC") else [0.0, 0.0]
    profile_to = os.environ.get("BENCH_PROFILE")  # bench/overhead.py --profile
    if profile_to:
        import cProfile

        with cProfile.Profile() as prof:
            process.start()
        prof.dump_stats(profile_to)
    else:
        process.start()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    assert crawler.stats is not None
    result = {
        "stats": {k: _plain(v) for k, v in crawler.stats.get_stats().items()},
        "queue": str(crawler.settings.get("SCHEDULER_PRIORITY_QUEUE")),
        "resolver": str(crawler.settings.get("TWISTED_DNS_RESOLVER")),
        "crawl_cpu": marks.get("cpu1", 0.0) - marks.get("cpu0", 0.0),
        "crawl_wall": marks.get("wall1", 0.0) - marks.get("wall0", 0.0),
        "self_cpu": usage.ru_utime + usage.ru_stime,
        "sys_cpu": usage.ru_stime,
        "voluntary_switches": usage.ru_nvcsw,
        "max_rss_kb": usage.ru_maxrss,
        "gc_seconds": gc_time[0],
        "gc_full_wall": gc_time[1],
        "gc_collections": gc.get_stats(),
        "objects_at_end": len(gc.get_objects()),
    }
    with open(job["out"], "w", encoding="utf-8") as fh:
        json.dump(result, fh)


if __name__ == "__main__":
    main(sys.argv[1])
