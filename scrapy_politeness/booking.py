"""The meta marker by which the scrapy-redis frontier tells the middleware a
request's start is already booked on the shared buckets.

The frontier's pop books the host and IP buckets in the same Redis script that
picks the request (:mod:`scrapy_politeness.frontier`); booking again in the
middleware would spend the budget twice. The local gate still enforces.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

__all__ = ["BOOKED_META", "booked_start", "start_as_booked"]

BOOKED_META = "politeness_booked"


def booked_start(request: Request, ip: str | None) -> float | None:
    """The start the frontier booked for this request (event-loop clock), or None.

    None unless it booked the host and exactly the IP bucket ``ip`` (None: no
    IP bucket) the gate uses: a name that resolved differently since is
    booked by the middleware as usual. The value is ``{"ip": ..., "at": ...}``.
    """
    booked = request.meta.get(BOOKED_META)
    if not isinstance(booked, dict) or booked.get("ip") != ip:
        return None
    at = booked.get("at")
    return float(at) if isinstance(at, (int, float)) else None


async def start_as_booked(booked: float, loop: asyncio.AbstractEventLoop, shared: bool,
                          margin: float, stats: StatsCollector) -> float | None:
    """Sleep until the start the frontier booked; None when it must be booked afresh.

    A request that reached the middleware after its booked start (DNS, a busy
    loop) would crowd the next booking if sent now: with a shared backend it
    is booked again (conservative).
    """
    now = loop.time()
    if shared and now > booked + margin:
        stats.inc_value("politeness/frontier/rebooked")
        return None
    if booked > now:
        await asyncio.sleep(booked - now)
    return booked
