"""Learnt host and IP state kept in ``JOBDIR`` across a pause (docs/usage/pause-resume.md)."""

from __future__ import annotations

import ipaddress
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from scrapy_politeness.jobdir import persistence, suspensions
from scrapy_politeness.jobdir import shutdown_kind as jobdir
from scrapy_politeness.observe.live_line import plural_s

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.observe.trace import TraceWriter
    from scrapy_politeness.policy import HostTable, IPTable
    from scrapy_politeness.policy.breaker import Breaker
    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["JobState"]

logger = logging.getLogger("scrapy_politeness.middleware")


class JobState:
    """``JOBDIR/politeness-state.json``: restored at open, saved at close.

    Not kept with a shared backend (Redis keeps the state itself) or with
    ``POLITENESS_PERSIST = False``.
    """

    def __init__(self, settings: PolitenessSettings, crawler_settings: BaseSettings,
                 breaker: Breaker | None = None, shared: bool = False) -> None:
        """``breaker``: the suspended hosts, kept too (None: hosts are not suspended)."""
        from scrapy.utils.job import job_dir

        self.directory = job_dir(crawler_settings)
        self.path: str | None = None
        if self.directory is not None and settings.persist and not shared:
            self.path = os.path.join(self.directory, persistence.STATE_FILE)
        self.idle_ttl = settings.idle_ttl
        self.breaker = breaker
        self.unclean: tuple[str, str, str] | None = None  # what inspect() found

    def inspect(self) -> None:
        """Find out whether the last run left the JOBDIR unclean (``unclean``:
        JOBDIR, evidence, what was done); :meth:`restore` warns of it.

        Must run before the scheduler opens the JOBDIR: the middleware is built
        before it, so the middleware calls this from its constructor."""
        if self.directory is not None:
            ours = persistence.STATE_FILE if self.path is not None else None
            self.unclean = jobdir.inspect_at_start(self.directory, ours)

    def restore(self, hosts: HostTable, ips: IPTable, now: float, stats: StatsCollector,
                trace: TraceWriter | None) -> None:
        """Warn of an unclean JOBDIR (found by :meth:`inspect`), load the saved state
        (the suspended hosts' breakers too)."""
        if self.unclean:
            stats.set_value("politeness/jobdir/unclean", 1)
            logger.warning(jobdir.UNCLEAN_WARNING, *self.unclean)
        if self.path is None:
            return
        try:
            document = persistence.load(self.path)
            if document is not None:
                suspensions.check(document)
        except persistence.StateError as exc:
            logger.warning("politeness: ignoring the saved host state %s (%s); starting "
                           "afresh", self.path, exc)
            return
        if document is None:
            return
        wall = time.time()
        restored = persistence.restore(hosts, document, now, wall, self.idle_ttl)
        held = persistence.restore_ips(ips, document, now, wall)
        restore_cdn_edges(ips, document, stats, self.path)
        stats.set_value("politeness/state/restored_hosts", len(restored))
        stats.set_value("politeness/state/restored_ips", held)
        if self.breaker is not None and document.get("suspended"):
            suspended = suspensions.restore(self.breaker, document, now, wall)
            stats.set_value("politeness/state/restored_suspended", suspended)
        logger.info("politeness: restored the state of %d host%s and %d IP%s from %s",
                    len(restored), plural_s(len(restored)), held, plural_s(held), self.path)
        if trace is not None:
            for key, state in restored:
                trace.restored(now, key, state.interval(), document["hosts"][key])

    def save(self, hosts: HostTable, ips: IPTable, now: float, stats: StatsCollector) -> None:
        if self.path is None:
            return
        document = persistence.snapshot([*hosts.items(), *hosts.compact_items()], now,
                                        time.time(), ips.items())
        save_cdn_edges(ips, document)
        if self.breaker:
            document["suspended"] = suspensions.snapshot(self.breaker.items(), now)
        try:
            persistence.save(self.path, document)
        except (OSError, ValueError) as exc:
            logger.error("politeness: could not save the host state to %s: %s", self.path, exc)
            return
        stats.set_value("politeness/state/saved_hosts", len(document["hosts"]))
        stats.set_value("politeness/state/saved_ips", len(document["ips"]))


def save_cdn_edges(ips: IPTable, document: dict[str, Any]) -> None:
    """Keep the CDN edges recognised (``"cdn_edges"``: ip -> [CDN, evidence]): an
    address that is an edge stays one, so a resumed crawl spaces its sites per
    site from the first request."""
    edges = ips.edges
    if edges is not None and edges.edges:
        document["cdn_edges"] = {ip: [e.cdn, e.evidence] for ip, e in edges.edges.items()}


def restore_cdn_edges(ips: IPTable, document: dict[str, Any], stats: StatsCollector,
                      path: str) -> int:
    """Take the saved CDN edges back (entries that are not an address with two
    strings are skipped); counted in ``politeness/ip/cdn_edges``. Returns how many."""
    edges, saved = ips.edges, document.get("cdn_edges")
    if edges is None or not isinstance(saved, dict):
        return 0
    taken = 0
    for ip, entry in saved.items():
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            continue
        if isinstance(entry, list) and len(entry) == 2 and all(isinstance(v, str) for v in entry):
            edges.restore(ip, entry[0], entry[1])
            taken += 1
    if taken:
        stats.inc_value("politeness/ip/cdn_edges", taken)
        logger.info("politeness: %d CDN edge%s restored from %s: spaced per site", taken,
                    plural_s(taken), path)
    return taken
