"""Compact verdicts: what must outlive a host's full state once it went idle.

An idle host's ``HostState`` (a few hundred bytes) is evicted so memory follows
the active hosts. Three things it knew must not be forgotten with it, and are
kept as one small record keyed by the host key instead:

- *dead*: the instant of its last outcome or dropped request. The verdict lasts
  while requests keep coming for the host (each drop renews it), and ends
  ``ceiling + POLITENESS_IDLE_TTL`` after the last one (the rule Redis and the
  JOBDIR state already follow): the host then starts afresh and is declared
  dead again if it still is.
- *Crawl-delay*: robots.txt is fetched once per crawl (Scrapy's robots
  middleware keeps its parser), so what it asked is kept for the crawl: one
  float per host, the float object shared by every host that asked the same.
  ``inf`` is a Crawl-delay above the maximum with the ``skip`` policy: parked
  for good.
- *parked*: until the park ends, then for the idle time, as a full state is.

A record comes back as a full state the moment its host is looked up again
(``HostTable.get``/``peek``), so readers see one kind of state only. Records
are in insertion-ordered maps: expiring them pops from the front, O(expired).
"""

from __future__ import annotations

import math
from collections import OrderedDict

from scrapy_politeness.policy.idle_maps import refit

__all__ = ["Verdicts"]


class Verdicts:
    """Dead, Crawl-delay and park records of evicted hosts."""

    __slots__ = ("_dead", "_dead_high", "_delays", "_floats", "_parks", "_parks_high")

    def __init__(self) -> None:
        self._dead: OrderedDict[str, float] = OrderedDict()  # key -> since, oldest first
        self._parks: OrderedDict[str, float] = OrderedDict()  # key -> parked until
        self._delays: dict[str, float] = {}  # key -> Crawl-delay (inf: skipped for good)
        self._floats: dict[float, float] = {}  # one float object per distinct delay
        self._dead_high = self._parks_high = 0  # high-water marks (policy.idle_maps)

    def __len__(self) -> int:
        return len(self._dead) + len(self._parks) + len(self._delays)

    def __contains__(self, key: str) -> bool:
        return key in self._dead or key in self._delays or key in self._parks

    def counts(self) -> tuple[int, int, int]:
        """(dead, Crawl-delay, parked) records."""
        return len(self._dead), len(self._delays), len(self._parks)

    def keep(self, key: str, *, dead_since: float | None, crawl_delay: float,
             parked_until: float) -> None:
        """Record what an evicted host's state must not forget."""
        if dead_since is not None:
            self._dead[key] = dead_since
            self._dead.move_to_end(key)
        if math.isinf(parked_until):
            crawl_delay = math.inf  # a skipped Crawl-delay: parked for good
        elif parked_until > 0:
            self._parks[key] = parked_until
        if crawl_delay > 0:
            self._delays[key] = self._floats.setdefault(crawl_delay, crawl_delay)

    def take(self, key: str) -> tuple[float | None, float, float] | None:
        """Remove and return ``key``'s record: (dead since or None, Crawl-delay,
        parked until), or None when there is none."""
        if key not in self:
            return None
        since = self._dead.pop(key, None)
        delay = self._delays.pop(key, 0.0)
        parked = self._parks.pop(key, 0.0)
        if math.isinf(delay):
            return since, 0.0, math.inf
        return since, delay, parked

    def peek(self, key: str) -> tuple[float | None, float, float] | None:
        """``key``'s record without removing it (for saving)."""
        if key not in self:
            return None
        delay = self._delays.get(key, 0.0)
        parked = self._parks.get(key, 0.0)
        if math.isinf(delay):
            delay, parked = 0.0, math.inf
        return self._dead.get(key), delay, parked

    def hosts(self) -> list[str]:
        """Every host with a record (for saving with JOBDIR)."""
        return list({**dict.fromkeys(self._dead), **dict.fromkeys(self._parks),
                     **dict.fromkeys(self._delays)})

    def expire(self, dead_before: float, parks_before: float) -> int:
        """Forget dead verdicts last renewed at or before ``dead_before`` and parks
        that ended at or before ``parks_before``; Crawl-delays stay. Pops from the
        front of each map: the cost is the number forgotten (plus one)."""
        gone = 0
        self._dead_high = max(self._dead_high, len(self._dead))
        self._parks_high = max(self._parks_high, len(self._parks))
        for records, before in ((self._dead, dead_before), (self._parks, parks_before)):
            while records:
                key, at = next(iter(records.items()))
                if at > before:
                    break
                del records[key]
                gone += 1
        self._dead, self._dead_high = refit(self._dead, self._dead_high)
        self._parks, self._parks_high = refit(self._parks, self._parks_high)
        return gone
