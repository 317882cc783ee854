"""A fake-clock driver for the pure gate: no sleeps, no reactor.

``GateSim`` advances a virtual clock from event to event: the earlier of the
gate's own :meth:`Gate.next_event` and the next scheduled callback (a late
submission, a ``done()``, a feedback). It records every release so tests can
check spacing per host and per IP.
"""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from scrapy_politeness.policy import Gate, Release

EPS = 1e-9


def run_at_once(coro: Any) -> Any:
    """The value of a coroutine that never suspends (no real loop under a fake
    clock); AssertionError if it waited."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("it waited on the real loop")


class Clock:
    """A clock that moves only when a test sets ``now``; call it for the time."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class GateSim:
    """Drive ``gate`` on a virtual clock, recording releases."""

    def __init__(self, gate: Gate[Any], *, max_steps: int = 200_000) -> None:
        self.gate = gate
        self.now = 0.0
        self.releases: list[Release[Any]] = []
        self.polls = 0
        self.empty_polls = 0
        self.max_steps = max_steps
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.on_release: Callable[[Release[Any]], None] | None = None

    # -- scheduling ---------------------------------------------------------

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the clock reaches ``t``."""
        heapq.heappush(self._timers, (t, next(self._seq), fn))

    def submit_at(self, t: float, key: str, ip: str | None, token: Any) -> None:
        self.at(t, lambda: self.gate.submit(key, ip, token, self.now))

    def submit(self, key: str, ip: str | None, token: Any) -> None:
        self.gate.submit(key, ip, token, self.now)

    # -- running ------------------------------------------------------------

    def poll(self) -> list[Release[Any]]:
        out = self.gate.poll(self.now)
        self.polls += 1
        if not out:
            self.empty_polls += 1
        for rel in out:
            assert rel.at == self.now
            self.releases.append(rel)
            if self.on_release is not None:
                self.on_release(rel)
        return out

    def run(self, until: float = float("inf")) -> None:
        """Advance event by event until nothing is pending (or ``until``)."""
        for _ in range(self.max_steps):
            ev = self.gate.next_event()
            tm = self._timers[0][0] if self._timers else None
            candidates = [t for t in (ev, tm) if t is not None]
            if not candidates:
                return
            t = max(self.now, min(candidates))
            if t > until:
                return
            self.now = t
            while self._timers and self._timers[0][0] <= self.now:
                _, _, fn = heapq.heappop(self._timers)
                fn()
            self.poll()
        raise AssertionError(f"simulation did not settle in {self.max_steps} steps")

    # -- views --------------------------------------------------------------

    def tokens(self) -> list[Any]:
        return [r.token for r in self.releases]

    def times(self, key: str) -> list[float]:
        return [r.at for r in self.releases if r.key == key]

    def by_host(self) -> dict[str, list[Release[Any]]]:
        out: dict[str, list[Release[Any]]] = defaultdict(list)
        for r in self.releases:
            out[r.key].append(r)
        return out

    def by_ip(self) -> dict[str, list[Release[Any]]]:
        out: dict[str, list[Release[Any]]] = defaultdict(list)
        for r in self.releases:
            if r.ip is not None:
                out[r.ip].append(r)
        return out


def check_host_spacing(sim: GateSim, margin: float) -> None:
    """No two releases of one host closer than the earlier one's interval + margin."""
    for key, rels in sim.by_host().items():
        for a, b in itertools.pairwise(rels):
            assert b.at - a.at >= a.interval + margin - EPS, (key, a, b)


def check_ip_spacing(sim: GateSim, ip_floor: float, margin: float) -> None:
    """For every pair on one IP: later - earlier >= max(ip_floor, earlier.interval) + margin."""
    for ip, rels in sim.by_ip().items():
        for i, a in enumerate(rels):
            need = max(ip_floor, a.interval) + margin - EPS
            for b in rels[i + 1:]:
                assert b.at - a.at >= need, (ip, a, b)
