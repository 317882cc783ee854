"""Suspended hosts on the event loop: the breaker's verdicts, stats, and the close.

With ``POLITENESS_ON_CEILING = "suspend"`` (the default) a host pinned at its
ceiling is suspended by :class:`~scrapy_politeness.policy.breaker.Breaker`,
which moves the host bucket's next-eligible instant to the probe time: the
scheduler queue hands out only eligible hosts and the gate releases nothing
earlier, so the host's requests stay where they wait (in memory or in JOBDIR)
and exactly one probe goes out at that instant. Nothing is dropped.

When only suspended hosts have requests left and nothing else is in progress,
the crawl would sit idle until their probes; unless
``POLITENESS_WAIT_FOR_SUSPENDED`` asks to wait, it closes instead (reason
``politeness_suspended_hosts``): with JOBDIR their requests stay queued for the
next run, without it they are counted under ``politeness/dropped/suspended``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from scrapy_politeness.observe.observer import STATS
from scrapy_politeness.policy.breaker import Breaker, Verdict
from scrapy_politeness.scrapy_internals import engine_in_progress, start_requests_left

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_politeness.distributed.sync import SharedSync
    from scrapy_politeness.downloader.gate_driver import GateDriver
    from scrapy_politeness.observe.observer import Observer
    from scrapy_politeness.policy import HostState, Outcome
    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["CLOSE_REASON", "NEVER", "SuspendedHosts"]

logger = logging.getLogger(__name__)

CLOSE_REASON = "politeness_suspended_hosts"
NEVER = 2**31 - 1
"""The shared backend's ``dead_after`` when hosts are suspended: it never declares one dead."""


