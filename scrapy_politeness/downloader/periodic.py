"""The middleware's periodic chores, every quarter second of the crawl.

Scrapy closes a spider while requests still wait in the gate; nothing wakes
those waiters but a timer, so the periodic tick notices the engine closing and drops
them at once (a prompt close). The same tick feeds the live log line and,
now and then, evicts the state of hosts, IPs and names idle for longer than
``POLITENESS_IDLE_TTL``, the robots middleware's parsers of hosts idle a
minute and Scrapy's download slots idle for ``SLOT_IDLE``, so a broad crawl's
memory follows its working set.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from scrapy import signals

from scrapy_politeness.downloader.robots_parsers import PARSER_IDLE, RobotsParsers
from scrapy_politeness.downloader.scrapy_maps import drop_idle_slots
from scrapy_politeness.downloader.signal_hub import SignalHub
from scrapy_politeness.scrapy_internals import engine_closing

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

    from scrapy_politeness.dns.cache import DnsCache
    from scrapy_politeness.downloader.dropped_hosts import DroppedHosts
    from scrapy_politeness.downloader.gate_driver import GateDriver, Waiter
    from scrapy_politeness.downloader.host_keys import HostKeys
    from scrapy_politeness.downloader.suspended_hosts import SuspendedHosts
    from scrapy_politeness.observe.observer import Observer
    from scrapy_politeness.policy import Gate, HostTable, IPTable
    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["PeriodicTasks"]

EVERY = 0.25
"""Seconds between two ticks."""
SLOT_IDLE = 10.0
"""Seconds after its last transfer a Scrapy download slot is forgotten at the eviction
pass (Scrapy's own collection: 60 s, once a minute)."""


class PeriodicTasks:
    """A timer on the event loop: the closing engine, the log line, eviction."""

    def __init__(self, crawler: Crawler, settings: PolitenessSettings, *, gate: Gate[Waiter],
                 driver: GateDriver, hosts: HostTable, ips: IPTable, dns: DnsCache,
                 keys: HostKeys, dropped: DroppedHosts, observer: Observer,
                 suspended: SuspendedHosts | None = None,
                 on_closing: Callable[[str], None],
                 chores: Callable[[float], None] | None = None) -> None:
        self.crawler = crawler
        self.settings = settings
        self.gate, self.driver, self.hosts, self.ips = gate, driver, hosts, ips
        self.dns, self.keys, self.dropped, self.observer = dns, keys, dropped, observer
        self.suspended = suspended
        self.on_closing = on_closing
        self.chores = chores  # every tick (the slots' sweep and watchdog)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_evict = 0.0
        self.robots = RobotsParsers(crawler, hosts, keys, self._now)
        SignalHub.of(crawler).on(signals.robots_parsed, self.robots.parsed)

    def _now(self) -> float:
        return self._loop.time() if self._loop is not None else 0.0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._timer = loop.call_later(EVERY, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        assert self._loop is not None
        self._timer = None
        if engine_closing(self.crawler):
            self.on_closing("politeness: spider closing")
            return
        now = self._loop.time()
        waiters = self.driver.waiters
        if self.chores is not None:
            self.chores(now)
        self.observer.tick(now, self.gate.waiting, next(iter(waiters.values()), None))
        if now - self._last_evict >= min(30.0, self.settings.idle_ttl / 4):
            self._last_evict = now
            self.evict(now)
        self._timer = self._loop.call_later(EVERY, self._tick)

    def evict(self, now: float) -> None:
        """Forget what has been idle longer than ``POLITENESS_IDLE_TTL``."""
        cutoff = now - self.settings.idle_ttl
        self.hosts.evict(cutoff)
        if self.robots.evict(now, now - min(PARSER_IDLE, self.settings.idle_ttl)):
            self.crawler.stats.set_value("politeness/robots/parsers_dropped",
                                         self.robots.dropped)
        slots = drop_idle_slots(self.crawler, time.monotonic() - SLOT_IDLE)
        if slots:
            self.crawler.stats.inc_value("politeness/download_slots_dropped", slots)
        if self.suspended is not None:
            self.suspended.prune(cutoff)
        self.dropped.prune(now)
        self.ips.evict(now - self.settings.send_margin)
        self.dns.evict(cutoff)
        self.keys.trim()
        self.observer.sync_dns_stats(self.dns)
