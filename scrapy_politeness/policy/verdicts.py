"""Compact verdicts: what must outlive a host's full state once it went idle.

An idle host's ``HostState`` (a few hundred bytes) is evicted so memory follows
the active hosts. Three things it knew must not be forgotten with it, and are
kept as one small record keyed by the host key instead:

- *dead*: the instant of its last outcome or dropped request. The verdict lasts
  while requests keep coming for the host (each drop renews it), and ends
  ``ceiling + POLITENESS_IDLE_TTL`` after the last one (the rule Redis and the
  JOBDIR state already follow): the host then starts afresh and is declared
  dead again if it still is.
- *Crawl-delay*: kept like a dead verdict, ``ceiling + POLITENESS_IDLE_TTL``
  after the host's last use (the float object shared by every host that asked
  the same). A host that comes back later has it re-read from robots.txt as
  Scrapy's robots middleware keeps it parsed (``downloader.crawl_delays``), so
  the record need not outlive the host's use. ``inf`` is a Crawl-delay above
  the maximum with the ``skip`` policy: parked for good.
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

    __slots__ = ("_dead", "_dead_high", "_delay_high", "_delay_since", "_delays", "_floats",
                 "_parks", "_parks_high")

    def __init__(self) -> None:
        self._dead: OrderedDict[str, float] = OrderedDict()  # key -> since, oldest first
        self._parks: OrderedDict[str, float] = OrderedDict()  # key -> parked until
        self._delays: dict[str, float] = {}  # key -> Crawl-delay (inf: skipped for good)
        self._delay_since: OrderedDict[str, float] = OrderedDict()  # key -> last use, oldest first
        self._floats: dict[float, float] = {}  # one float object per distinct delay
        self._dead_high = self._parks_high = self._delay_high = 0  # (policy.idle_maps)

    def __len__(self) -> int:
        return len(self._dead) + len(self._parks) + len(self._delays)

    def __contains__(self, key: str) -> bool:
        return key in self._dead or key in self._delays or key in self._parks

    def counts(self) -> tuple[int, int, int]:
        """(dead, Crawl-delay, parked) records."""
        return len(self._dead), len(self._delays), len(self._parks)

    def keep(self, key: str, *, dead_since: float | None, crawl_delay: float,
             parked_until: float, used_at: float = 0.0) -> None:
        """Record what an evicted host's state must not forget (``used_at``: the
        host's last use, from which its Crawl-delay record lasts)."""
        if dead_since is not None:
            self._dead[key] = dead_since
            self._dead.move_to_end(key)
        if math.isinf(parked_until):
            crawl_delay = math.inf  # a skipped Crawl-delay: parked for good
        elif parked_until > 0:
            self._parks[key] = parked_until
        if crawl_delay > 0:
            self._delays[key] = self._floats.setdefault(crawl_delay, crawl_delay)
            self._delay_since[key] = used_at
            self._delay_since.move_to_end(key)

    def take(self, key: str) -> tuple[float | None, float, float] | None:
        """Remove and return ``key``'s record: (dead since or None, Crawl-delay,
        parked until), or None when there is none."""
        if key not in self:
            return None
        since = self._dead.pop(key, None)
        delay = self._delays.pop(key, 0.0)
        self._delay_since.pop(key, None)
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

    def expire(self, dead_before: float, parks_before: float,
               delays_before: float = -math.inf) -> int:
        """Forget dead verdicts last renewed at or before ``dead_before``, parks
        that ended at or before ``parks_before`` and Crawl-delays of hosts last
        used at or before ``delays_before``. Pops from the front of each map:
        the cost is the number forgotten (plus one)."""
        gone = 0
        self._dead_high = max(self._dead_high, len(self._dead))
        self._parks_high = max(self._parks_high, len(self._parks))
        self._delay_high = max(self._delay_high, len(self._delays))
        for records, before in ((self._dead, dead_before), (self._parks, parks_before),
                                (self._delay_since, delays_before)):
            while records:
                key, at = next(iter(records.items()))
                if at > before:
                    break
                del records[key]
                if records is self._delay_since:
                    del self._delays[key]
                gone += 1
        self._dead, self._dead_high = refit(self._dead, self._dead_high)
        self._parks, self._parks_high = refit(self._parks, self._parks_high)
        if len(self._delays) * 4 < self._delay_high:
            self._floats = {d: d for d in self._delays.values()}  # the delays still asked
        self._delays, _ = refit(self._delays, self._delay_high)
        self._delay_since, self._delay_high = refit(self._delay_since, self._delay_high)
        return gone
