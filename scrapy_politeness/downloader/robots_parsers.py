"""Scrapy's robots.txt parsers kept while their host is in use, not for the whole crawl.

Scrapy's ``RobotsTxtMiddleware`` keeps each netloc's parser for the crawl: with
Protego, about 1 KB for a one-line robots.txt (a dozen containers), so a broad
crawl that meets a million hosts keeps a million parsers, most of hosts it will
never visit again. Here each parsed netloc is remembered in the order it was
parsed; the middleware's eviction pass pops those parsed before its cutoff
(the cost is what it pops, never a pass over every host) and drops the parser
of a host idle since ``PARSER_IDLE`` seconds (at most ``POLITENESS_IDLE_TTL``):
no start, no outcome, no next start or Retry-After ahead, no Crawl-delay, not
dead or parked (a host with a compact verdict keeps it; one the host table
forgot loses it), and no request of it waiting in the scheduler queue (a page
that waited there longer than a minute after its robots.txt would fetch it
again). Sooner than the host's own state: the parser is the largest thing a
host leaves behind, and a host crawled at all is touched far more often.
A host kept, or whose robots.txt is being fetched, is looked at again later. A
host that comes back has its robots.txt fetched again by the middleware, as at
its first visit, and its Crawl-delay learnt from it again (``signals.robots_parsed``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any

from scrapy.utils.httpobj import urlparse_cached

from scrapy_politeness.downloader.scrapy_maps import robots_parsers
from scrapy_politeness.policy.idle_maps import refit

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from scrapy_politeness.downloader.host_keys import HostKeys
    from scrapy_politeness.policy import HostTable

__all__ = ["PARSER_IDLE", "RobotsParsers"]

PARSER_IDLE = 60.0
"""Seconds a host is idle before its parser goes (as Scrapy forgets a download slot)."""


class RobotsParsers:
    """The robots middleware's parsers, forgotten with their hosts."""

    def __init__(self, crawler: Crawler | None, hosts: HostTable, keys: HostKeys,
                 clock: Callable[[], float]) -> None:
        self._crawler = crawler
        self.hosts, self.keys, self.clock = hosts, keys, clock
        self._parsed: OrderedDict[str, tuple[float, str]] = OrderedDict()  # netloc -> (at, host)
        self._high = 0
        self._map: dict[str, Any] | None = None
        self._looked_up = False
        self.dropped = 0  # parsers dropped so far (a stat)
        self.queues: list[Container[str]] = []  # host keys with requests in the scheduler queue

    def parsed(self, request: Request, **kwargs: Any) -> None:
        """``robots_parsed``: ``request``'s netloc has a parser now."""
        parts = urlparse_cached(request)
        if parts.hostname:
            self._parsed[parts.netloc] = (self.clock(), parts.hostname)
            self._parsed.move_to_end(parts.netloc)

    def __len__(self) -> int:
        return len(self._parsed)

    def evict(self, now: float, cutoff: float) -> int:
        """Drop the parsers of hosts parsed before ``cutoff`` and no longer known
        to the host table; the number dropped."""
        order = self._parsed
        parsers = self._parsers()
        if parsers is None:  # no robots middleware, or not Scrapy's map: keep nothing here
            order.clear()
            return 0
        gone = 0
        while order:
            netloc, (at, hostname) = next(iter(order.items()))
            if at > cutoff:
                break
            del order[netloc]
            if self._in_use(self.keys.key(hostname), cutoff) \
                    or not _settled(parsers.get(netloc)):
                order[netloc] = (now, hostname)  # in use: looked at again later
                continue
            if parsers.pop(netloc, None) is not None:
                gone += 1
        self._parsed, self._high = refit(order, self._high)
        self.dropped += gone
        return gone

    def _in_use(self, key: str, cutoff: float) -> bool:
        """Whether ``key``'s host was used after ``cutoff`` or must be remembered."""
        if any(key in queued for queued in self.queues):
            return True
        state = self.hosts.whole(key)
        if state is None:
            return key in self.hosts  # a compact verdict (dead, Crawl-delay, parked)
        return (state.touched > cutoff or state.not_before > cutoff or state.dead
                or state.crawl_delay > 0 or state.parked_until > cutoff
                or state.last_start + state.interval() > cutoff)

    def _parsers(self) -> dict[str, Any] | None:
        if not self._looked_up and self._crawler is not None:
            from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware

            try:
                middleware = self._crawler.get_downloader_middleware(RobotsTxtMiddleware)
            except RuntimeError:  # the engine is not built yet
                return None
            self._map = None if middleware is None else robots_parsers(middleware)
            self._looked_up = True
        return self._map


def _settled(parser: Any) -> bool:
    """Not a fetch in progress (Scrapy keeps a Deferred there until it is parsed)."""
    return not hasattr(parser, "addCallback")
