"""Start URLs for a process the frontier has nothing for now.

scrapy-redis reads a spider's start URLs (``RedisSpider.schedule_next_requests``,
a batch of ``CONCURRENT_REQUESTS``) only when its process is idle. With the
frontier a process whose queued hosts all wait for their buckets, or are
claimed by other processes, is not idle to Scrapy (``len(queue)`` > 0), so it
read nothing while the work it had could not start: one process fetched all
the pages and the others only asked. So a pop that finds nothing eligible
for this process now reads the next batch itself. A read that finds no start
URL costs four Redis commands; while they keep finding none, the pause before
the next one doubles (up to :data:`FEED_EMPTY_MAX`), and a read that finds
some starts over at :data:`FEED_EMPTY`.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy_politeness.scheduler.queue import clock

__all__ = ["FEED_EMPTY", "StartFeed"]

logger = logging.getLogger("scrapy_politeness.distributed.frontier")

FEED_EMPTY = 1.0  # after a read that found no start URL, the wait before the next one
FEED_EMPTY_MAX = 4.0  # the longest such wait, after several reads found none in a row


class StartFeed:
    """Reads the spider's start URLs on demand; counts what they pushed."""

    def __init__(self, spider: Any, stats: Any) -> None:
        self._read = getattr(spider, "schedule_next_requests", None)
        self._stats = stats
        self._after = 0.0
        self._pause = FEED_EMPTY  # the wait after the next read that finds none
        self.pushed = 0  # the queue counts its pushes here

    def starved(self) -> None:
        """Nothing eligible for this process now: read the next batch (while
        there is none, after a pause from :data:`FEED_EMPTY` s doubling up to
        :data:`FEED_EMPTY_MAX`)."""
        now = clock()
        if self._read is None or now < self._after:
            return
        before = self.pushed
        try:
            self._read()
        except Exception:  # the start key is the spider's business; its idle read retries
            logger.debug("politeness: reading the start URLs failed", exc_info=True)
        got = self.pushed - before
        if got:
            self._after, self._pause = now, FEED_EMPTY
            self._stats.inc_value("politeness/frontier/fed", got)
        else:
            self._after = now + self._pause
            self._pause = min(self._pause * 2.0, FEED_EMPTY_MAX)
