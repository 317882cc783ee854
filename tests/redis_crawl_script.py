"""One scrapy-redis crawler process: ``python redis_crawl_script.py job.json``.

scrapy-redis's shipped ``RedisSpider`` (or ``RedisCrawlSpider``: job
``"spider": "crawl"``) fed through its start URLs key with its default batch
(``CONCURRENT_REQUESTS``; job ``"batch"`` sets ``redis_batch_size``), with
scrapy-redis's scheduler and dupefilter; the job gives the settings (the
add-on picks the queue class). Items (the URLs fetched) go to a JSON-lines file as they come,
so a process killed mid-crawl still shows what it finished.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response
from scrapy.spiders import Rule
from scrapy_redis.spiders import RedisCrawlSpider, RedisSpider


def _item(response: Response) -> dict[str, Any]:
    return {"url": response.url, "status": response.status,
            "booked": response.meta.get("politeness_booked"),
            "politeness": response.meta.get("politeness")}


class FrontierSpider(RedisSpider):  # type: ignore[misc]
    name = "frontier"
    callback_s = 0.0  # job "callback_s": each callback takes this long (the loop runs on)
    # job "callback_log": a file each callback appends its URL to as it starts, and
    # "done <URL>" as it ends (unbuffered, unlike the items of a killed process)
    callback_log = ""

    async def parse(self, response: Response) -> AsyncIterator[dict[str, Any]]:
        if self.callback_log:
            with open(self.callback_log, "a", encoding="utf-8") as fh:
                fh.write(response.url + "\n")
        if self.callback_s:
            await asyncio.sleep(self.callback_s)
        if self.callback_log:
            with open(self.callback_log, "a", encoding="utf-8") as fh:
                fh.write(f"done {response.url}\n")
        yield _item(response)


class FrontierCrawlSpider(RedisCrawlSpider):  # type: ignore[misc]
    name = "frontier"
    rules = (Rule(callback="parse_page", follow=False),)  # links of no page are followed

    def parse_start_url(self, response: Response) -> Iterator[dict[str, Any]]:
        yield _item(response)

    def parse_page(self, response: Response) -> Iterator[dict[str, Any]]:
        yield _item(response)


def _barrier(folder: str, n: int) -> None:
    """Block until ``n`` processes reached this point (a file each in ``folder``;
    not Redis, whose command counts the tests read), so a fleet's first requests
    all start at the same instant. Runs at ``engine_started``: every process's
    spider and plugin are open by then."""
    import os
    import time
    from pathlib import Path

    Path(folder, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < n and time.monotonic() < deadline:
        time.sleep(0.0005)


def _slow_news(delay: float) -> None:
    """Fault injection: every report of a late start reaches Redis ``delay`` s
    late, as on a loop too busy to run it (a fleet's first requests)."""
    import asyncio

    from scrapy_politeness.distributed.redis_backend import RedisBackend

    for name in ("correct_start", "go_late"):
        method = getattr(RedisBackend, name)

        async def slow(self: Any, *args: Any, _method: Any = method, **kwargs: Any) -> Any:
            await asyncio.sleep(delay)
            return await _method(self, *args, **kwargs)

        setattr(RedisBackend, name, slow)


def main(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        job = json.load(fh)
    settings = {
        "REMOTE_CONTROL_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "HTTPERROR_ALLOW_ALL": True,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        **job["settings"],
        "FEEDS": {job["items_out"]: {"format": "jsonlines"}},
        "FEED_EXPORT_BATCH_ITEM_COUNT": 0,
    }
    if job.get("slow_news"):
        _slow_news(float(job["slow_news"]))
    spider = FrontierCrawlSpider if job.get("spider") == "crawl" else FrontierSpider
    FrontierSpider.callback_s = float(job.get("callback_s") or 0.0)
    FrontierSpider.callback_log = job.get("callback_log") or ""
    if job.get("batch"):
        spider.redis_batch_size = int(job["batch"])
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider)
    barrier = job.get("barrier")
    if barrier:
        crawler.signals.connect(lambda: _barrier(**barrier), signal=signals.engine_started,
                                weak=False)
    process.crawl(crawler)
    process.start()


if __name__ == "__main__":
    main(sys.argv[1])
