"""A downloader middleware that makes some sends leave late, for the fleet tests.

For the URLs whose last path segment is an even number it holds the request
``LATE_SEND_S`` seconds (default 0.08). After the politeness middleware
(priority 960 > 950) that is the slip a busy machine puts between the gate's
release and the bytes leaving; before it (940), a popped request that reaches
the gate after the instant its pop booked. Made deterministic; the event loop
keeps running (an ``asyncio.sleep``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler


class LateSend:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler.settings.getfloat("LATE_SEND_S", 0.08))

    async def process_request(self, request: Request) -> None:
        last = request.url.rstrip("/").rsplit("/", 1)[-1]
        if last.isdigit() and int(last) % 2 == 0:
            await asyncio.sleep(self.delay)
