"""What robots.txt asks for: the larger of Crawl-delay and 1/Request-rate."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.robotstxt import RobotParser

__all__ = ["robots_delay"]

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
