"""One fetch's outcome, fed back into everything that spaces its host.

The local tables take the AIMD step (:meth:`~scrapy_politeness.policy.HostTable.feedback`),
the shared backend the same step, the observer its stats and trace line; a
Retry-After above ``POLITENESS_MAX_RETRY_AFTER`` sets the host's requests aside
(:class:`~scrapy_politeness.downloader.dropped_hosts.DroppedHosts`), a host pinned at the ceiling is
suspended (:mod:`~scrapy_politeness.downloader.suspended_hosts`) or, with
``POLITENESS_ON_CEILING = "dead"``, declared dead, and a host whose instants
moved is re-timed in the queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy_politeness.observe.observer import STATS
from scrapy_politeness.policy import Signal, backoff_cause_of, retry_after_verdict

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.distributed.sync import SharedSync
    from scrapy_politeness.downloader.dropped_hosts import DroppedHosts
    from scrapy_politeness.downloader.gate_driver import GateDriver, Waiter
    from scrapy_politeness.downloader.send_lateness import Dispatch
    from scrapy_politeness.downloader.suspended_hosts import SuspendedHosts
    from scrapy_politeness.observe.observer import Observer
    from scrapy_politeness.policy import Gate, HostTable

__all__ = ["Outcomes"]


class Outcomes:
    """Feeds each outcome back (see the module doc)."""

    def __init__(self, gate: Gate[Waiter], hosts: HostTable, *, driver: GateDriver,
                 dropped: DroppedHosts, observer: Observer, stats: StatsCollector,
                 shared: SharedSync | None, max_retry_after: float,
                 suspended: SuspendedHosts | None = None) -> None:
        self.gate = gate
        self.hosts = hosts
        self.driver = driver
        self.dropped = dropped
        self.observer = observer
        self.stats = stats
        self.shared = shared
        self.max_retry_after = max_retry_after
        self.suspended = suspended if suspended is not None and suspended.enabled else None

    def feed(self, dispatch: Dispatch, status: int, retry_after: float | None,
             latency: float, now: float) -> None:
        """``status`` 0: a transport error; ``retry_after`` in seconds from now."""
        key = dispatch.key
        self.gate.done(key)
        state = self.hosts.get(key)
        honoured, park = retry_after_verdict(retry_after, self.max_retry_after)
        if park:
            self.dropped.park(key, now, now + retry_after,  # type: ignore[operator]
                              f"politeness: {key} asked for Retry-After {retry_after:.0f}s, above "
                              f"POLITENESS_MAX_RETRY_AFTER={self.max_retry_after:g}s")
        elif honoured:
            self.stats.inc_value(STATS + "retry_after")
        signal = Signal(status, honoured, latency, state.latency)
        # The host's own probe (running below a pace it proved) explains its failure.
        adaptive, not_before = state.adaptive, state.not_before
        explained = 0.0 < adaptive < state.good_at
        self.gate.ips.feedback(dispatch.ip, key, status, retry_after or 0.0, explained)
        outcome = self.hosts.feedback(key, signal, now)
        if self.suspended is not None:  # POLITENESS_ON_CEILING = "suspend": never dead
            hold = self.suspended.fed_back(key, state, outcome, dispatch.at, now)
            if hold > honoured:  # other processes hold the host too: a shared pause
                signal = Signal(status, hold, latency, signal.prev_latency)
        if self.shared is not None:
            self.shared.feedback(dispatch, signal)
        self.observer.fed_back(now, key, state, outcome, backoff_cause_of(status, outcome),
                               ip=dispatch.ip, status=status, retry_after=retry_after,
                               latency=latency)
        if self.suspended is None and outcome.became_dead:
            self.dropped.died_here(now, key, state, outcome.after)
        if state.adaptive != adaptive or state.not_before != not_before:
            self.driver.retime(key)  # its instants moved (re-timing costs a heap entry a response)
        self.driver.pump(now)
