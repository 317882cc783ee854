"""Where the crawl sees a released request written to its connection.

A request the gate released reaches the wire later: Scrapy's downloader
starts it, Twisted's agent takes a connection from its pool (at once when one
is idle, after connecting otherwise) and writes the request to it in the very
callback that hands the connection over; the bytes leave on the loop's next
turn. Until then the request may wait any number of loop turns (a new
connection, a busy loop), so the send slip holds its buckets until it sees
that write (:class:`~scrapy_politeness.downloader.send_lateness.SendSlip`).

The plugin's HTTP handler (:mod:`.http_handler`) owns its pool, so it sees the
hand-over and tells this watch, one per crawler, which request it was. The
schemes the watch covers are those that handler downloads: a request of any
other scheme, or to another handler, is covered by the slip's turn count alone.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from scrapy.utils.httpobj import urlparse_cached

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

__all__ = ["SENDING", "WriteWatch"]

SENDING: ContextVar[Request | None] = ContextVar("politeness_sending", default=None)
"""The request the handler is downloading, while its connection is asked for."""

_WATCHES: weakref.WeakKeyDictionary[Any, WriteWatch] = weakref.WeakKeyDictionary()


class WriteWatch:
    """The writes of one crawler's requests, as its HTTP handler sees them."""

    __slots__ = ("__weakref__", "on_written", "schemes")

    def __init__(self) -> None:
        self.schemes: frozenset[str] = frozenset()  # empty: nothing is watched
        self.on_written: Callable[[Request], None] | None = None  # the middleware's Sender

    @classmethod
    def of(cls, crawler: Crawler) -> WriteWatch:
        """The watch of ``crawler`` (made on first use, by the handler or the middleware)."""
        watch = _WATCHES.get(crawler)
        if watch is None:
            watch = _WATCHES[crawler] = cls()
        return watch

    def cover(self, schemes: Collection[str]) -> None:
        """The handler downloads ``schemes`` and sees their writes."""
        self.schemes = self.schemes | frozenset(schemes)

    def watches(self, request: Request) -> bool:
        """Whether the write of ``request`` will be seen."""
        return bool(self.schemes) and urlparse_cached(request).scheme in self.schemes

    def written(self, request: Request) -> None:
        """The handler is writing ``request`` to its connection now."""
        if self.on_written is not None:
            self.on_written(request)
