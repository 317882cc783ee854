"""The watchdog that should never be needed: a host wedged by a lost slot.

Every request the gate lets through is given back exactly once
(:mod:`.slot_tickets`). Should a way to end a download ever slip past that, the
host's in-flight count would stay up with nothing in flight, and its waiting
requests would wait for ever. So, at most once a second: a host whose oldest
waiting request has waited longer than its interval plus the download timeout,
while the gate counts more of its requests in flight than Scrapy's downloader
holds, on two looks in a row (a release on its way to its request is in that
gap for a loop turn), gets the difference back, with one WARNING naming it and
the count in ``politeness/watchdog_released``. A silent hang becomes a visible
bug report.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from scrapy_politeness.observe.observer import STATS

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.downloader.gate_driver import GateDriver, Waiter
    from scrapy_politeness.policy import Gate, HostTable

__all__ = ["EVERY", "Watchdog"]

logger = logging.getLogger("scrapy_politeness.middleware")

EVERY = 1.0
"""Seconds between two looks (the periodic tasks tick more often)."""


class Watchdog:
    """Frees the slots the gate holds for requests Scrapy no longer has.

    ``live()`` gives host key -> requests holding a slot that are still in
    Scrapy's downloader; ``timeout`` is the download timeout (seconds).
    """

    def __init__(self, gate: Gate[Waiter], driver: GateDriver, hosts: HostTable,
                 stats: StatsCollector, *, timeout: float,
                 live: Callable[[], Counter[str]]) -> None:
        self.gate, self.driver, self.hosts, self.stats = gate, driver, hosts, stats
        self.timeout = timeout
        self.live = live
        self._next = 0.0
        self._suspects: dict[str, int] = {}  # key -> slots missing at the last look

    def check(self, now: float) -> list[str]:
        """The host keys freed now (normally none)."""
        if now < self._next:
            return []
        self._next = now + EVERY
        waiters = self.driver.waiters
        oldest = next(iter(waiters.values()), None)  # the first submitted still waiting
        if oldest is None or now - oldest <= self.timeout:
            if self._suspects:
                self._suspects = {}
            return []  # the common case: O(1)
        live: Counter[str] | None = None
        suspects, self._suspects = self._suspects, {}
        freed = []
        for key, head in self.gate.blocked_heads():
            since = waiters.get(head)
            if since is None or now - since <= self.hosts.get(key).interval() + self.timeout:
                continue
            if live is None:
                live = self.live()
            lost = self.gate.in_flight(key) - live.get(key, 0)
            if lost <= 0:
                continue
            self._suspects[key] = lost
            lost = min(lost, suspects.get(key, 0))
            if lost <= 0:
                continue  # look again in a second
            del self._suspects[key]
            logger.warning("politeness watchdog: host %s had requests waiting %.0fs with %d "
                           "of its in-flight slots held by no request Scrapy is downloading; "
                           "freeing them (a bug: please report it)", key, now - since, lost)
            self.stats.inc_value(STATS + "watchdog_released", lost)
            for _ in range(lost):
                self.gate.done(key)
            freed.append(key)
        if freed:
            self.driver.pump(now)
        return freed
