"""Hosts whose requests are dropped instead of waiting: dead, or parked.

A dead host sat at the ceiling for ``POLITENESS_DEAD_AFTER`` fetches; a parked
one asked for a wait that would stall the crawl (a Retry-After above
``POLITENESS_MAX_RETRY_AFTER``, a skipped Crawl-delay). Their requests fail
with ``IgnoreRequest`` naming the reason, counted under ``politeness/dropped/``.

The reasons are kept for the last ``MAX_REASONS`` hosts given one; an older
host's drops say the plain "dead"/"parked" message (its verdict itself is in
the host table, as a compact record once idle). A dropped request of a dead
host renews its verdict: a host is remembered dead while requests keep coming.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

from scrapy_politeness.observe.live_line import plural
from scrapy_politeness.observe.observer import STATS

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.downloader.gate_driver import GateDriver
    from scrapy_politeness.observe.observer import Observer
    from scrapy_politeness.policy import HostState, HostTable

__all__ = ["MAX_REASONS", "DroppedHosts"]

MAX_REASONS = 1024
"""Drop reasons remembered (the newest); older hosts get the plain message."""


class DroppedHosts:
    """The drop decisions of one crawler and the reasons they give."""

    def __init__(self, hosts: HostTable, driver: GateDriver, observer: Observer,
                 stats: StatsCollector) -> None:
        self.hosts = hosts
        self.driver = driver
        self.observer = observer
        self.stats = stats
        self.reasons: OrderedDict[str, str] = OrderedDict()

    def check(self, key: str, now: float) -> None:
        """Raise ``IgnoreRequest`` for a request that must not wait: closing, dead, parked."""
        if self.driver.closing:  # after the close drain nothing may wait a full interval
            self.stats.inc_value(STATS + "dropped/closing")
            raise IgnoreRequest("politeness: spider closing")
        state = self.hosts.peek(key)
        if state is None:
            return
        if state.dead:
            self.hosts.touch(key, now)  # a dead verdict lasts while requests come
            self.stats.inc_value(STATS + "dropped/dead")
            raise IgnoreRequest(self.reasons.get(key, f"politeness: host {key} is dead"))
        if now < state.parked_until:
            self.stats.inc_value(STATS + "dropped/parked")
            raise IgnoreRequest(self.reasons.get(key, f"politeness: host {key} is parked"))

    def dead(self, key: str, reason: str) -> None:
        """``key`` was declared dead (here or by another crawler): drop its waiters."""
        self._remember(key, reason)
        self.driver.drop_host(key, reason, STATS + "dropped/dead")
        self.driver.retime(key)  # the scheduler queue hands its requests out now, to be dropped

    def died_here(self, now: float, key: str, state: HostState, interval: float) -> None:
        fetches = plural(self.hosts.dead_after, "fetch", "fetches")
        reason = (f"politeness: host {key} is dead (interval at the ceiling "
                  f"{state.config.ceiling:g}s for {fetches})")
        self.observer.died(now, key, state, interval, reason)
        self.dead(key, reason)

    def park(self, key: str, now: float, until: float, reason: str) -> None:
        """Drop the host's requests until ``until``: waiting that long would stall the crawl."""
        state = self.hosts.get(key)
        if until > state.parked_until:
            first = state.parked_until <= now
            state.parked_until = until
            self._remember(key, reason)
            self.observer.parked(now, key, until, reason, first=first)
        self.driver.drop_host(key, reason, STATS + "dropped/parked")
        self.driver.retime(key)  # the scheduler queue hands its requests out now, to be dropped

    def _remember(self, key: str, reason: str) -> None:
        reasons = self.reasons
        reasons[key] = reason
        reasons.move_to_end(key)
        if len(reasons) > MAX_REASONS:
            reasons.popitem(last=False)

    def prune(self, now: float) -> None:
        """Forget the reasons of hosts neither dead nor parked any more (or
        forgotten): at most ``MAX_REASONS`` looked at, whatever the hosts."""
        for key in [k for k in self.reasons if not self._dropping(k, now)]:
            del self.reasons[key]

    def _dropping(self, key: str, now: float) -> bool:
        state = self.hosts.whole(key)
        if state is not None:
            return state.dead or state.parked_until > now
        record = self.hosts.verdicts.peek(key)  # an idle host's compact verdict
        return record is not None and (record[0] is not None or record[2] > now)
