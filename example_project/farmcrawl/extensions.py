"""StatsToJson: dump the crawl's final stats to a JSON file.

Enabled through ``EXTENSIONS``; does nothing unless ``STATS_JSON_PATH`` is set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler


class StatsToJson:
    """Writes ``crawler.stats.get_stats()`` to STATS_JSON_PATH when the spider closes.

    Values JSON cannot hold (datetimes) are written with ``str()``.
    """

    def __init__(self, crawler: Crawler, path: str) -> None:
        self.crawler = crawler
        self.path = Path(path)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        path = crawler.settings.get("STATS_JSON_PATH")
        if not path:
            raise NotConfigured("STATS_JSON_PATH is not set")
        ext = cls(crawler, path)
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        return ext

    def spider_opened(self, spider: Spider) -> None:
        # Signal handlers run in the order they were connected, and extensions
        # are built before the engine and its downloader middlewares. Connecting
        # to spider_closed only now puts this handler after the politeness
        # middleware's, which stores ``politeness/report`` (POLITENESS_REPORT_STAT).
        self.crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        stats = self.crawler.stats.get_stats()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(stats, indent=2, default=str), encoding="utf-8")
