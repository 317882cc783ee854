"""What robots.txt asks for: the larger of Crawl-delay and 1/Request-rate."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.robotstxt import RobotParser

__all__ = ["robots_delay"]

logger = logging.getLogger(__name__)


def robots_delay(robotparser: RobotParser, ua: str | bytes) -> float | None:
    """The larger of Crawl-delay and 1/Request-rate, when either is usable.

    ``RobotParser.crawl_delay`` is Scrapy's (2.18+); Request-rate is read from
    the parser backend where it exposes one (Protego, Python's robotparser).
    Garbage, NaN, infinite, zero and negative values give None.
    """
    candidates: list[float] = []
    try:
        delay = robotparser.crawl_delay(ua)
    except Exception:  # a broken parser backend must not break the crawl
        logger.debug("crawl_delay() failed", exc_info=True)
        delay = None
    if delay is not None:
        candidates.append(delay)
    inner = getattr(robotparser, "rp", None)
    request_rate = getattr(inner, "request_rate", None)
    if callable(request_rate):
        try:
            rate = request_rate(ua if isinstance(ua, str) else ua.decode("latin-1"))
        except Exception:
            rate = None
        requests = getattr(rate, "requests", None)
        seconds = getattr(rate, "seconds", None)
        if requests and seconds:
            candidates.append(float(seconds) / float(requests))
    usable = [d for d in candidates if isinstance(d, (int, float)) and math.isfinite(d) and d > 0]
    return max(usable) if usable else None
