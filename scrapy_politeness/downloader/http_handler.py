"""Scrapy's HTTP/1.1 download handler with idle connections bounded by concurrency and open files.

Idle kept-alive connections of hosts already crawled would otherwise stay
open 240 s each and end a broad crawl with "Too many open files"; the budget
is :func:`~scrapy_politeness.policy.idle_budget.idle_connection_budget`, the
least recently used idle connection closing first, so hosts still being
crawled keep theirs (a new TCP/TLS set-up would shift their timing).

The same pool shows when each request is written to its connection: Twisted's
agent writes it in the callback that hands the connection over, so a
callback added first is the write's instant (:mod:`.write_watch`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.utils.misc import load_object

from scrapy_politeness.downloader.write_watch import SENDING, WriteWatch
from scrapy_politeness.policy.idle_budget import idle_connection_budget
from scrapy_politeness.scrapy_internals import _BoundedIdlePool, bound_idle_connections

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

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


class _WatchedPool(_BoundedIdlePool):
    """The bounded pool, telling the crawl's :class:`WriteWatch` when the
    request being downloaded (``SENDING``) gets its connection: the agent's
    next callback writes it there."""

    watch: WriteWatch | None = None

    def getConnection(self, key: Any, endpoint: Any) -> Any:
        got = super().getConnection(key, endpoint)
        request = SENDING.get()
        if request is not None and self.watch is not None:
            got.addCallback(self._handed_over, request)  # before the agent's own
        return got

    def _handed_over(self, connection: Any, request: Request) -> Any:
        assert self.watch is not None
        try:
            self.watch.written(request)
        except Exception:  # never fail a download for its bookkeeping
            logger.exception("scrapy-politeness: a request's write could not be recorded")
        return connection


class BoundedIdleHTTP11DownloadHandler(HTTP11DownloadHandler):
    """``HTTP11DownloadHandler`` whose pool keeps at most a budget of idle
    connections and shows when each request is written."""

    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        budget = idle_connection_budget(open_files_limit(),
                                        crawler.settings.getint("CONCURRENT_REQUESTS"))
        if not bound_idle_connections(self, budget, _WatchedPool):
            logger.warning("scrapy-politeness: cannot bound Scrapy's idle connections "
                           "(its connection pool changed); a broad crawl may run out of "
                           "open files")
            return
        watch = WriteWatch.of(crawler)
        self._pool.watch = watch  # type: ignore[attr-defined]
        watch.cover(own_schemes(crawler, type(self)))

    async def download_request(self, request: Request, *args: Any) -> Response:
        token = SENDING.set(request)  # read by the pool while the agent asks it
        try:
            return await super().download_request(request, *args)
        finally:
            SENDING.reset(token)


def own_schemes(crawler: Any, cls: type) -> list[str]:
    """The HTTP schemes ``DOWNLOAD_HANDLERS`` gives to ``cls`` (or a subclass)."""
    handlers = crawler.settings.getwithbase("DOWNLOAD_HANDLERS")
    schemes = []
    for scheme in ("http", "https"):
        chosen = handlers.get(scheme)
        try:
            chosen = load_object(chosen) if isinstance(chosen, str) else chosen
        except (ImportError, ValueError, NameError):
            continue
        if isinstance(chosen, type) and issubclass(chosen, cls):
            schemes.append(scheme)
    return schemes
