"""robots.txt fetched when a host's first request is scheduled, not when it is sent.

Under ``ROBOTSTXT_OBEY`` Scrapy's ``RobotsTxtMiddleware`` fetches a host's
robots.txt when the host's first request reaches the downloader, and that
request waits for it inside the downloader (holding one of
``CONCURRENT_REQUESTS``), then waits again in the gate: the robots.txt fetch
spent the host's bucket, so the page starts one interval later. Asking the
robots middleware for the host's parser as soon as the request is scheduled
(``signals.request_scheduled``) moves all of that into the time the request
waits in the scheduler anyway: the first page is handed out one interval after
robots.txt started, with the host's Crawl-delay already known to the queue.

The robots.txt request itself still goes through every downloader middleware,
the gate included (it is the host's first start). At most ``limit`` fetches run
at once (half of ``CONCURRENT_REQUESTS``), so a crawl that schedules thousands
of new hosts does not open thousands of downloads; the rest wait here in
scheduling order, and a host's page handed out first simply fetches its
robots.txt the usual way (the middleware shares one fetch per netloc).

What waits here is the netloc (``scheme://netloc``), not the host's first
Request: that request belongs to the scheduler (on disk under ``JOBDIR``),
and the robots middleware needs only its scheme and netloc (a stand-in is made
when the fetch starts; a request carrying its own User-Agent is kept, for the
Crawl-delay rule it names). At most ``PENDING_MAX`` netlocs wait (paced, every
new host of a broad crawl waits here until the queue nears it); past that a
host fetches its robots.txt the usual way. The netlocs already seen are kept in
two generations of at most ``SEEN_MAX // 2`` each: when the newer one fills,
the older is forgotten, never all at once (a forgotten netloc costs a look in
the robots middleware's own map, no second fetch).

While a host name's robots.txt waits here or is being fetched, the scheduler
queue holds that host's requests (:meth:`RobotsPrefetch.hold`, from the host's
first request on) and takes them back when the fetch ends (``on_done``).
Handed out then, a page would wait for its robots.txt in a download slot and
then one interval in the gate. With the queue attached (:meth:`pace`) the
fetches are paced to the pages it hands out
(:mod:`scrapy_politeness.policy.robots_pacing`): fetched as soon as scheduled,
robots.txt answers, which skip the spider, ran far ahead of the pages, a broad
crawl's first part nearly all cheap robots.txt answers and its last part all
pages, its requests/s falling by half.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from scrapy_politeness.policy.robots_pacing import RobotsPacing
from scrapy_politeness.scrapy_internals import engine_closing

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.scheduler.heap_entries import HostEntry
    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["RobotsPrefetch"]

logger = logging.getLogger(__name__)

_SCHEMES = frozenset(("http", "https"))
SEEN_MAX = 200_000  # netlocs remembered (two generations); past that the middleware's map decides
PENDING_MAX = 50_000  # netlocs waiting for a fetch slot (a few hundred bytes each)
PACE_FLOOR = 32  # hosts ahead of the pages at least (CONCURRENT_REQUESTS when more)


def _now() -> float:
    """The event loop's clock (the queue's and the gate's)."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


