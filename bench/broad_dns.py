"""Stock Scrapy's name resolution in the broad-crawl bench: Twisted's DNS client to dnsmasq.

Stock Scrapy resolves through the system (``getaddrinfo``), which cannot be
pointed at a name server on another port than 53. This resolver keeps what
Scrapy's default ``CachingThreadedResolver`` does (a lookup when the download
connects, answers kept in Scrapy's ``dnscache`` of ``DNSCACHE_SIZE``) and asks
the bench's dnsmasq with Twisted's own DNS client (no plugin code):
``TWISTED_DNS_RESOLVER = "bench.broad_dns.DnsmasqResolver"`` with the server's
``ip:port`` in the environment variable :data:`ENV_VAR`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from scrapy.resolver import dnscache
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from twisted.names import client, dns
from zope.interface import implementer  # type: ignore[import-untyped]

__all__ = ["ENV_VAR", "DnsmasqResolver"]

ENV_VAR = "BENCH_DNSMASQ"


@implementer(IResolverSimple)
class DnsmasqResolver:
    def __init__(self, reactor: Any, server: tuple[str, int], cache_size: int) -> None:
        self.reactor = reactor
        self.client = client.Resolver(servers=[server], reactor=reactor)  # type: ignore[no-untyped-call]
        dnscache.limit = cache_size

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> DnsmasqResolver:
        ip, port = os.environ[ENV_VAR].rsplit(":", 1)
        size = crawler.settings.getint("DNSCACHE_SIZE") if crawler.settings.getbool(
            "DNSCACHE_ENABLED") else 0
        return cls(reactor, (ip, int(port)), size)

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        if name in dnscache:
            return defer.succeed(dnscache[name])
        d: defer.Deferred[str] = self.client.lookupAddress(  # type: ignore[no-untyped-call]
            name, tuple(timeout) or (1, 3, 11, 45))
        d.addCallbacks(self._first_address, self._failed, callbackArgs=(name,),
                       errbackArgs=(name,))
        return d

    def _first_address(self, result: Any, name: str) -> str:
        for record in result[0]:
            if record.type == dns.A:
                address = str(record.payload.dottedQuad())
                if dnscache.limit:
                    dnscache[name] = address
                return address
        raise DNSLookupError(f"{name}: no A record")

    def _failed(self, failure: Any, name: str) -> None:
        raise DNSLookupError(f"{name}: {failure.getErrorMessage()}")
