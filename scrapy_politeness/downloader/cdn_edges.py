"""Telling CDN edges from the crawl's own evidence: DNS answers and response headers.

The decisions are :class:`~scrapy_politeness.policy.cdn_edges.CdnEdges`'; this
feeds them (a CNAME chain from the DNS cache, each response's headers from the
slot tickets), says once per address that it is an edge, counts it in
``politeness/ip/cdn_edges`` and lists the edges in the closing report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from scrapy_politeness.observe.observer import STATS
from scrapy_politeness.policy.cdn_edges import CdnEdges, Edge

if TYPE_CHECKING:
    from scrapy.http.headers import Headers
    from scrapy.statscollectors import StatsCollector

__all__ = ["REPORTED", "EdgeWatch"]

logger = logging.getLogger("scrapy_politeness.middleware")

REPORTED = 10
"""Edges named in the closing report (the stat counts them all)."""


class EdgeWatch:
    """Feeds the evidence in and says what it made of it (see the module doc)."""

    __slots__ = ("edges", "on_edge", "spaced", "stats")

    def __init__(self, edges: CdnEdges, stats: StatsCollector, *, edge_floor: float) -> None:
        self.edges = edges
        self.stats = stats
        self.spaced = "spaced per site" if edge_floor <= 0 else \
            f"spaced per site and by the edge floor {edge_floor:g}s"
        # Called with (ip, edge) for each address this process recognised (shared backends).
        self.on_edge: Callable[[str, Edge], None] | None = None

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

    def learnt(self, ip: str, cdn: str, evidence: str) -> None:
        """An edge another process (or an earlier run) recognised."""
        if ip not in self.edges.edges:
            self.edges.restore(ip, cdn, evidence)
            self.stats.inc_value(STATS + "ip/cdn_edges")

    def _recognised(self, ip: str, edge: Edge) -> None:
        self.stats.inc_value(STATS + "ip/cdn_edges")
        logger.info("%s is %s %s edge (%s): %s", ip, "an" if edge.cdn[0] in "AEIOU" else "a",
                    edge.cdn, edge.evidence, self.spaced)
        if self.on_edge is not None:
            self.on_edge(ip, edge)

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
