"""A name's next address when the one in use does not take the connection.

The download connects to one pinned address (the one the gate accounted it
to), so the connect loop of the system's resolver and browsers, which try the
next address of the answer, is done here: a direct download whose connection
was refused or could not be routed (:func:`not_connected`), to a name whose
answer has an address this request has not tried, frees its slot without
backing the host off, moves the name to that address (``DnsCache.fall_back``)
and goes back to the scheduler; its next pass is accounted to the new
address's IP bucket. Only when every address was tried does the failure count
against the host. Counted in ``politeness/dns/address_fallback``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.httpobj import urlparse_cached

from scrapy_politeness.downloader.failure_kinds import not_connected
from scrapy_politeness.observe.observer import STATS
from scrapy_politeness.policy import next_address

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.dns.cache import DnsCache

__all__ = ["TRIED", "AddressFallback"]

TRIED = "politeness_tried_ips"
"""``Request.meta`` key: the addresses this request could not connect to."""
_AGAIN = "_politeness_next_address"  # set between the failure and process_exception


class AddressFallback:
    """Decides, when a download's connection failed, whether another address is tried."""

    def __init__(self, dns: DnsCache, stats: StatsCollector) -> None:
        self.dns = dns
        self.stats = stats

    def failed(self, request: Request, exc: BaseException, ip: str | None) -> bool:
        """Whether the failed download of ``request`` (accounted to ``ip``)
        goes to the name's next address instead of counting against its host.
        The caller frees the slot with no outcome when it does."""
        if ip is None or request.meta.get("proxy") or not not_connected(exc):
            return False
        hostname = urlparse_cached(request).hostname
        if not hostname:
            return False
        tried = (*request.meta.get(TRIED, ()), ip)
        following = next_address(self.dns.addresses(hostname), tried)
        if following is None:
            return False
        self.dns.fall_back(hostname, ip, following)
        request.meta[TRIED] = list(tried)
        request.meta[_AGAIN] = True
        self.stats.inc_value(STATS + "dns/address_fallback")
        return True

    @staticmethod
    def again(request: Request) -> Request | None:
        """The request to schedule again, if its failure was given to the next address."""
        if not request.meta.pop(_AGAIN, False):
            return None
        return request.replace(dont_filter=True)
