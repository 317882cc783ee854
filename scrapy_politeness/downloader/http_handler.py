"""Scrapy's HTTP/1.1 download handler with idle connections bounded by concurrency and open files.

Idle kept-alive connections of hosts already crawled would otherwise stay
open 240 s each and end a broad crawl with "Too many open files"; the budget
is :func:`~scrapy_politeness.policy.idle_budget.idle_connection_budget`, the
least recently used idle connection closing first, so hosts still being
crawled keep theirs (a new TCP/TLS set-up would shift their timing).
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

from scrapy_politeness.policy.idle_budget import idle_connection_budget
from scrapy_politeness.scrapy_internals import bound_idle_connections

__all__ = ["BoundedIdleHTTP11DownloadHandler", "open_files_limit"]

logger = logging.getLogger(__name__)


def open_files_limit() -> int | None:
    """The process's soft open-file limit; None if unlimited or unknown."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


class BoundedIdleHTTP11DownloadHandler(HTTP11DownloadHandler):
    """``HTTP11DownloadHandler`` whose pool keeps at most a budget of idle connections."""

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        budget = idle_connection_budget(open_files_limit(),
                                        crawler.settings.getint("CONCURRENT_REQUESTS"))
        if not bound_idle_connections(self, budget):
            logger.warning("scrapy-politeness: cannot bound Scrapy's idle connections "
                           "(its connection pool changed); a broad crawl may run out of "
                           "open files")
