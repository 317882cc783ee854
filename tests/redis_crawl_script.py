"""One scrapy-redis crawler process: ``python redis_crawl_script.py job.json``.

scrapy-redis's shipped ``RedisSpider`` (or ``RedisCrawlSpider``: job
``"spider": "crawl"``) fed through its start URLs key with its default batch
(``CONCURRENT_REQUESTS``; job ``"batch"`` sets ``redis_batch_size``), with
scrapy-redis's scheduler and dupefilter; the job gives the settings (the
add-on picks the queue class). Items (the URLs fetched) go to a JSON-lines file as they come,
so a process killed mid-crawl still shows what it finished.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

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

    def parse(self, response: Response) -> Iterator[dict[str, Any]]:
        yield _item(response)


class FrontierCrawlSpider(RedisCrawlSpider):  # type: ignore[misc]
    name = "frontier"
    rules = (Rule(callback="parse_page", follow=False),)  # links of no page are followed

    def parse_start_url(self, response: Response) -> Iterator[dict[str, Any]]:
        yield _item(response)

    def parse_page(self, response: Response) -> Iterator[dict[str, Any]]:
        yield _item(response)


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
    spider = FrontierCrawlSpider if job.get("spider") == "crawl" else FrontierSpider
    if job.get("batch"):
        spider.redis_batch_size = int(job["batch"])
    process = CrawlerProcess(settings)
    process.crawl(spider)
    process.start()


if __name__ == "__main__":
    main(sys.argv[1])
