"""The ``farm`` spider: crawl from start URLs, following links on each page.

Start URLs come from ``-a urls=URL1,URL2`` or, when absent, from the
environment variable ``FARM_URLS`` (comma separated)::

    FARM_DNS=127.0.0.1:5353 scrapy crawl farm -a urls=http://alpha.farm.test:8080/

``FARM_DNS`` is the demo farm's DNS server (its names exist nowhere else;
``make demo`` sets both). Without start URLs, or with ``FARM_DNS`` naming a
demo farm that does not answer, the crawl does not start: one ERROR line, and
``scrapy crawl`` exits with 1.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Response, TextResponse

from scrapy_politeness.startup import refuse_to_start


class FarmSpider(scrapy.Spider):
    name = "farm"

    def __init__(self, urls: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        raw = urls if urls is not None else os.environ.get("FARM_URLS", "")
        self.start_urls = [u.strip() for u in raw.split(",") if u.strip()]
        if not self.start_urls:
            refuse_to_start("no start URLs: pass -a urls=URL1,URL2 or set FARM_URLS")
        farm_dns = os.environ.get("FARM_DNS")
        if farm_dns:  # the demo farm's DNS server: its names exist nowhere else
            host, _, port = farm_dns.rpartition(":")
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
            except (OSError, ValueError):
                refuse_to_start(f"The demo farm does not answer at FARM_DNS={farm_dns}: is "
                                "the farm running? (make demo starts one and crawls it)")

    async def start(self) -> AsyncIterator[Any]:
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: Response) -> Iterator[Any]:
        # Set by the politeness middleware on every request it let through.
        meta = response.meta.get("politeness", {})
        yield {
            "url": response.url,
            "status": response.status,
            "ip": meta.get("ip"),
            "waited": meta.get("waited"),
            "interval": meta.get("interval"),
        }
        if isinstance(response, TextResponse):  # error pages may not be text
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, callback=self.parse)
