"""What robots.txt asks for (the larger of Crawl-delay and 1/Request-rate), learnt per host."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from scrapy.utils.httpobj import urlparse_cached

from scrapy_politeness.policy import crawl_delay_verdict

if TYPE_CHECKING:
    from scrapy import Request
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

    def __init__(self, mw: Gatekeeper, crawler_settings: BaseSettings) -> None:
        self.mw = mw
        self._robots_ua: str | None = crawler_settings.get("ROBOTSTXT_USER_AGENT") or None
        self._default_ua: str = crawler_settings.get("USER_AGENT") or ""

    def parsed(self, robotparser: RobotParser, request: Request) -> None:
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
        if delay is None:
            mw.stats.inc_value("politeness/crawl_delay_skipped_hosts")
            mw.dropped.park(key, now, math.inf,
                            f"politeness: {key} asks Crawl-delay {asked:g}s, above "
                            f"POLITENESS_MAX_CRAWL_DELAY={limit:g}s (policy 'skip')")
            return
        state = mw.hosts.get(key)
        if state.crawl_delay == 0:
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
