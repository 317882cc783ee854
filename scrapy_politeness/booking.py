"""The meta marker by which the scrapy-redis frontier tells the middleware a
request's start is already booked on the shared buckets.

The frontier's pop books the host and IP buckets in the same Redis script that
picks the request (:mod:`scrapy_politeness.frontier`); booking again in the
middleware would spend the budget twice. The local gate still enforces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy import Request

__all__ = ["BOOKED_META", "booked_by_frontier"]

BOOKED_META = "politeness_booked"
_ABSENT = object()


def booked_by_frontier(request: Request, ip: str | None) -> bool:
    """True when the frontier booked this request's host and exactly this IP bucket.

    ``ip`` is the bucket the gate released it under (None: no IP bucket). A
    different one (the name resolved elsewhere since) is booked as usual.
    """
    return bool(request.meta.get(BOOKED_META, _ABSENT) == ip)
