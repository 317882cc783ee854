"""Per-IP and per-host bucket state, reduced to timestamps.

A bucket has no burst: a fetch may start at or after its next-eligible
instant, and each start pushes that instant one interval further. Idle entries
are evicted so memory follows the active working set, not every host ever seen:
the table is kept in the order hosts were last touched, so eviction pops idle
hosts from its front (O(evicted), never a pass over every host), and what an
evicted host must not forget (dead, Crawl-delay, parked) stays as a compact
record (``policy.verdicts``) that turns back into a full state on its next look-up.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from scrapy_politeness.policy.config import Config, Signal, is_failure
from scrapy_politeness.policy.host_state import HostState
from scrapy_politeness.policy.idle_maps import refit
from scrapy_politeness.policy.ips import IPTable
from scrapy_politeness.policy.recovery import fast_step
from scrapy_politeness.policy.verdicts import Verdicts

__all__ = ["HostState", "HostTable", "IPTable", "Outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one feedback did to a host, for stats and logs."""

    before: float
    after: float
    backed_off: bool
    soft_widened: bool
    became_dead: bool


class HostTable:
    """Per-host state keyed by the bucket key, with overrides and eviction."""

    __slots__ = ("_ceiling", "_high", "_hosts", "_overrides", "config", "dead_after",
                 "latency_alpha", "verdicts")

    def __init__(
        self,
        config: Config,
        *,
        dead_after: int = 5,
        overrides: dict[str, Config] | None = None,
        latency_alpha: float = 0.3,
    ) -> None:
        if dead_after < 1:
            raise ValueError(f"dead_after must be >= 1, got {dead_after!r}")
        if not 0 < latency_alpha <= 1:
            raise ValueError(f"latency_alpha must be in (0, 1], got {latency_alpha!r}")
        self.config = config
        self.dead_after = dead_after
        self.latency_alpha = latency_alpha
        self._overrides = dict(overrides or {})
        # Least recently touched first (``touch`` moves a host to the end).
        self._hosts: OrderedDict[str, HostState] = OrderedDict()
        self.verdicts = Verdicts()
        self._high = 0  # the table's high-water mark (policy.idle_maps)
        # A dead verdict outlives the longest ceiling by the idle time.
        self._ceiling = max([config.ceiling, *(c.ceiling for c in self._overrides.values())])

    def __len__(self) -> int:
        return len(self._hosts)

    def __contains__(self, key: str) -> bool:
        """Whether ``key`` has a state or a compact verdict."""
        return key in self._hosts or (bool(self.verdicts) and key in self.verdicts)

    def items(self) -> list[tuple[str, HostState]]:
        return list(self._hosts.items())

    def compact_items(self) -> list[tuple[str, HostState]]:
        """Every compact verdict as a detached full state (for saving with JOBDIR)."""
        out = []
        for key in self.verdicts.hosts():
            record = self.verdicts.peek(key)
            assert record is not None
            dead_since, delay, parked = record
            config = self._overrides.get(key, self.config)
            state = HostState(config=config, adaptive=config.default, crawl_delay=delay,
                              parked_until=parked)
            if dead_since is not None:
                state.dead, state.adaptive, state.touched = True, config.ceiling, dead_since
                state.ceiling_streak = self.dead_after
            out.append((key, state))
        return out

    def states(self) -> Iterator[HostState]:
        """The tracked states, without copying the table (do not evict meanwhile)."""
        return iter(self._hosts.values())

    def get(self, key: str) -> HostState:
        """The state of ``key``, created at its config's default on first sight
        (or from its compact verdict, when it has one)."""
        state = self._hosts.get(key)
        if state is None:
            config = self._overrides.get(key, self.config)
            state = HostState(config=config, adaptive=config.default)
            self._hosts[key] = state
            record = self.verdicts.take(key) if self.verdicts else None
            if record is not None:
                dead_since, state.crawl_delay, state.parked_until = record
                if dead_since is not None:
                    state.dead = True
                    state.adaptive = config.ceiling
                    state.ceiling_streak = self.dead_after
                    state.touched = dead_since
        return state

    def peek(self, key: str) -> HostState | None:
        """The state of ``key`` if it is tracked (a compact verdict comes back whole)."""
        state = self._hosts.get(key)
        if state is None and self.verdicts and key in self.verdicts:
            return self.get(key)
        return state

    def whole(self, key: str) -> HostState | None:
        """The full state of ``key`` if it has one (a compact verdict stays compact)."""
        return self._hosts.get(key)

    def touch(self, key: str, now: float) -> None:
        """Mark ``key`` as in use at ``now`` (a dropped request of a dead host
        renews its verdict): it is evicted last."""
        state = self._hosts.get(key)
        if state is not None:
            state.touched = now
            self._hosts.move_to_end(key)

    def start(self, key: str, now: float, since: float = float("inf"),
              waiting: int = -1) -> float:
        """Record a fetch start; returns the interval it was spaced by.

        ``since``: when the request (or one of its host before it) has been
        waiting; with the scheduler queue, ``state.queued_since`` says the same.
        The gap kept for the recovery is the host's own: from its last start to
        when its own bucket and its waiting request let it go. A start held
        past that by another bucket (its IP, busy with other vhosts) ran at the
        pace the host's controller chose, not at the wider gap the IP made.
        ``waiting``: the host's requests left in the caller's queue (-1:
        unknown), added to what the scheduler queue reported (``backlog``).
        """
        state = self.get(key)
        if state.queued_since == float("inf"):  # no word from the scheduler queue
            state.backlog = waiting
        elif waiting > 0:
            state.backlog += waiting
        if state.last_start > float("-inf"):
            queued = state.queued_since
            own = state.eligible_at()
            if queued < since:
                since = queued
            if since > own:
                own = since
            state.gap = (own if own < now else now) - state.last_start
        state.queued_since = float("inf")
        state.last_start = now
        state.touched = now
        self._hosts.move_to_end(key)
        return state.interval()

    def set_crawl_delay(self, key: str, delay: float) -> None:
        self.get(key).crawl_delay = delay

    def feedback(self, key: str, signal: Signal, now: float) -> Outcome:
        """Fold one fetch outcome into the host: AIMD, Retry-After, dead streak.

        Retry-After is, on any response, a not-before instant (a pause). With
        ``recovery = "additive"`` (the reference design) it is also a floor of
        the new interval on failures (inside ``adapt``); the ``"fast"``
        recovery (``policy.recovery``) leaves the interval to what it learnt. The adaptive
        value is stored clamped to the config band, so a long run of healthy
        fetches cannot wind it far below the floor. A host is dead after
        ``dead_after`` consecutive outcomes whose clamped interval (without
        crawl-delay, which alone never kills a host) sits at the ceiling.
        """
        state = self.get(key)
        config = state.config
        before = state.interval()
        prev = state.latency
        sig = signal if signal.prev_latency == prev else Signal(
            signal.status, signal.retry_after, signal.latency, prev
        )
        if config.recovery != "additive":
            adapted = fast_step(config, state, sig)
        else:
            adapted = config.adapt(state.adaptive, sig)
        state.adaptive = config.host_interval(adapted)
        if signal.retry_after > 0:
            until = now + signal.retry_after
            if until > state.not_before:
                state.not_before = until
        if signal.latency > 0 and signal.status != 0:
            a = self.latency_alpha
            state.latency = signal.latency if prev <= 0 else a * signal.latency + (1 - a) * prev
        failed = is_failure(signal.status)
        soft = (not failed) and config.latency_rising(signal.latency, prev)
        if config.at_ceiling(state.adaptive):
            state.ceiling_streak += 1
        else:
            state.ceiling_streak = 0
        became_dead = False
        if not state.dead and state.ceiling_streak >= self.dead_after:
            state.dead = True
            became_dead = True
        state.touched = now
        self._hosts.move_to_end(key)
        return Outcome(before, state.interval(), failed, soft, became_dead)

    def evict(self, cutoff: float) -> int:
        """Drop hosts untouched since ``cutoff``; returns the number evicted.

        A host merely backed off is forgotten once idle that long: the server
        had the idle time to recover, and keeping every host that ever saw a
        503 would grow without bound. A dead, crawl-delayed or parked host
        leaves a compact record (``policy.verdicts``): forgetting it would make
        the plugin less polite. A host under a Retry-After window or whose next
        start is still ahead stays whole until that passes. Pops from the
        least recently touched end: the cost is the hosts evicted or kept
        back, never a pass over every host. Expired verdicts go too: a dead
        one or a Crawl-delay ``ceiling`` after ``cutoff`` reached its last
        renewal or use, a park once ``cutoff`` reached its end.
        """
        hosts = self._hosts
        self._high = max(self._high, len(hosts))
        evicted = held = 0
        while hosts:
            key, s = next(iter(hosts.items()))
            if s.touched > cutoff:
                break
            if not s.dead and (s.not_before > cutoff or s.last_start + s.interval() > cutoff):
                hosts.move_to_end(key)  # still binding: revisited after the active hosts
                held += 1
                if held >= len(hosts):
                    break
                continue
            del hosts[key]
            parked = s.parked_until if s.parked_until > cutoff else 0.0
            if s.dead or s.crawl_delay > 0 or parked:
                self.verdicts.keep(key, dead_since=s.touched if s.dead else None,
                                   crawl_delay=s.crawl_delay, parked_until=parked,
                                   used_at=s.touched)
            evicted += 1
        if self.verdicts:
            self.verdicts.expire(cutoff - self._ceiling, cutoff, cutoff - self._ceiling)
        self._hosts, self._high = refit(hosts, self._high)
        return evicted
