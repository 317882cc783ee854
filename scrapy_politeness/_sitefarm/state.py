"""Mutable per-run server state shared by HTTP, DNS and control.

Kept in one object so POST /reset can clear everything at once.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

from scrapy_politeness._sitefarm.arrival import Arrival
from scrapy_politeness._sitefarm.ratelimit import TokenBucket
from scrapy_politeness._sitefarm.spec import FarmSpec


@dataclass
class FarmState:
    """Everything that changes while the farm serves."""

    spec: FarmSpec
    arrivals: list[Arrival] = field(default_factory=list)
    dns_queries: Counter[str] = field(default_factory=Counter)
    # name -> UDP queries received / left unanswered on purpose ("drop_first", "drop")
    dns_udp_seen: Counter[str] = field(default_factory=Counter)
    dns_dropped: Counter[str] = field(default_factory=Counter)
    # host -> its token bucket (rate_limited hosts)
    buckets: dict[str, TokenBucket] = field(default_factory=dict)
    # host -> how many status_script entries were consumed
    script_pos: Counter[str] = field(default_factory=Counter)
    # host -> how many A queries were answered in rotate mode
    rotate_pos: Counter[str] = field(default_factory=Counter)
    first_t: float | None = None  # the first request's arrival (outages count from it)
    _conn_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next_conn_id(self) -> int:
        """A fresh id per accepted TCP connection (never reused, even after reset)."""
        return next(self._conn_ids)

    def reset(self) -> None:
        """Forget arrivals, DNS counts and drops, rate-limit, status-script and rotation state."""
        self.arrivals.clear()
        self.dns_queries.clear()
        self.dns_udp_seen.clear()
        self.dns_dropped.clear()
        self.buckets.clear()
        self.script_pos.clear()
        self.rotate_pos.clear()
        self.first_t = None

    def sorted_arrivals(self) -> list[Arrival]:
        """Arrivals ordered by first-byte time (they are appended on completion)."""
        return sorted(self.arrivals, key=lambda a: (a.t, a.conn))
