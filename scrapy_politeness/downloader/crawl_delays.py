"""What robots.txt asks for (the larger of Crawl-delay and 1/Request-rate), learnt per host.

Learnt when Scrapy's robots middleware parses a host's robots.txt
(``signals.robots_parsed``, once per netloc and crawl). The host table keeps it
while the host is in use and a while after (``policy.verdicts``), then forgets
it; a host that comes back later has it read again from the parser the robots
middleware keeps for the crawl (:meth:`CrawlDelays.relearn`), so the record
need not last as long as the crawl.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from scrapy_politeness.policy import crawl_delay_verdict

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
    from scrapy.robotstxt import RobotParser
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.distributed.sync import SharedSync
    from scrapy_politeness.downloader.dropped_hosts import DroppedHosts
    from scrapy_politeness.downloader.gate_driver import GateDriver
    from scrapy_politeness.downloader.host_keys import HostKeys
    from scrapy_politeness.observe.observer import Observer
    from scrapy_politeness.policy import HostTable
    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["CrawlDelays", "robots_delay"]

logger = logging.getLogger(__name__)


def _log_error(what: str, exc: BaseException) -> None:
    logger.warning("reading %s from robots.txt failed: %r", what, exc)


def robots_delay(robotparser: RobotParser, ua: str | bytes, *,
                 on_error: Callable[[str, BaseException], None] = _log_error,
                 ) -> float | None:
    """The larger of Crawl-delay and 1/Request-rate, when either is usable.

    ``RobotParser.crawl_delay`` is Scrapy's (2.18+); Request-rate is read from
    the parser backend where it exposes one (Protego, Python's robotparser).
    Garbage, NaN, infinite, zero and negative values give None. A parser
    that raises gives None too (a broken backend must not break the crawl),
    but is reported to ``on_error`` (the middleware logs and counts it).
    """
    candidates: list[float] = []
    try:
        delay = robotparser.crawl_delay(ua)
    except Exception as exc:
        on_error("Crawl-delay", exc)
        delay = None
    if delay is not None:
        candidates.append(delay)
    inner = getattr(robotparser, "rp", None)
    request_rate = getattr(inner, "request_rate", None)
    if callable(request_rate):
        try:
            rate = request_rate(ua if isinstance(ua, str) else ua.decode("latin-1"))
        except Exception as exc:
            on_error("Request-rate", exc)
            rate = None
        requests = getattr(rate, "requests", None)
        seconds = getattr(rate, "seconds", None)
        if requests and seconds:
            candidates.append(float(seconds) / float(requests))
    usable = [d for d in candidates if isinstance(d, (int, float)) and math.isfinite(d) and d > 0]
    return max(usable) if usable else None


class Gatekeeper(Protocol):
    """What learning a Crawl-delay touches: the middleware's parts, not the middleware."""

    keys: HostKeys
    settings: PolitenessSettings
    driver: GateDriver
    observer: Observer
    stats: StatsCollector
    dropped: DroppedHosts
    hosts: HostTable
    shared: SharedSync | None


class CrawlDelays:
    """Learns each host's Crawl-delay from robots.txt as Scrapy parses it.

    Connected to ``signals.robots_parsed``; above ``POLITENESS_MAX_CRAWL_DELAY``
    the policy ``POLITENESS_CRAWL_DELAY_OVER_MAX`` decides (skip: the host is
    parked for good; cap; honour).
    """

    def __init__(self, mw: Gatekeeper, crawler_settings: BaseSettings,
                 crawler: Crawler | None = None) -> None:
        self.mw = mw
        self._robots_ua: str | None = crawler_settings.get("ROBOTSTXT_USER_AGENT") or None
        self._default_ua: str = crawler_settings.get("USER_AGENT") or ""
        self._crawler = crawler if crawler_settings.getbool("ROBOTSTXT_OBEY") else None
        self._robots: RobotsTxtMiddleware | None = None
        self._looked_up = crawler is None

    async def relearn(self, request: Request) -> bool:
        """Read the Crawl-delay again for a host that has no state (first seen,
        or forgotten once idle); whether a parser was there to read.

        The robots middleware keeps each netloc's parser for the crawl and
        runs before this middleware, so for a request that obeys robots.txt
        the parser is already there: nothing is fetched or waited for. Called
        only for a host key without a state (a dict look-up per request).
        Raises ``IgnoreRequest`` when the host is parked again (a skipped Crawl-delay).
        """
        if request.meta.get("dont_obey_robotstxt"):
            return False  # the robots.txt request itself, or one that ignores it
        robots = self._middleware()
        if robots is None:
            return False
        parser: Any = robots.robot_parser(request)
        if isinstance(parser, Deferred):  # Scrapy < 2.19
            parser = await parser.asFuture(asyncio.get_running_loop())
        elif inspect.isawaitable(parser):
            parser = await parser
        if parser is None:
            return False
        self.parsed(parser, request, relearnt=True)
        hostname = urlparse_cached(request).hostname
        if hostname:  # a skipped Crawl-delay parks it again: this request is dropped too
            now = self.mw.driver.loop.time() if self.mw.driver.loop is not None else 0.0
            self.mw.dropped.check(self.mw.keys.key(hostname), now)
        return True

    def _middleware(self) -> RobotsTxtMiddleware | None:
        if not self._looked_up and self._crawler is not None:
            from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware

            try:
                self._robots = self._crawler.get_downloader_middleware(RobotsTxtMiddleware)
            except RuntimeError:  # the engine is not built yet
                return None
            self._looked_up = True
        return self._robots

    def parsed(self, robotparser: RobotParser, request: Request, *,
               relearnt: bool = False) -> None:
        """``robots_parsed``: apply what robots.txt asks (``relearnt``: read
        again for a host whose record was forgotten; counted apart)."""
        mw = self.mw
        hostname = urlparse_cached(request).hostname
        if not hostname:
            return
        ua = self._robots_ua or request.headers.get(b"User-Agent") or self._default_ua
        asked = robots_delay(robotparser, ua, on_error=self._error)
        if asked is None:
            return
        key = mw.keys.key(hostname)
        limit, over_max = mw.settings.max_crawl_delay, mw.settings.crawl_delay_over_max
        loop = mw.driver.loop
        now = loop.time() if loop is not None else 0.0
        delay = crawl_delay_verdict(asked, limit, over_max)
        over = limit is not None and asked > limit
        mw.observer.crawl_delay(now, key, asked, over_max if over else None)
        if relearnt:
            mw.stats.inc_value("politeness/crawl_delay_relearnt")
        if delay is None:
            if not relearnt:
                mw.stats.inc_value("politeness/crawl_delay_skipped_hosts")
            mw.dropped.park(key, now, math.inf,
                            f"politeness: {key} asks Crawl-delay {asked:g}s, above "
                            f"POLITENESS_MAX_CRAWL_DELAY={limit:g}s (policy 'skip')")
            return
        state = mw.hosts.get(key)
        if state.crawl_delay == 0 and not relearnt:
            mw.stats.inc_value("politeness/crawl_delay_hosts")
        if delay > state.crawl_delay:
            state.crawl_delay = delay
            if mw.shared is not None and loop is not None:
                mw.shared.set_crawl_delay(key, delay)
        mw.driver.retime(key)
        if loop is not None:
            mw.driver.pump()

    def _error(self, what: str, exc: BaseException) -> None:
        self.mw.stats.inc_value("politeness/robots/errors")
        logger.warning("politeness: reading %s from robots.txt failed: %r", what, exc)
