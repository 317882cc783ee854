"""What the plugin tells people: stats, the trace, the live log line, the report.

One observer per crawler, fed by the middleware at each decision. The trace is
None when off, and that one test is all the hot path pays for it
(docs/usage/observability.md). Where requests wait it reads from the scheduler
queues (each registers with :meth:`Observer.watch`) and the gate: per live
line O(hosts with requests waiting), per tick O(1).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Protocol

from scrapy_politeness.observe.holding import hold_state, holders, holders_text
from scrapy_politeness.observe.live_line import (
    PeriodWaits,
    Snapshot,
    report_text,
    snapshot,
    where_text,
)
from scrapy_politeness.observe.trace import TraceWriter

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterator

    from scrapy import Spider
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.dns.cache import DnsCache
    from scrapy_politeness.policy import HostState, HostTable, Outcome
    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["STATS", "Observer", "SchedulerWaiting", "WaitingHosts"]

logger = logging.getLogger("scrapy_politeness.middleware")

STATS = "politeness/"


class WaitingHosts(Protocol):
    """Where requests wait per host: the scheduler queue's waits, the gate."""

    def waiting_hosts(self) -> Iterator[tuple[str, int, float]]:
        """(key, requests waiting, since when it has had some), per host with some."""
        ...

    def waiting_host_count(self) -> int:
        """Hosts with requests waiting (O(1); may count hosts about to be)."""
        ...


class SchedulerWaiting(WaitingHosts, Protocol):
    """A scheduler queue's waits: also the request-seconds waited there."""

    total: float

    def credit(self, now: float) -> None:
        """Hand every host's waits so far to its state."""
        ...

    def queued(self, key: str) -> bool:
        """Whether ``key`` has requests queued there."""
        ...


