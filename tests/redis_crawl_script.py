"""One scrapy-redis crawler process: ``python redis_crawl_script.py job.json``.

A ``RedisSpider`` fed through scrapy-redis's start URLs key, with scrapy-redis's
scheduler and dupefilter; the job gives the settings (the add-on picks the
queue class). Items (the URLs fetched) go to a JSON-lines file as they come,
so a process killed mid-crawl still shows what it finished.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from scrapy.crawler import CrawlerProcess
from scrapy.http import Response
from scrapy_redis.spiders import RedisSpider


class FrontierSpider(RedisSpider):  # type: ignore[misc]
    name = "frontier"
    # scrapy-redis 0.9.1 takes a batch of start URLs only when a process idles;
    # the first process moves them all into the shared queue at once.
    redis_batch_size = 100000

    def parse(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"url": response.url, "status": response.status,
               "booked": response.meta.get("politeness_booked"),
               "politeness": response.meta.get("politeness")}


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
    process = CrawlerProcess(settings)
    process.crawl(FrontierSpider)
    process.start()


if __name__ == "__main__":
    main(sys.argv[1])
