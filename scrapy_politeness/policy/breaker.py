"""A host pinned at its ceiling is suspended for a while, not given up on.

A circuit breaker per host: *closed* (the usual pacing), *open* (suspended
until a probe instant: none of its requests is sent, they keep waiting where
they are) and *half-open* (the probe instant passed: one request goes out).
A healthy probe closes the breaker and the host resumes at a cautious interval
that the usual recovery narrows; a failed one suspends the host again for
twice as long (capped). A host down for twenty seconds so loses nothing, and a
host down for hours costs one probe per cool-down, as Heritrix and Nutch do.

Pure: the caller passes the instants and applies the verdicts (the glue
pushes the host bucket's next-eligible instant to the probe time, which is
what holds its requests back in the scheduler queue and in the gate).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from scrapy_politeness.policy.idle_maps import refit

if TYPE_CHECKING:
    from scrapy_politeness.policy.host_state import HostState

__all__ = ["MAX_COOLDOWN", "Breaker", "Suspension", "Verdict"]

MAX_COOLDOWN = 3600.0
"""Default cap of a doubling cool-down, seconds."""


class Verdict(Enum):
    """What one outcome did to a host's breaker."""

    NONE = "none"  # closed and staying closed, or an outcome of a request sent before
    SUSPENDED = "suspended"  # just tripped: suspended until the probe instant
    RESUSPENDED = "resuspended"  # its probe failed: suspended again, for longer
    REOPENED = "reopened"  # its probe was healthy: closed again


@dataclass(slots=True)
class Suspension:
    """One open breaker: the probe instant and the cool-down that led to it."""

    until: float
    cooldown: float
    probes: int = 0  # failed probes so far
    probe_at: float = float("-inf")  # when the current probe went out


