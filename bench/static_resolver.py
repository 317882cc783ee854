"""A tiny Twisted name resolver answering from a fixed map, for stock-Scrapy crawls.

The farm's names (``*.farm.test``) exist only in the farm's own DNS server.
The plugin resolves them with its own DNS code; stock Scrapy configurations
must not use that code, so they get this resolver instead: set
``TWISTED_DNS_RESOLVER = "bench.static_resolver.StaticResolver"`` in the
settings given to ``CrawlerProcess`` (the process-level settings decide the
reactor's resolver, see ``scrapy.crawler.CrawlerProcess._setup_reactor``) and
pass the map as JSON ``{"name": "ip", ...}`` in the environment variable
:data:`ENV_VAR`. Unknown names fail like an NXDOMAIN; a name mapped to
``"timeout:SECONDS"`` fails after that long, like a DNS server that never
answers (the dns-faults benchmark). With ``CONCURRENT_REQUESTS_PER_IP`` set,
the map is also put in Scrapy's own DNS cache at start, so stock's per-IP
download slots key every request by its IP (a warm cache).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer  # type: ignore[import-untyped]

ENV_VAR = "BENCH_STATIC_HOSTS"

__all__ = ["ENV_VAR", "StaticResolver"]


def _load_map(raw: str | None) -> dict[str, str]:
    if not raw:
        return {}
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"{ENV_VAR} must hold a JSON object name -> ip")
    return {str(k).rstrip(".").lower(): str(v) for k, v in data.items()}


@implementer(IResolverSimple)
class StaticResolver:
    """IResolverSimple over a name -> IPv4 map (no I/O, no cache needed)."""

    def __init__(self, reactor: Any, hosts: dict[str, str]) -> None:
        self.reactor = reactor
        self.hosts = hosts

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> StaticResolver:
        hosts = _load_map(os.environ.get(ENV_VAR))
        if crawler.settings.getint("CONCURRENT_REQUESTS_PER_IP"):
            # Stock Scrapy keys a download slot by IP only for a name already in its
            # DNS cache; a cold cache would pace every host's first request by name.
            from scrapy.resolver import dnscache

            for name, ip in hosts.items():
                dnscache[name] = ip
        return cls(reactor, hosts)

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        ip = self.hosts.get(name.rstrip(".").lower())
        if ip is None:
            return defer.fail(DNSLookupError(f"{name}: not in {ENV_VAR}"))
        if ip.startswith("timeout:"):
            d: defer.Deferred[str] = defer.Deferred()
            self.reactor.callLater(float(ip.split(":", 1)[1]), d.errback,
                                   DNSLookupError(f"{name}: timed out"))
            return d
        return defer.succeed(ip)
