"""Run one real Scrapy crawl in its own process: ``python crawl_script.py job.json``.

The job file gives start URLs and settings; the crawl follows same-host links
and writes its final stats (JSON) where the job says. A process per crawl
keeps the reactor, the name resolver and Scrapy's global state per test.
"""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import sys
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response
from twisted.internet.error import DNSLookupError
from twisted.python.failure import Failure


class FarmSpider(scrapy.Spider):
    name = "farm"

    def __init__(self, urls: list[str], follow: bool = True, errback: bool = False,
                 meta: dict[str, Any] | None = None, dont_filter: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = urls
        self.follow = follow
        self.errback = self.failed if errback else None
        self.start_meta = meta or {}  # Request.meta of every start request
        self.dont_filter = dont_filter  # of every start request

    async def start(self) -> Any:
        for url in self.urls:
            yield scrapy.Request(url, dont_filter=self.dont_filter, errback=self.errback,
                                 meta=dict(self.start_meta))

    def failed(self, failure: Failure) -> Iterator[Any]:
        """With ``errback`` in the job: one item per request that ended in an error."""
        request = getattr(failure, "request", None)
        yield {"url": request.url if request is not None else None,
               "error": failure.type.__name__ if failure.type else None,
               "dns_error": failure.check(DNSLookupError) is not None}

    def parse(self, response: Response) -> Iterator[Any]:
        meta = response.meta.get("politeness") or {}
        yield {"url": response.url, "status": response.status, "ip": meta.get("ip"),
               "waited": meta.get("waited"), "interval": meta.get("interval")}
        if self.follow:
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.parse, errback=self.errback)


def dump_waits(*_: Any) -> None:
    """On SIGUSR1 (``crawling.run_crawl`` sends it to a crawl past its timeout):
    where each pending task waits, awaited frame by frame, and the requests the
    engine has in progress, so a hung crawl's log says what holds it."""
    out = sys.stderr
    print("==== crawl_script: pending tasks (SIGUSR1) ====", file=out)
    for task in asyncio.all_tasks(asyncio.get_event_loop()):
        print(f"task {task.get_name()}:", file=out)
        coro: Any = task.get_coro()
        while coro is not None:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if frame is not None:
                print(f"  {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}",
                      file=out)
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    from scrapy.core.engine import ExecutionEngine

    for engine in (o for o in gc.get_objects() if isinstance(o, ExecutionEngine)):
        slot = engine._slot
        if slot is not None:
            print(f"engine: closing={slot.closing is not None} in progress: "
                  f"{sorted(str(r) for r in slot.inprogress)[:20]}", file=out)
    print("==== end ====", file=out, flush=True)


def main(path: str) -> None:
    signal.signal(signal.SIGUSR1, dump_waits)
    with open(path, encoding="utf-8") as fh:
        job = json.load(fh)
    settings = {
        "REMOTE_CONTROL_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "HTTPERROR_ALLOW_ALL": True,
        **job["settings"],
        "FEEDS": {job["items_out"]: {"format": "jsonlines"}},
    }
    process = CrawlerProcess(settings)
    # e.g. custom_settings or download_delay: the spider's own ways to set settings
    spider_cls = type("FarmSpider", (FarmSpider,), job.get("spider_attrs") or {})
    crawler = process.create_crawler(spider_cls)
    process.crawl(crawler, urls=job["urls"], follow=job.get("follow", True),
                  errback=job.get("errback", False), meta=job.get("meta"),
                  **job.get("spider_args", {}))
    process.start()
    stats = {k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
             for k, v in crawler.stats.get_stats().items()}
    with open(job["stats_out"], "w", encoding="utf-8") as fh:
        json.dump(stats, fh)


if __name__ == "__main__":
    main(sys.argv[1])
