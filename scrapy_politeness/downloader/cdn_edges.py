"""Telling CDN edges from the crawl's own evidence: DNS answers and response headers.

The decisions are :class:`~scrapy_politeness.policy.cdn_edges.CdnEdges`'; this
feeds them (a CNAME chain from the DNS cache, each response's headers from the
slot tickets), says once per address that it is an edge, counts it in
``politeness/ip/cdn_edges`` and lists the edges in the closing report. With a
shared backend that keeps edges (Redis: a hash in the namespace) each edge
recognised here is told to the fleet, and the fleet's are read every
``SHARE_EVERY`` seconds: one process's recognition counts for all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scrapy_politeness.observe.observer import STATS
from scrapy_politeness.policy.cdn_edges import CdnEdges, Edge

if TYPE_CHECKING:
    from scrapy.http.headers import Headers
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.dns.cache import DnsCache

__all__ = ["REPORTED", "SHARE_EVERY", "EdgeFleet", "EdgeWatch", "watch_edges"]

logger = logging.getLogger("scrapy_politeness.middleware")

REPORTED = 10
"""Edges named in the closing report (the stat counts them all)."""
SHARE_EVERY = 2.0
"""Seconds between two reads of the fleet's edges (one HLEN when none is new)."""


@runtime_checkable
class EdgeFleet(Protocol):
    """A shared backend that keeps the fleet's edges (the Redis backend)."""

    async def put_edge(self, ip: str, record: str) -> None: ...

    async def fleet_edges(self, known: int) -> dict[str, str] | None: ...


class EdgeWatch:
    """Feeds the evidence in and says what it made of it (see the module doc)."""

    __slots__ = ("_fleet_known", "_next_read", "_reading", "_tasks", "edges", "fleet", "spaced",
                 "stats")

    def __init__(self, edges: CdnEdges, stats: StatsCollector, *, edge_floor: float,
                 fleet: EdgeFleet | None = None) -> None:
        self.edges = edges
        self.stats = stats
        self.spaced = "spaced per site" if edge_floor <= 0 else \
            f"spaced per site and by the edge floor {edge_floor:g}s"
        self.fleet = fleet
        self._fleet_known = 0  # edges the fleet's hash held at the last read
        self._next_read = 0.0
        self._reading = False
        self._tasks: set[asyncio.Task[None]] = set()

    def cname(self, hostname: str, canonical: str, addresses: tuple[str, ...]) -> None:
        """A DNS answer of ``hostname`` came through a CNAME chain to ``canonical``."""
        for ip in addresses:
            edge = self.edges.cname(ip, canonical, hostname)
            if edge is not None:
                self._recognised(ip, edge)

    def response(self, ip: str, key: str, headers: Headers) -> None:
        """A response of host ``key`` from ``ip``: O(1), a few header lookups at most."""
        if ip in self.edges.edges:
            return

        def header(name: str) -> str | None:
            value = headers.get(name)
            return None if value is None else value.decode("latin-1")

        edge = self.edges.headers(ip, key, header)
        if edge is not None:
            self._recognised(ip, edge)

    def learnt(self, ip: str, cdn: str, evidence: str) -> bool:
        """An edge another process (or an earlier run) recognised; True when new here."""
        if ip in self.edges.edges:
            return False
        self.edges.restore(ip, cdn, evidence)
        self._said(ip, self.edges.edges[ip])
        return True

    def read_fleet(self, now: float) -> None:
        """Read the fleet's edges when ``SHARE_EVERY`` passed since the last read."""
        if self.fleet is None or self._reading or now < self._next_read:
            return
        self._next_read = now + SHARE_EVERY
        self._reading = True
        self._spawn(self._read_fleet(self.fleet))

    async def read_fleet_now(self) -> None:
        """Read the fleet's edges now (at open: before the first request)."""
        if self.fleet is not None and not self._reading:
            self._reading = True
            await self._read_fleet(self.fleet)

    async def _read_fleet(self, fleet: EdgeFleet) -> None:
        try:
            edges = await fleet.fleet_edges(self._fleet_known)
        finally:
            self._reading = False
        if edges is None:
            return
        self._fleet_known = len(edges)
        for ip, record in edges.items():
            cdn, _, evidence = record.partition("\t")
            self.learnt(ip, cdn, f"{evidence}, from another process")

    def _recognised(self, ip: str, edge: Edge) -> None:
        self._said(ip, edge)
        if self.fleet is not None:
            self._spawn(self.fleet.put_edge(ip, f"{edge.cdn}\t{edge.evidence}"))

    def _said(self, ip: str, edge: Edge) -> None:
        self.stats.inc_value(STATS + "ip/cdn_edges")
        logger.info("%s is %s %s edge (%s): %s", ip, "an" if edge.cdn[0] in "AEIOU" else "a",
                    edge.cdn, edge.evidence, self.spaced)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a test calling in directly): nothing to share with
            coro.close()
            return
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("politeness: could not share a CDN edge with the fleet: %r",
                         task.exception())

    def report(self) -> None:
        """One line naming the edges (the first ``REPORTED``), if any."""
        edges = self.edges.edges
        if not edges:
            return
        named = ", ".join(f"{ip} ({edge.cdn}: {edge.evidence})"
                          for ip, edge in list(edges.items())[:REPORTED])
        more = f" and {len(edges) - REPORTED} more" if len(edges) > REPORTED else ""
        logger.info("Politeness report: %d %s recognised as CDN edges, %s: %s%s", len(edges),
                    "address" if len(edges) == 1 else "addresses", self.spaced, named, more)


def watch_edges(edges: CdnEdges | None, stats: StatsCollector, edge_floor: float,
                backend: object, dns: DnsCache) -> EdgeWatch | None:
    """The crawl's watch, wired to DNS so an edge is known before its first response."""
    if edges is None:
        return None
    watch = EdgeWatch(edges, stats, edge_floor=edge_floor,
                      fleet=backend if isinstance(backend, EdgeFleet) else None)
    dns.on_cname = watch.cname
    return watch