class Breaker:
    """The suspended hosts of one crawl, keyed like the host buckets.

    ``cooldown``: the first suspension's length (None: twice the host's
    ceiling, so the first probe comes about when the next fetch at the
    ceiling would have); ``max_cooldown``: the cap of its doubling;
    ``reopen``: the fraction of the ceiling a host resumes at.

    A suspension lasts while its host matters: :meth:`prune` forgets one whose
    probe instant passed long ago while nothing of its host waits (its
    requests all gone, its state evicted), so the records follow the hosts
    in use, not every host that ever failed.
    """

    __slots__ = ("_high", "_open", "cooldown", "max_cooldown", "reopen")

    def __init__(self, *, cooldown: float | None = None, max_cooldown: float = MAX_COOLDOWN,
                 reopen: float = 0.5) -> None:
        if cooldown is not None and not cooldown > 0:
            raise ValueError(f"cooldown must be > 0, got {cooldown!r}")
        if not max_cooldown > 0:
            raise ValueError(f"max_cooldown must be > 0, got {max_cooldown!r}")
        if not 0 < reopen <= 1:
            raise ValueError(f"reopen must be in (0, 1], got {reopen!r}")
        self.cooldown = cooldown
        self.max_cooldown = max_cooldown
        self.reopen = reopen
        # Least recently suspended first (a new verdict moves a host to the end).
        self._open: OrderedDict[str, Suspension] = OrderedDict()
        self._high = 0  # high-water mark (policy.idle_maps)

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key: object) -> bool:
        return key in self._open

    def get(self, key: str) -> Suspension | None:
        return self._open.get(key)

    def suspended(self, key: str, now: float) -> bool:
        """Whether ``key`` is suspended and its probe is not due yet."""
        s = self._open.get(key)
        return s is not None and now < s.until

    def probing(self, now: float) -> int:
        """How many suspended hosts are past their probe instant (half-open)."""
        return sum(1 for s in self._open.values() if now >= s.until)

    def feedback(self, key: str, *, sent_at: float, failed: bool, tripped: bool,
                 cooldown: float, now: float) -> Verdict:
        """Fold one outcome of ``key`` (a request sent at ``sent_at``).

        ``tripped``: the host just reached the trip condition (its interval at
        the ceiling for the required fetches); ``cooldown``: the first
        suspension's length for this host. An outcome of a request sent
        before the probe instant (out before the suspension began) changes
        nothing: only the probe's answer decides.
        """
        s = self._open.get(key)
        if s is None:
            if not (tripped and failed):  # a healthy answer at the ceiling suspends nothing
                return Verdict.NONE
            self._open[key] = Suspension(now + min(cooldown, self.max_cooldown),
                                         min(cooldown, self.max_cooldown))
            return Verdict.SUSPENDED
        if sent_at < s.until:
            return Verdict.NONE
        if not failed:
            del self._open[key]
            return Verdict.REOPENED
        s.cooldown = min(2 * s.cooldown, self.max_cooldown)
        s.until = now + s.cooldown
        s.probes += 1
        self._open.move_to_end(key)
        return Verdict.RESUSPENDED

    def sent(self, key: str, state: HostState, at: float) -> bool:
        """A request of ``key`` went out at ``at``; True if it is the probe.

        Half-open lets one probe out: the next request may follow only a
        cool-down later (``not_before``), unless the probe's answer decides
        first (healthy: the host resumes at once; failed: suspended again).
        """
        s = self._open.get(key)
        if s is None or at < s.until or s.probe_at >= s.until:
            return False
        s.probe_at = at
        hold = at + s.cooldown
        if hold > state.not_before:
            state.not_before = hold
        return True

    def judge(self, key: str, state: HostState, *, tripped: bool, sent_at: float,
              failed: bool, now: float) -> Verdict:
        """Fold one outcome into the breaker and apply the verdict to ``state``.

        Suspended: the bucket's next-eligible instant moves to the probe time
        (``not_before``), which holds the host's requests wherever they wait;
        the table's dead flag is cleared (a suspended host is never dropped).
        Reopened: the interval comes down to ``reopen`` of the ceiling if it
        was above it, and the ceiling streak starts again.
        """
        config = state.config
        first = self.cooldown if self.cooldown is not None else 2 * config.ceiling
        before = self._open.get(key)
        hold = before.probe_at + before.cooldown if before is not None else None
        verdict = self.feedback(key, sent_at=sent_at, failed=failed, tripped=tripped,
                                cooldown=first, now=now)
        state.dead = False
        if verdict is Verdict.SUSPENDED or verdict is Verdict.RESUSPENDED:
            until = self._open[key].until
            if until > state.not_before:
                state.not_before = until
        elif verdict is Verdict.REOPENED:
            if state.not_before == hold:  # the half-open hold (a Retry-After stays)
                state.not_before = now
            state.ceiling_streak = 0
            cautious = config.host_interval(config.ceiling * self.reopen)
            if state.adaptive > cautious:
                state.adaptive = cautious
        return verdict

    def adopt(self, key: str, until: float, now: float) -> bool:
        """Another process suspended ``key`` until ``until`` (a shared pause):
        suspend it here too, its probe at the same instant; True if it was not."""
        if key in self._open or not until > now:
            return False
        self._open[key] = Suspension(until, min(until - now, self.max_cooldown))
        return True

    def forget(self, key: str) -> None:
        self._open.pop(key, None)

    def items(self) -> list[tuple[str, Suspension]]:
        return list(self._open.items())

    def restore(self, key: str, suspension: Suspension) -> None:
        """Put back a suspension saved by an earlier run (``JOBDIR``)."""
        self._open[key] = suspension
        self._open.move_to_end(key)

    def prune(self, cutoff: float, matters: Callable[[str], bool]) -> int:
        """Forget suspensions whose probe instant is at or before ``cutoff`` (the
        idle time ago) and whose host no longer ``matters`` (no state, nothing
        waiting); the number forgotten.

        A host that still matters is moved to the back and looked at again
        after the others. Pops from the front, least recently suspended
        first, and stops at the first suspension whose probe instant is still
        ahead of ``cutoff``: the cost is what is forgotten or kept back, never
        a pass over every suspended host. A host forgotten starts afresh if
        requests of it come later (suspended again if it still fails).
        """
        records = self._open
        self._high = max(self._high, len(records))
        gone = held = 0
        while records and held < len(records):
            key, s = next(iter(records.items()))
            if s.until > cutoff:
                break
            if matters(key):
                records.move_to_end(key)
                held += 1
                continue
            del records[key]
            gone += 1
        self._open, self._high = refit(records, self._high)
        return gone
