"""Host name -> bucket key, per ``POLITENESS_HOST_GROUPING``."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from scrapy_politeness.policy import host_key

if TYPE_CHECKING:
    from scrapy_politeness.policy.cdn_edges import CdnEdges

__all__ = ["TRIM_AT", "HostKeys", "make_key_function"]

TRIM_AT = 4096
"""Names the memos may hold after an eviction pass."""


def make_key_function(grouping: str) -> Callable[[str], str]:
    """``"host"``: the normalised host name; ``"domain"``: its registrable domain."""
    if grouping == "host":
        return lru_cache(maxsize=65536)(host_key)
    from tldextract import TLDExtract

    # The bundled public suffix list snapshot: no network fetch at start.
    extract = TLDExtract(suffix_list_urls=(), cache_dir=None)

    @lru_cache(maxsize=65536)
    def domain_key(hostname: str) -> str:
        key = host_key(hostname)
        result = extract(key)
        return result.top_domain_under_public_suffix or key

    return domain_key


class HostKeys:
    """Bucket keys for host names and IPs, shared by the middleware and the queue.

    ``key(hostname)`` is the host bucket (per ``POLITENESS_HOST_GROUPING``);
    ``ip_bucket(ip)`` the IP bucket, or None for an IP in an exempt network
    (``POLITENESS_IP_EXEMPT``: a CDN front end serving unrelated sites) and for
    a recognised CDN edge (``edges``) when ``POLITENESS_EDGE_FLOOR`` is 0.
    """

    __slots__ = ("_edges", "_exempt", "_networks", "key")

    def __init__(self, grouping: str, exempt: tuple[Any, ...] = (),
                 edges: CdnEdges | None = None) -> None:
        self.key = make_key_function(grouping)
        self._networks = exempt
        self._exempt: dict[str, bool] = {}
        self._edges = edges  # recognised edges with no IP bucket (no edge floor)

    def ip_bucket(self, ip: str | None) -> str | None:
        """The IP bucket key, or None when unknown, exempt or an unfloored edge."""
        if ip is None:
            return None
        if self._edges is not None and ip in self._edges.edges:
            return None
        if not self._networks:
            return ip
        exempt = self._exempt.get(ip)
        if exempt is None:
            addr = ipaddress.ip_address(ip)
            exempt = self._exempt[ip] = any(addr in net for net in self._networks)
        return None if exempt else ip

    def trim(self) -> None:
        """Bound the memos (called at each eviction pass): past ``TRIM_AT``
        names they start afresh, so what they hold follows the hosts in use
        (an active host's key is worked out again once, ~1 µs), not the last
        65,536 hosts of a crawl that has moved on."""
        if len(self._exempt) > TRIM_AT:
            self._exempt.clear()
        info = getattr(self.key, "cache_info", None)
        if info is not None and info().currsize > TRIM_AT:
            self.key.cache_clear()  # type: ignore[attr-defined]
