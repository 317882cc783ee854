"""Which addresses are CDN edges: one front end for many unrelated sites.

The per-IP bucket protects one machine serving many vhosts. A CDN edge is
not one machine behind one origin: each site behind it has its own origin,
so spacing all of them by the address's floor throttles unrelated sites
together. An address is recognised as an edge from evidence the crawl
already has, never from a query of its own:

- **CNAME**: a DNS answer whose CNAME chain ends under a CDN's domain
  (``CNAME_SUFFIXES``). One is enough. The site's owner writes the CNAME, but
  the addresses at the end of the chain are the CDN's zone's answer: a
  resolver takes them from the CDN's name servers (records out of the site's
  zone are not believed from the site's servers), so a site cannot make its
  own shared host look like a CDN's address this way.
- **Headers**: a response carrying headers that the CDN's edges set
  (``HEADER_SIGNATURES``), seen from at least ``SITES_NEEDED`` different sites
  (host keys) on the address. Any site can send any header, so one site alone
  could talk the crawler into unspacing its neighbours on a shared host; the
  neighbours would have to send the same CDN's headers too.

Memory is bounded: at most ``MAX_EDGES`` recognised addresses and
``MAX_PENDING`` with partial evidence, the least recently seen forgotten
first (``policy.idle_maps``). Standard library only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from scrapy_politeness.policy.idle_maps import refit

__all__ = ["CNAME_SUFFIXES", "HEADER_SIGNATURES", "MAX_EDGES", "MAX_PENDING", "SITES_NEEDED",
           "CdnEdges", "Edge", "cdn_of_headers", "cdn_of_name"]

SITES_NEEDED = 2
"""Different sites whose responses on one address must carry a CDN's headers."""
MAX_EDGES = 65536
"""Recognised edge addresses kept (least recently confirmed forgotten first)."""
MAX_PENDING = 16384
"""Addresses with header evidence from fewer than ``SITES_NEEDED`` sites kept."""

CNAME_SUFFIXES: dict[str, str] = {
    # https://developers.cloudflare.com/dns/zone-setups/partial-setup/
    # (a CNAME setup points a name at <name>.cdn.cloudflare.net)
    "cdn.cloudflare.net": "Cloudflare",
    # https://docs.fastly.com/en/guides/working-with-cname-records-and-your-dns-provider
    # (global.fastly.net, *.map.fastly.net, dualstack.*.fastly.net; TLS: *.fastlylb.net)
    "fastly.net": "Fastly",
    "fastlylb.net": "Fastly",
    # https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/CNAMEs.html
    # (a distribution's domain name is dxxxxxxxx.cloudfront.net)
    "cloudfront.net": "CloudFront",
    # https://techdocs.akamai.com/property-mgr/docs/edge-hostnames
    # (edge hostnames end in edgesuite.net or edgekey.net and map to akamai(edge).net)
    "edgesuite.net": "Akamai",
    "edgekey.net": "Akamai",
    "akamaiedge.net": "Akamai",
    "akamai.net": "Akamai",
    # https://learn.microsoft.com/en-us/azure/frontdoor/front-door-custom-domain
    # (an endpoint is <name>-<hash>.z01.azurefd.net)
    "azurefd.net": "Azure Front Door",
}
"""CNAME target domain -> CDN: a canonical name at or under the domain is its edge."""

Header = Callable[[str], "str | None"]
"""A response's header value by lower-case name (None when absent)."""


def _cloudflare(header: Header) -> bool:
    # https://developers.cloudflare.com/fundamentals/reference/http-headers/
    # (CF-RAY on every proxied response; the edge answers with Server: cloudflare)
    server = header("server")
    return server is not None and server.strip().lower() == "cloudflare" \
        and header("cf-ray") is not None


def _cloudfront(header: Header) -> bool:
    # https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/
    #   RequestAndResponseBehaviorCustomOrigin.html (X-Amz-Cf-Id, X-Amz-Cf-Pop on responses)
    return header("x-amz-cf-id") is not None


def _fastly(header: Header) -> bool:
    # https://www.fastly.com/documentation/reference/http/http-headers/X-Served-By/
    # (set by default on every response: cache-{datacenter}{nodeid}-{datacenter})
    served_by = header("x-served-by")
    return served_by is not None and served_by.lstrip().startswith("cache-")


def _akamai(header: Header) -> bool:
    # https://techdocs.akamai.com/property-mgr/reference/latest-global-request-number
    # (the Global Request Number behavior adds Akamai-GRN to responses; Akamai sets no
    # header on every response by default, so the CNAME is its usual evidence)
    return header("akamai-grn") is not None


