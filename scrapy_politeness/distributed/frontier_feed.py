"""Start URLs for a process the frontier has nothing for now.

scrapy-redis reads a spider's start URLs (``RedisSpider.schedule_next_requests``,
a batch of ``CONCURRENT_REQUESTS``) only when its process is idle. With the
frontier a process whose queued hosts all wait for their buckets, or are
claimed by other processes, is not idle to Scrapy (``len(queue)`` > 0), so it
read nothing while the work it had could not start: one process fetched all
the pages and the others only asked. So a pop that finds nothing eligible
for this process now reads the next batch itself.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy_politeness.scheduler.queue import clock

__all__ = ["FEED_EMPTY", "StartFeed"]

logger = logging.getLogger("scrapy_politeness.distributed.frontier")

FEED_EMPTY = 1.0  # after a read that found no start URL, the wait before the next one


class StartFeed:
    """Reads the spider's start URLs on demand; counts what they pushed."""

    def __init__(self, spider: Any, stats: Any) -> None:
        self._read = getattr(spider, "schedule_next_requests", None)
        self._stats = stats
        self._after = 0.0
        self.pushed = 0  # the queue counts its pushes here

    def starved(self) -> None:
        """Nothing eligible for this process now: read the next batch (at most
        every :data:`FEED_EMPTY` s while there is none)."""
        now = clock()
        if self._read is None or now < self._after:
            return
        before = self.pushed
        try:
            self._read()
        except Exception:  # the start key is the spider's business; its idle read retries
            logger.debug("politeness: reading the start URLs failed", exc_info=True)
        got = self.pushed - before
        self._after = now if got else now + FEED_EMPTY
        if got:
            self._stats.inc_value("politeness/frontier/fed", got)