class RobotsPrefetch:
    """Starts each new netloc's robots.txt fetch when its first request is scheduled."""

    def __init__(self, crawler: Crawler, stats: StatsCollector, limit: int) -> None:
        self.crawler = crawler
        self.stats = stats
        self.limit = max(1, limit)
        self.closed = False
        self._robots: RobotsTxtMiddleware | None = None
        self._offsite: OffsiteMiddleware | None = None
        self._looked_up = False
        self._seen: set[str] = set()  # the newer generation
        self._older: set[str] = set()
        self._pending: deque[str | Request] = deque()  # scheme://netloc (see the module)
        self._tasks: set[asyncio.Future[Any]] = set()
        self._busy: dict[str, int] = {}  # host name -> its netlocs pending or being fetched
        self._held: dict[str, str | list[str]] = {}  # host name -> the queue's key(s) held for it
        self.on_done: Callable[[str], float | None] | None = None  # a held key may go (its due)
        self._pacing: RobotsPacing | None = None  # with the queue: fetches paced to its pages
        self._floor = max(PACE_FLOOR, crawler.settings.getint("CONCURRENT_REQUESTS"))

    @classmethod
    def connect(cls, crawler: Crawler, settings: PolitenessSettings,
                stats: StatsCollector) -> RobotsPrefetch | None:
        """A prefetcher listening to ``request_scheduled``, when robots.txt is obeyed."""
        if not (settings.robots_prefetch and crawler.settings.getbool("ROBOTSTXT_OBEY")):
            return None
        limit = crawler.settings.getint("CONCURRENT_REQUESTS") // 2
        prefetch = cls(crawler, stats, limit)
        crawler.signals.connect(prefetch.scheduled, signal=signals.request_scheduled)
        return prefetch

    def _middleware(self) -> RobotsTxtMiddleware | None:
        if not self._looked_up:
            try:
                self._robots = self.crawler.get_downloader_middleware(RobotsTxtMiddleware)
                self._offsite = self.crawler.get_downloader_middleware(OffsiteMiddleware)
            except RuntimeError:  # the engine is not built yet: ask again next time
                return None
            self._looked_up = True
        return self._robots

    def scheduled(self, request: Request, **kwargs: Any) -> None:
        """``request_scheduled``: queue a fetch for a netloc not seen before."""
        if self.closed or request.meta.get("dont_obey_robotstxt"):
            return
        parsed = urlparse_cached(request)
        if parsed.scheme not in _SCHEMES or not parsed.netloc:
            return
        netloc = parsed.netloc
        if netloc in self._seen or netloc in self._older:
            return
        if self._middleware() is None:  # ROBOTSTXT_OBEY off, or another robots middleware
            return
        if self._is_offsite(request):  # dropped before the robots middleware would see it
            return
        if len(self._pending) >= PENDING_MAX:  # its page fetches it the usual way
            self.stats.inc_value("politeness/robots/not_prefetched")
            return
        if len(self._seen) >= SEEN_MAX // 2:  # the older half is forgotten, not all at once
            self._older = self._seen
            self._seen = set()
        self._seen.add(netloc)
        self._pending.append(request if b"User-Agent" in request.headers
                             else f"{parsed.scheme}://{netloc}")
        hostname = parsed.hostname
        if hostname is not None:
            self._busy[hostname] = self._busy.get(hostname, 0) + 1
        self._start()

    def busy(self, hostname: str | None) -> bool:
        """Whether ``hostname``'s robots.txt waits here or is being fetched."""
        return hostname in self._busy

    def pace(self, on_done: Callable[[str], float | None]) -> None:
        """The scheduler queue holds hosts for their robots.txt: ``on_done(key)`` puts
        a held host back and says when its first page is due; fetches are paced."""
        self.on_done = on_done
        self._pacing = RobotsPacing(self._floor)

    def starved(self) -> None:
        """The engine asked the queue and no host was ready: while hosts wait here,
        the downloader has room for one more host ahead (the pacing's capacity signal)."""
        pacing = self._pacing
        if pacing is not None and self._pending and not self.closed:
            pacing.starved(_now())
            self._start()

    def hold(self, host: HostEntry, *, serving: bool = False) -> bool:
        """Whether ``host`` waits (out of the queue's heaps) for its robots.txt;
        ``on_done(host.key)`` when that came. ``serving``: the queue hands out
        one of its requests unless it waits (counted by the pacing)."""
        hostname = host.hostname
        if hostname is None:
            return False
        if hostname not in self._busy:
            pacing = self._pacing
            if serving and pacing is not None and pacing.served(hostname, _now()) \
                    and self._pending:
                self._start()
            return False
        host.hold()
        key = host.key
        keys = self._held.get(hostname)
        if keys is None:
            self._held[hostname] = key  # the usual case: one key, no list
        elif isinstance(keys, str):
            if keys != key:
                self._held[hostname] = [keys, key]
        elif key not in keys:
            keys.append(key)
        return True

    def _release(self, hostname: str | None) -> None:
        """One fetch of ``hostname`` ended (or was not needed)."""
        if hostname is None:
            return
        n = self._busy.get(hostname, 0)
        if n > 1:
            self._busy[hostname] = n - 1
        elif n:
            del self._busy[hostname]
            keys = self._held.pop(hostname, ())
            on_done = self.on_done
            if on_done is None:
                return
            for key in (keys,) if isinstance(keys, str) else keys:
                due = on_done(key)
                if due is not None and self._pacing is not None:
                    self._pacing.fetched(hostname, due, _now())

    def _is_offsite(self, request: Request) -> bool:
        """Whether Scrapy's OffsiteMiddleware will drop ``request``.

        It runs before the robots middleware, so Scrapy never fetches an offsite
        host's robots.txt; neither may the prefetch. (Its own ``request_scheduled``
        handler may run after this one.)
        """
        offsite = self._offsite
        spider = self.crawler.spider
        if offsite is None or spider is None or request.dont_filter \
                or request.meta.get("allow_offsite"):
            return False
        return not offsite.should_follow(request, spider)

    def _start(self) -> None:
        robots = self._middleware()
        if engine_closing(self.crawler):  # a fetch started now would outlive the engine's slot
            self.close()
            return
        pacing = self._pacing
        now = _now() if pacing is not None else 0.0
        while robots is not None and self._pending and len(self._tasks) < self.limit \
                and not self.closed \
                and (pacing is None or pacing.room(now, len(self._tasks)) > 0):
            waiting = self._pending.popleft()
            request = Request(waiting + "/") if isinstance(waiting, str) else waiting
            hostname = urlparse_cached(request).hostname
            # One fetch per netloc, shared with the page's own wait. A coroutine in
            # Scrapy 2.19; a Deferred or the parser itself in older releases.
            try:
                parser: Any = robots.robot_parser(request)
            except Exception:  # a host held for it must not wait for ever
                logger.exception("politeness: robots.txt prefetch of %s failed", request.url)
                self._release(hostname)
                continue
            if isinstance(parser, Deferred):
                future: asyncio.Future[Any] = parser.asFuture(asyncio.get_running_loop())
            elif inspect.isawaitable(parser):
                future = asyncio.ensure_future(parser)
            else:  # already parsed: nothing to wait for
                self._release(hostname)
                continue
            self.stats.inc_value("politeness/robots/prefetched")
            self._tasks.add(future)
            future.add_done_callback(self._done_for(hostname))

    def _done_for(self, hostname: str | None) -> Callable[[asyncio.Future[Any]], None]:
        def done(future: asyncio.Future[Any]) -> None:
            self._release(hostname)
            self._done(future)
        return done

    def _done(self, future: asyncio.Future[Any]) -> None:
        self._tasks.discard(future)
        if not future.cancelled() and future.exception() is not None:
            # RobotsTxtMiddleware logs its own download errors; this is anything else.
            logger.debug("politeness: robots.txt prefetch failed: %r", future.exception())
        self._start()

    def close(self) -> None:
        """The spider closed: start nothing more."""
        self.closed = True
        self._pending.clear()
        self._busy.clear()
        self._held.clear()
        self._seen.clear()
        self._older.clear()
        if self._pacing is not None:
            self._pacing.clear()