class Observer:
    """Stats under ``politeness/``, the JSONL trace, the log line and the report."""

    def __init__(self, settings: PolitenessSettings, stats: StatsCollector,
                 hosts: HostTable, gate: WaitingHosts | None = None) -> None:
        self.settings = settings
        self.stats = stats
        self.hosts = hosts
        self.gate = gate
        self.queues: list[SchedulerWaiting] = []  # the scheduler queues' waits (memory, disk)
        self._last_tick = self._last_line = math.inf
        self.trace: TraceWriter | None = None
        self.start = 0.0  # the crawl start on the loop's clock (trace times)
        self.waits = PeriodWaits()
        self.next_log = math.inf
        # (hosts suspended, of which probed) for the live line; set by the middleware
        self.suspended: Callable[[float], tuple[int, int]] | None = None
        self.breaker: Container[str] = ()  # the suspended hosts' keys; set with the above

    def watch(self, queue: SchedulerWaiting) -> None:
        """Read ``queue``'s waits too (a scheduler queue registers itself)."""
        self.queues.append(queue)

    def open(self, spider: Spider, now: float) -> None:
        self.start = self._last_tick = self._last_line = now
        if self.settings.log_interval > 0:
            self.next_log = now + self.settings.log_interval
        if self.settings.trace is None:
            return
        c = self.settings.config
        try:
            self.trace = TraceWriter(
                self.settings.trace, start=now, max_buffer=self.settings.trace_buffer,
                header={"spider": spider.name, "default": c.default, "floor": c.floor,
                        "ceiling": c.ceiling, "ip_floor": c.ip_floor})
        except OSError as exc:
            logger.error("politeness: cannot open POLITENESS_TRACE=%r: %s; no trace",
                         self.settings.trace, exc)
        else:
            logger.info("politeness: tracing decisions to %s", self.settings.trace)

    # -- decisions -----------------------------------------------------------

    def dispatched(self, now: float, key: str, state: HostState, *, ip: str | None,
                   url: str, waited: float, interval: float) -> None:
        state.requests += 1
        state.waited += waited
        if waited > 0:
            self.stats.inc_value(STATS + "waits")
            self.stats.inc_value(STATS + "wait_seconds", waited)  # type: ignore[arg-type]
        self.stats.inc_value(STATS + "dispatched")
        self.waits.add(waited)
        if self.trace is not None:
            self.trace.dispatch(now, key, ip=ip, url=url, waited=waited, interval=interval)

    def fed_back(self, now: float, key: str, state: HostState, outcome: Outcome,
                 cause: str | None, *, ip: str | None, status: int,
                 retry_after: float | None, latency: float) -> None:
        if cause is not None:
            self.stats.inc_value(STATS + "backoff/" + cause)
            if state.backoffs is None:
                state.backoffs = {}
            state.backoffs[cause] = state.backoffs.get(cause, 0) + 1
        if self.trace is not None:
            self.trace.feedback(now, key, ip=ip, status=status, retry_after=retry_after,
                                latency=latency, before=outcome.before, after=outcome.after,
                                cause=cause)

    def died(self, now: float, key: str, state: HostState, interval: float,
             reason: str) -> None:
        self.stats.inc_value(STATS + "dead_hosts")
        if self.trace is not None:
            self.trace.dead(now, key, interval, reason)
        n = self.hosts.dead_after
        logger.warning("Host %s declared dead: its interval stayed at the ceiling "
                       "(%ss) for %s consecutive %s; dropping its requests",
                       key, state.config.ceiling, n, "fetch" if n == 1 else "fetches")

    def parked(self, now: float, key: str, until: float, reason: str, *, first: bool) -> None:
        if first:
            logger.warning("%s; dropping its requests", reason)
            self.stats.inc_value(STATS + "parked_hosts")
        if self.trace is not None:
            self.trace.parked(now, key, until, reason)

    def crawl_delay(self, now: float, key: str, delay: float, over: str | None) -> None:
        if self.trace is not None:
            self.trace.crawl_delay(now, key, delay, over)

    # -- now and then, and at the end -----------------------------------------

    def tick(self, now: float, waiting: int, oldest: float | None) -> None:
        """Every periodic tick: flush the trace; the live log line when it is due."""
        if self.trace is not None:
            self.trace.tick(now)
        self._count_alone(now)
        if now >= self.next_log:
            self.next_log = now + self.settings.log_interval
            if logger.isEnabledFor(logging.INFO):
                self.live_line(now, waiting, oldest).log(logger)
            else:
                self.waits.take()
            self._last_line = now

    def _count_alone(self, now: float) -> None:
        """Credit the tick to the host whose requests are the only ones waiting, if
        one is: O(1) unless at most two hosts have requests waiting."""
        elapsed, self._last_tick = now - self._last_tick, now
        if not elapsed > 0:
            return
        places = [*self.queues, self.gate] if self.gate is not None else self.queues
        counts = [place.waiting_host_count() for place in places]
        if not 0 < sum(counts) <= 2:
            return
        keys = {key for place, n in zip(places, counts, strict=True) if n
                for key, _, _ in place.waiting_hosts()}
        if len(keys) == 1:
            state = self.hosts.peek(keys.pop())
            if state is not None:
                state.alone += elapsed

    def live_line(self, now: float, waiting: int, oldest: float | None) -> Snapshot:
        """The live line now: where requests wait, who holds the end, O(active hosts).
        Resets the period's waits."""
        left: dict[str, int] = {}
        queued = 0
        queued_since = now
        for queue in self.queues:
            for key, n, since in queue.waiting_hosts():
                queued += n
                left[key] = left.get(key, 0) + n
                if since < queued_since:
                    queued_since = since
        if self.gate is not None:
            for key, n, _ in self.gate.waiting_hosts():
                left[key] = left.get(key, 0) + n
        period = now - self._last_line
        rate = self.waits.count / period if period > 0 else 0.0
        found = holders(left, self.hosts, now, rate, max(self.settings.log_interval, 1.0),
                        suspended=self.breaker)
        where = where_text(queued if self.queues else None, now - queued_since, waiting,
                           now - oldest if oldest is not None else 0.0)
        return snapshot(self.hosts, self.waits, where, holders_text(found) if found else "",
                        self.suspended(now) if self.suspended is not None else (0, 0))

    def sync_dns_stats(self, dns: DnsCache) -> None:
        st = dns.stats
        self.stats.set_value(STATS + "dns/lookups", st.lookups)
        self.stats.set_value(STATS + "dns/cache_hits", st.cache_hits)
        self.stats.set_value(STATS + "dns/failures", st.failures)

    def host_report(self, top: int | None = None, now: float | None = None
                    ) -> list[dict[str, Any]]:
        """Per-host facts, the hosts that held the crawl longest first: alone (the
        only host with requests waiting), then by their requests' waits."""
        tracked = sorted(self.hosts.items(),
                         key=lambda kv: (-kv[1].alone, -kv[1].queue_wait - kv[1].waited, kv[0]))
        if top is not None:
            tracked = tracked[:top]
        return [
            {"host": key, "requests": s.requests, "alone": round(s.alone, 3),
             "scheduler_wait": round(s.queue_wait, 3), "waited": round(s.waited, 3),
             "interval": round(s.interval(), 3),
             "state": hold_state(s, now, key in self.breaker),
             "backoffs": dict(s.backoffs or {}), "crawl_delay": s.crawl_delay, "dead": s.dead}
            for key, s in tracked
        ]

    def report(self, now: float | None = None) -> None:
        if now is not None:
            for queue in self.queues:
                queue.credit(now)
        rows = self.host_report(self.settings.report_hosts, now)
        waited = self.stats.get_value(STATS + "wait_seconds")
        if waited is not None:  # a sum of floats: 164.302535222002 helps nobody
            self.stats.set_value(STATS + "wait_seconds", round(waited, 3))
        queued = sum(queue.total for queue in self.queues)
        if queued:
            self.stats.set_value(STATS + "scheduler_wait_seconds", round(queued, 3))
        if self.settings.report_stat:
            self.stats.set_value(STATS + "report", rows)
        if rows:
            logger.info("Politeness report (hosts that held the crawl longest):\n%s",
                        report_text(rows))

    def close(self, now: float | None) -> None:
        trace, self.trace = self.trace, None
        if trace is None:
            return
        trace.close(now)
        self.stats.set_value(STATS + "trace/lines", trace.lines)
        self.stats.set_value(STATS + "trace/dropped", trace.dropped + trace.write_errors)
