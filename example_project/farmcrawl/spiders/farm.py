"""The ``farm`` spider: crawl from start URLs, following links on each page.

Start URLs come from ``-a urls=URL1,URL2`` or, when absent, from the
environment variable ``FARM_URLS`` (comma separated)::

    scrapy crawl farm -a urls=http://alpha.farm.test:8080/,http://beta.farm.test:8080/
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Response, TextResponse


class FarmSpider(scrapy.Spider):
    name = "farm"

    def __init__(self, urls: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        raw = urls if urls is not None else os.environ.get("FARM_URLS", "")
        self.start_urls = [u.strip() for u in raw.split(",") if u.strip()]
        if not self.start_urls:
            raise ValueError("no start URLs: pass -a urls=URL1,URL2 or set FARM_URLS")

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
