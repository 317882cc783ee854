"""The periodic politeness log line, in the spirit of Scrapy's LogStats.

Every ``POLITENESS_LOG_INTERVAL`` seconds (checked by the middleware's
existing 0.25 s periodic tick, so no timer of its own) one INFO line::

    Politeness: 12 hosts, 30 waiting in the gate (oldest 4.2s); 57 dispatched
    (wait mean 0.81s, max 3.90s); 2 hosts backing off, 1 dead

Pure Python on the policy tables: no Scrapy import.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from scrapy_politeness.policy import HostTable

__all__ = ["LOG_FORMAT", "PeriodWaits", "Snapshot", "plural", "plural_s", "report_text", "snapshot"]

# Each "%s" after a noun is its plural ending (see ``plural_s``): "1 host", "2 hosts".
LOG_FORMAT = ("Politeness: %d host%s, %d waiting in the gate (oldest %.1fs); %d dispatched "
              "(wait mean %.2fs, max %.2fs); %d host%s backing off, %d dead")


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


@dataclass(frozen=True, slots=True)
class Snapshot:
    hosts: int
    waiting: int
    oldest_wait: float
    dispatched: int
    mean_wait: float
    max_wait: float
    backing_off: int
    dead: int

    def log(self, logger: logging.Logger) -> None:
        logger.info(LOG_FORMAT, self.hosts, plural_s(self.hosts), self.waiting,
                    self.oldest_wait, self.dispatched, self.mean_wait, self.max_wait,
                    self.backing_off, plural_s(self.backing_off), self.dead)


def snapshot(hosts: HostTable, waits: PeriodWaits, waiting: int,
             oldest_wait: float) -> Snapshot:
    """What the log line shows now; resets the period's waits.

    A host is *backing off* while its adaptive interval is above its default
    (a Crawl-delay alone does not count: the site asked, nothing went wrong).
    """
    backing_off = dead = 0
    for state in hosts.states():  # the active hosts only: idle ones are evicted
        if state.dead:
            dead += 1
        elif state.adaptive > state.config.default + 1e-9:
            backing_off += 1
    dead += hosts.verdicts.counts()[0]  # idle dead hosts, kept as compact records
    count, mean, top = waits.take()
    return Snapshot(len(hosts), waiting, oldest_wait, count, mean, top, backing_off, dead)


def report_text(rows: list[dict[str, Any]]) -> str:
    """The closing report's lines, one per host of ``host_report``; numbers rounded."""
    lines = []
    for r in rows:
        backoffs = " ".join(f"{cause}:{n}" for cause, n in sorted(r["backoffs"].items()))
        lines.append(
            f"  {r['host']}: {plural(r['requests'], 'request')}, waited {r['waited']:.1f}s, "
            f"interval {round(r['interval'], 3):g}s, backoffs {backoffs or 'none'}"
            + (f", crawl-delay {round(r['crawl_delay'], 3):g}s" if r["crawl_delay"] else "")
            + (", DEAD" if r["dead"] else ""))
    return "\n".join(lines)