HEADER_SIGNATURES: tuple[tuple[str, Callable[[Header], bool]], ...] = (
    ("Cloudflare", _cloudflare),
    ("CloudFront", _cloudfront),
    ("Fastly", _fastly),
    ("Akamai", _akamai),
)
"""(CDN, test of a response's headers), in the order tried: a few lookups each."""

_SIGNAL_OF = {"Cloudflare": "CF-RAY", "CloudFront": "X-Amz-Cf-Id", "Fastly": "X-Served-By",
              "Akamai": "Akamai-GRN"}


def cdn_of_name(name: str) -> str | None:
    """The CDN whose domain ``name`` (a canonical name) is at or under, or None.
    O(labels): each parent domain is one dict lookup."""
    name = name.rstrip(".").lower()
    while name:
        cdn = CNAME_SUFFIXES.get(name)
        if cdn is not None:
            return cdn
        _, _, name = name.partition(".")
    return None


def cdn_of_headers(header: Header) -> str | None:
    """The CDN whose edge headers the response carries, or None."""
    for cdn, test in HEADER_SIGNATURES:
        if test(header):
            return cdn
    return None


@dataclass(slots=True)
class Edge:
    """A recognised edge: its CDN and the evidence that made it one."""

    cdn: str
    evidence: str  # says why, for the log line and the report


@dataclass(slots=True)
class _Pending:
    cdn: str
    sites: list[str]  # the host keys that sent the CDN's headers (< SITES_NEEDED)


class CdnEdges:
    """The addresses recognised as CDN edges, and the evidence toward more.

    ``edges`` (a dict: ``ip in edges`` is the O(1) hot-path check) maps each
    recognised address to its :class:`Edge`. ``cname`` and ``headers`` fold one
    piece of evidence in and return the :class:`Edge` when that piece made the
    address one (once per address: the caller logs it), else None.
    """

    __slots__ = ("_high", "_pending", "_pending_high", "edges", "max_edges", "max_pending")

    def __init__(self, max_edges: int = MAX_EDGES, max_pending: int = MAX_PENDING) -> None:
        self.edges: OrderedDict[str, Edge] = OrderedDict()
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self.max_edges = max_edges
        self.max_pending = max_pending
        self._high = self._pending_high = 0

    def __len__(self) -> int:
        return len(self.edges)

    def cname(self, ip: str, canonical: str, hostname: str = "") -> Edge | None:
        """A DNS answer for ``hostname`` led to ``ip`` through a CNAME chain ending at
        ``canonical``; the new edge if that made ``ip`` one."""
        cdn = cdn_of_name(canonical)
        if cdn is None:
            return None
        via = f" ({hostname} is a CNAME to {canonical.rstrip('.')})" if hostname else ""
        return self._recognise(ip, Edge(cdn, f"CNAME{via}"))

    def headers(self, ip: str, site: str, header: Header) -> Edge | None:
        """A response of site ``site`` (its host key) from ``ip``, its headers by
        ``header``; the new edge if it is the ``SITES_NEEDED``-th site of one CDN."""
        edge = self.edges.get(ip)
        if edge is not None:
            return None
        pending = self._pending.get(ip)
        if pending is not None and site in pending.sites:
            return None  # this site already counted: no lookups
        cdn = cdn_of_headers(header)
        if cdn is None:
            return None
        if pending is None or pending.cdn != cdn:
            pending = _Pending(cdn, [])
        pending.sites.append(site)
        if len(pending.sites) < SITES_NEEDED:
            self._pending[ip] = pending
            self._pending.move_to_end(ip)
            self._pending_high = max(self._pending_high, len(self._pending))
            while len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)
            return None
        self._pending.pop(ip, None)
        self._pending, self._pending_high = refit(self._pending, self._pending_high)
        return self._recognise(ip, Edge(cdn, f"{_SIGNAL_OF[cdn]} from {len(pending.sites)} sites"))

    def restore(self, ip: str, cdn: str, evidence: str) -> None:
        """Take an edge another process or an earlier run recognised."""
        if ip not in self.edges:
            self._recognise(ip, Edge(cdn, evidence))

    def _recognise(self, ip: str, edge: Edge) -> Edge | None:
        if ip in self.edges:
            self.edges.move_to_end(ip)  # confirmed again: kept longer
            return None
        self._pending.pop(ip, None)
        self.edges[ip] = edge
        self._high = max(self._high, len(self.edges))
        if len(self.edges) > self.max_edges:
            self.edges.popitem(last=False)
            self.edges, self._high = refit(self.edges, self._high)
        return edge
