"""Which hosts hold a crawl's end, in words a user acts on.

A host holds the end when the crawl would finish much sooner without it: its
requests left, spaced by its interval, take at least twice as long as
everything else left (the other hosts' own tails, and the other requests at
the rate the crawl dispatched in the last period). Typically one host at its
ceiling with a few requests left while the rest of the crawl is done::

    1 host at its ceiling holds the end: slow.example (30s interval, 9 left, ~4m30s)

Computed once per live line over the hosts with requests waiting, O(active
hosts). Pure Python on the policy's host states.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Container, Mapping

    from scrapy_politeness.policy import HostState, HostTable

__all__ = ["MAX_HOLDERS", "SHOWN", "Holder", "duration", "hold_state", "holders", "holders_text"]

MAX_HOLDERS = 5  # more hosts than this sharing the end: none of them alone explains it
SHOWN = 3  # holders named on the line; the others are counted
_MARGIN = 2.0  # a holder's tail is at least this many times the rest of the crawl

# What holds a host back, singular and plural, in the order they are checked.
WORDS = {
    "suspended": ("suspended at its ceiling", "suspended at their ceiling"),
    "retry-after": ("paused by Retry-After", "paused by Retry-After"),
    "crawl-delay": ("slowed by its Crawl-delay", "slowed by their Crawl-delay"),
    "ceiling": ("at its ceiling", "at their ceiling"),
    "backing-off": ("backing off", "backing off"),
    "": ("", ""),  # at its own pace
}


def duration(seconds: float) -> str:
    """Seconds as people read them: "31.2s", "4m30s", "1h02m"."""
    if seconds < 59.95:
        return f"{max(seconds, 0.0):.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def hold_state(state: HostState, now: float | None, suspended: bool = False) -> str:
    """What keeps ``state``'s host slow, a key of ``WORDS`` ("" for nothing);
    ``suspended``: its breaker is open (a pause that is no Retry-After)."""
    if suspended:
        return "suspended"
    if now is not None and state.not_before > now:
        return "retry-after"
    config = state.config
    own = config.host_interval(state.adaptive)
    if state.crawl_delay > 0 and state.crawl_delay >= own:
        return "crawl-delay"
    if config.at_ceiling(own):
        return "ceiling"
    if state.adaptive > config.default + 1e-9:
        return "backing-off"
    return ""


@dataclass(frozen=True, slots=True)
class Holder:
    """A host holding the end: its interval, requests left, and its tail (seconds)."""

    key: str
    interval: float
    left: int
    tail: float
    state: str


def holders(waiting: Mapping[str, int], table: HostTable, now: float, rate: float,
            min_tail: float, *, suspended: Container[str] = ()) -> list[Holder]:
    """The hosts of ``waiting`` (key: requests left) that hold the crawl's end.

    A host's tail runs from now to its last request's start: its next turn,
    then one interval per request after the first. The fewest longest tails
    (up to ``MAX_HOLDERS``) are holders when the shortest of them is at least
    ``min_tail`` and twice the rest: the next host's tail and the other
    requests at ``rate`` a second (0: unknown).
    """
    tails: list[tuple[float, str, float, int, str]] = []
    total = 0
    for key, left in waiting.items():
        state = table.peek(key)
        if state is None:
            interval, ready, why = table.config.default, now, ""
        elif state.dead:
            continue  # its requests are dropped at once
        else:
            interval, ready = state.interval(), state.eligible_at()
            why = hold_state(state, now, key in suspended)
        total += left
        tail = (ready - now if ready > now else 0.0) + (left - 1) * interval
        tails.append((tail, key, interval, left, why))
    top = heapq.nlargest(MAX_HOLDERS + 1, tails)
    taken = 0
    for k in range(min(MAX_HOLDERS, len(top))):
        taken += top[k][3]
        rest = top[k + 1][0] if k + 1 < len(top) else 0.0
        if rate > 0 and (total - taken) / rate > rest:
            rest = (total - taken) / rate
        shortest = top[k][0]
        if shortest >= min_tail and shortest >= _MARGIN * rest:
            return [Holder(key, interval, left, tail, why)
                    for tail, key, interval, left, why in top[:k + 1]]
    return []


def holders_text(found: list[Holder]) -> str:
    """``found`` for the live line: "1 host at its ceiling holds the end: a.test (…)"."""
    n = len(found)
    states = {h.state for h in found}
    common = states.pop() if len(states) == 1 else None
    head = f"{n} host" if n == 1 else f"{n} hosts"
    if common:
        head += " " + WORDS[common][0 if n == 1 else 1]
    parts = []
    for h in found[:SHOWN]:
        own = WORDS[h.state][0] + ", " if common is None and h.state else ""
        parts.append(f"{h.key} ({own}{round(h.interval, 3):g}s interval, {h.left} left, "
                     f"~{duration(h.tail)})")
    if n > SHOWN:
        parts.append(f"and {n - SHOWN} more")
    return f"{head} {'holds' if n == 1 else 'hold'} the end: {', '.join(parts)}"
