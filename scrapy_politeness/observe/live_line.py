"""The periodic politeness log line, in the spirit of Scrapy's LogStats.

Every ``POLITENESS_LOG_INTERVAL`` seconds (checked by the middleware's
existing 0.25 s periodic tick, so no timer of its own) one INFO line says
where requests wait and for how long, and which hosts hold the crawl's end::

    Politeness: 412 waiting in the scheduler (oldest 2m31s), 0 in the gate; 57 dispatched
    (gate wait mean 0.01s, max 0.02s); 12 hosts, 2 backing off, 1 dead, 2 suspended
    (1 probed); 1 host at its ceiling holds the end: slow.example (30s interval, 9 left, ~4m30s)

Pure Python on the policy tables: no Scrapy import.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from scrapy_politeness.observe.holding import WORDS, duration
from scrapy_politeness.policy import HostTable

__all__ = ["LOG_FORMAT", "PeriodWaits", "Snapshot", "plural", "plural_s", "report_text", "snapshot",
           "where_text"]

# Each "%s" after a noun is its plural ending (see ``plural_s``): "1 host", "2 hosts".
LOG_FORMAT = ("Politeness: %s; %d dispatched (gate wait mean %.2fs, max %.2fs); "
              "%d host%s, %d backing off, %d dead%s%s")


def plural_s(n: int) -> str:
    """The English plural ending for ``n`` of a regular noun."""
    return "" if n == 1 else "s"


def plural(n: int, noun: str, nouns: str = "") -> str:
    """``n`` and the noun, singular for exactly one: "1 host", "0 hosts", "2 fetches"."""
    return f"{n} {noun}" if n == 1 else f"{n} {nouns or noun + 's'}"


class PeriodWaits:
    """The waits of the requests dispatched since the last log line."""

    __slots__ = ("count", "max", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, waited: float) -> None:
        self.count += 1
        self.total += waited
        if waited > self.max:
            self.max = waited

    def take(self) -> tuple[int, float, float]:
        """(dispatched, mean wait, max wait) of the period, and start a new one."""
        result = (self.count, self.total / self.count if self.count else 0.0, self.max)
        self.count, self.total, self.max = 0, 0.0, 0.0
        return result


def where_text(queued: int | None, queued_oldest: float, gate: int, gate_oldest: float) -> str:
    """Where requests wait and the longest wait so far: "412 waiting in the scheduler
    (oldest 31.2s), 3 in the gate (oldest 0.4s)"; None for ``queued``: the
    scheduler queue is not the plugin's (its waits are unknown)."""
    gate_age = f" (oldest {duration(gate_oldest)})" if gate else ""
    if queued is None:
        return f"{gate} waiting in the gate{gate_age}"
    queue_age = f" (oldest {duration(queued_oldest)})" if queued else ""
    return f"{queued} waiting in the scheduler{queue_age}, {gate} in the gate{gate_age}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    hosts: int
    where: str
    dispatched: int
    mean_wait: float
    max_wait: float
    backing_off: int
    dead: int
    holding: str  # "" or "1 host at its ceiling holds the end: ..."
    suspended: int = 0  # hosts suspended at their ceiling (policy/breaker.py)
    probed: int = 0  # of which past their probe instant (half-open)

    def log(self, logger: logging.Logger) -> None:
        logger.info(LOG_FORMAT, self.where, self.dispatched, self.mean_wait, self.max_wait,
                    self.hosts, plural_s(self.hosts), self.backing_off, self.dead,
                    f", {self.suspended} suspended ({self.probed} probed)"
                    if self.suspended else "",
                    "; " + self.holding if self.holding else "")


def snapshot(hosts: HostTable, waits: PeriodWaits, where: str, holding: str = "",
             suspended: tuple[int, int] = (0, 0)) -> Snapshot:
    """What the log line shows now; resets the period's waits.

    A host is *backing off* while its adaptive interval is above its default
    (a Crawl-delay alone does not count: the site asked, nothing went wrong);
    ``suspended``: hosts suspended, and of them those whose probe is due or out.
    """
    backing_off = dead = 0
    for state in hosts.states():  # the active hosts only: idle ones are evicted
        if state.dead:
            dead += 1
        elif state.adaptive > state.config.default + 1e-9:
            backing_off += 1
    dead += hosts.verdicts.counts()[0]  # idle dead hosts, kept as compact records
    count, mean, top = waits.take()
    return Snapshot(len(hosts), where, count, mean, top, backing_off, dead, holding,
                    suspended[0], suspended[1])


def report_text(rows: list[dict[str, Any]]) -> str:
    """The closing report's lines, one per host of ``host_report``; numbers rounded.

    "the only host with requests waiting for 1m52s": the time the crawl ran for
    that host alone; "waited": its requests' waits added up, where they waited.
    """
    lines = []
    for r in rows:
        backoffs = " ".join(f"{cause}:{n}" for cause, n in sorted(r["backoffs"].items()))
        alone = (f"the only host with requests waiting for {duration(r['alone'])}; "
                 if r["alone"] >= 0.05 else "")
        state = WORDS[r["state"]][0]
        lines.append(
            f"  {r['host']}: {alone}{plural(r['requests'], 'request')} waited "
            f"{duration(r['scheduler_wait'] + r['waited'])} ({duration(r['scheduler_wait'])} "
            f"in the scheduler, {duration(r['waited'])} in the gate); "
            f"interval {round(r['interval'], 3):g}s{', ' + state if state else ''}; "
            f"backoffs {backoffs or 'none'}"
            + (f", crawl-delay {round(r['crawl_delay'], 3):g}s" if r["crawl_delay"] else "")
            + (", DEAD" if r["dead"] else ""))
    return "\n".join(lines)
