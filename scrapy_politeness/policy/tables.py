"""Per-IP and per-host bucket state, reduced to timestamps.

A bucket has no burst: a fetch may start at or after its next-eligible
instant, and each start pushes that instant one interval further. Idle entries
are evicted so memory follows the active working set, not every host ever seen.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrapy_politeness.policy.config import Config, Signal, is_failure
from scrapy_politeness.policy.host_state import HostState
from scrapy_politeness.policy.ips import IPTable
from scrapy_politeness.policy.recovery import fast_step

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

    __slots__ = ("_hosts", "_overrides", "config", "dead_after", "latency_alpha")

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
        self._hosts: dict[str, HostState] = {}

    def __len__(self) -> int:
        return len(self._hosts)

    def __contains__(self, key: str) -> bool:
        return key in self._hosts

    def items(self) -> list[tuple[str, HostState]]:
        return list(self._hosts.items())

    def get(self, key: str) -> HostState:
        """The state of ``key``, created at its config's default on first sight."""
        state = self._hosts.get(key)
        if state is None:
            config = self._overrides.get(key, self.config)
            state = HostState(config=config, adaptive=config.default)
            self._hosts[key] = state
        return state

    def peek(self, key: str) -> HostState | None:
        return self._hosts.get(key)

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
        return Outcome(before, state.interval(), failed, soft, became_dead)

    def evict(self, cutoff: float) -> int:
        """Drop hosts untouched since ``cutoff`` that no rule still binds.

        Dead hosts, hosts with a crawl-delay (robots.txt is not fetched
        again), and hosts under a Retry-After window or parked keep their
        entry: forgetting them would make the plugin less polite. A host
        merely backed off is forgotten once idle that long: the server had
        the idle time to recover, and keeping every host that ever saw a 503
        would grow without bound. Returns the number evicted.
        """
        stale = [
            key for key, s in self._hosts.items()
            if s.touched <= cutoff and not s.dead and s.crawl_delay == 0
            and s.not_before <= cutoff and s.parked_until <= cutoff
            and s.last_start + s.interval() <= cutoff
        ]
        for key in stale:
            del self._hosts[key]
        if len(stale) > len(self._hosts):  # a dict never shrinks on deletion: rebuild it
            self._hosts = dict(self._hosts)
        return len(stale)
