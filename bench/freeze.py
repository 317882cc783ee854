"""``gc.freeze()`` at spider open for any crawl, so stock Scrapy can be frozen too.

The plugin freezes its start-up heap only when ``POLITENESS_GC_FREEZE`` is on
(off by default: the collector is the host process's). To compare like with
like, ``bench.overhead`` runs a frozen pair beside the plain one: the plugin
with the setting on, and stock Scrapy with this extension.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import signals

from scrapy_politeness.downloader.gc_freeze import freeze_start_heap

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

EXTENSION = "bench.freeze.FreezeAtOpen"


class FreezeAtOpen:
    """Collect once and freeze the heap when the spider opens, as the plugin does."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        ext = cls()
        crawler.signals.connect(ext.spider_opened, signal=signals.spider_opened)
        return ext

    def spider_opened(self) -> None:
        freeze_start_heap()