class SuspendedHosts:
    """The breaker of one crawler, its stats, and the close when only it holds the crawl."""

    def __init__(self, crawler: Crawler, settings: PolitenessSettings, driver: GateDriver,
                 observer: Observer, shared: SharedSync | None = None) -> None:
        self.crawler = crawler
        self.enabled = settings.on_ceiling == "suspend"
        self.wait = settings.wait_for_suspended
        self.dead_after = settings.dead_after  # the trip: fetches pinned at the ceiling
        self.breaker = Breaker(cooldown=settings.suspend_cooldown,
                               max_cooldown=settings.suspend_max_cooldown)
        self.driver = driver
        self.observer = observer
        observer.suspended = self.counts  # the live line's count
        observer.breaker = self.breaker  # "suspended", not "paused by Retry-After"
        self.stats = crawler.stats
        self._idle_ticks = 0
        self._closing = False
        if shared is not None and self.enabled:
            shared.dead_after = NEVER  # a suspension is shared as a pause instead
            shared.suspended_elsewhere = self.learnt

    def fed_back(self, key: str, state: HostState, outcome: Outcome, sent_at: float,
                 now: float) -> float:
        """Fold one outcome of ``key`` (sent at ``sent_at``) into its breaker; the
        seconds it was just suspended for (0: none), a pause to share."""
        verdict = self.breaker.judge(key, state, tripped=outcome.became_dead, sent_at=sent_at,
                                     failed=outcome.backed_off, now=now)
        if verdict is Verdict.NONE:
            return 0.0
        s = self.breaker.get(key)
        if verdict is Verdict.SUSPENDED:
            assert s is not None
            self.stats.inc_value(STATS + "suspended")
            logger.warning("Host %s suspended: its interval stayed at the ceiling (%gs) for %d "
                           "consecutive fetches; its requests wait, one probe in %.0fs",
                           key, state.config.ceiling, state.ceiling_streak, s.cooldown)
        elif verdict is Verdict.RESUSPENDED:
            assert s is not None
            self.stats.inc_value(STATS + "probes/failed")
            logger.info("Host %s still failing: suspended again, next probe in %.0fs",
                        key, s.cooldown)
        else:
            self.stats.inc_value(STATS + "probes/healthy")
            logger.info("Host %s answered its probe: resumed at a %gs interval",
                        key, state.interval())
        self.stats.set_value(STATS + "suspended_now", len(self.breaker))
        self.driver.retime(key)
        return s.until - now if s is not None else 0.0

    def learnt(self, key: str, state: HostState, now: float) -> bool:
        """Whether the shared state just merged into ``state`` shows ``key``
        suspended by another process: at its ceiling for the trip's fetches and
        paused. The suspension is adopted here (its requests wait for the same
        probe instant, and a crawl left with it alone may close)."""
        if not (state.not_before > now and state.ceiling_streak >= self.dead_after
                and state.config.at_ceiling(state.adaptive)):
            return False
        if key in self.breaker:
            return self.breaker.suspended(key, now)
        if not self.breaker.adopt(key, state.not_before, now):
            return False
        self.stats.inc_value(STATS + "suspended_elsewhere")
        self.stats.set_value(STATS + "suspended_now", len(self.breaker))
        logger.info("Host %s suspended by another process: its requests wait here too, "
                    "its probe in %.0fs", key, state.not_before - now)
        self.driver.retime(key)
        return True

    def sent(self, key: str, state: HostState, at: float) -> None:
        """A request of ``key`` went out at ``at`` (O(1); nothing when none is suspended)."""
        if self.breaker and self.breaker.sent(key, state, at):
            self.stats.inc_value(STATS + "probes/sent")
            self.driver.retime(key)

    @property
    def kept(self) -> Breaker | None:
        """The breaker to keep in ``JOBDIR`` (None: hosts are not suspended)."""
        return self.breaker if self.enabled else None

    def prune(self, cutoff: float) -> int:
        """Forget the suspensions of hosts idle since ``cutoff`` (the eviction
        pass): probe instant passed by then, no state left in the host table,
        nothing of theirs waiting in a scheduler queue or the gate. A suspended
        host with requests waiting keeps its suspension (and its cool-down step)."""
        if not self.breaker:
            return 0
        gate = self.driver.gate
        hosts, queues = gate.hosts, self.observer.queues

        def matters(key: str) -> bool:
            return (hosts.whole(key) is not None or gate.waiting_for(key) > 0
                    or any(q.queued(key) for q in queues))

        gone = self.breaker.prune(cutoff, matters)
        if gone:
            self.stats.inc_value(STATS + "suspensions_expired", gone)
            self.stats.set_value(STATS + "suspended_now", len(self.breaker))
        return gone

    def counts(self, now: float) -> tuple[int, int]:
        """(hosts suspended, of which past their probe instant) for the live line."""
        return len(self.breaker), self.breaker.probing(now)

    # -- the close -------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Close the crawl when only suspended hosts have requests left (two ticks in a row)."""
        if not self.breaker or self.wait or self._closing:
            return
        left = self._only_suspended()
        if left is None:
            self._idle_ticks = 0
            return
        self._idle_ticks += 1
        if self._idle_ticks >= 2:
            self._close(left)

    def _only_suspended(self) -> dict[str, int] | None:
        """The suspended hosts' requests left, if nothing else is: else None."""
        if start_requests_left(self.crawler) is not False:
            return None
        left: dict[str, int] = {}
        gate = self.driver.gate
        for waiting in [*(q.waiting_hosts() for q in self.observer.queues), gate.waiting_hosts()]:
            for key, n, _ in waiting:
                if key not in self.breaker:
                    return None
                left[key] = left.get(key, 0) + n
        in_gate = sum(n for _, n, _ in gate.waiting_hosts())
        if not left:
            return None
        in_progress = engine_in_progress(self.crawler)
        if in_progress is None or len(in_progress) != in_gate:
            return None  # something else is downloading or being scraped
        return left

    def _close(self, left: dict[str, int]) -> None:
        self._closing = True
        total = sum(left.values())
        names = ", ".join(f"{k} ({n})" for k, n in sorted(left.items())[:5])
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        if self.crawler.settings.get("JOBDIR"):
            fate = "they stay in JOBDIR for the next run"
        else:
            fate = "without JOBDIR they are dropped"
            self.stats.inc_value(STATS + "dropped/suspended", total)
        logger.warning("politeness: only suspended hosts have requests left: %s%s, %d request%s;"
                       " closing the crawl (%s; POLITENESS_WAIT_FOR_SUSPENDED = True waits "
                       "for their probes)", names, more, total, "" if total == 1 else "s", fate)
        engine = self.crawler.engine
        assert engine is not None
        close_async = getattr(engine, "close_spider_async", None)
        if close_async is not None:  # Scrapy >= 2.14
            task = asyncio.ensure_future(close_async(reason=CLOSE_REASON))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        else:
            engine.close_spider(engine.spider, CLOSE_REASON)  # type: ignore[arg-type]
