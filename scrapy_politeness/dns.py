"""Resolving hosts to the IP the per-IP bucket is keyed on.

dnspython's asyncio resolver keeps the reactor free; answers are cached by
their TTL (clamped), failures briefly; concurrent lookups of one name share a
single query (single flight). Names in the hosts file (``localhost`` among
them) resolve from it, as the system would.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.rdatatype
import dns.resolver

from .policy import ip_literal

__all__ = ["DnsCache", "DnsStats", "read_hosts_file"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class DnsStats:
    lookups: int = 0
    cache_hits: int = 0
    failures: int = 0


def read_hosts_file(path: str | None) -> dict[str, str]:
    """Name -> first address from an /etc/hosts style file (IPv4 preferred)."""
    table: dict[str, str] = {}
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        v6: dict[str, str] = {}
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) < 2 or ip_literal(fields[0]) is None:
                continue
            target = v6 if ":" in fields[0] else table
            for name in fields[1:]:
                target.setdefault(name.lower().rstrip("."), fields[0])
        for name, addr in v6.items():
            table.setdefault(name, addr)
    table.setdefault("localhost", "127.0.0.1")
    return table


class DnsCache:
    """TTL-bounded cache of hostname -> IP in front of a dnspython resolver.

    ``lookup`` answers from the cache synchronously (the hot path: no
    coroutine, no allocation) and returns ``_MISS`` otherwise; ``resolve``
    performs the query. ``pin`` records the answer the gate accounted a fetch
    to, so the connection goes there even if the TTL ran out meanwhile.
    """

    MISS = object()

    def __init__(
        self,
        *,
        nameservers: tuple[tuple[str, int], ...] = (),
        timeout: float = 5.0,
        min_ttl: float = 5.0,
        max_ttl: float = 3600.0,
        negative_ttl: float = 30.0,
        hosts_file: str | None = "/etc/hosts",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_ttl = min_ttl
        self.max_ttl = max_ttl
        self.negative_ttl = negative_ttl
        self.stats = DnsStats()
        self._clock = clock
        self._hosts = read_hosts_file(hosts_file)
        self._cache: dict[str, tuple[str | None, float]] = {}
        self._pins: dict[str, tuple[str, float]] = {}
        self._inflight: dict[str, asyncio.Future[str | None]] = {}
        self._resolver = self._make_resolver(nameservers, timeout)

    @staticmethod
    def _make_resolver(nameservers: tuple[tuple[str, int], ...],
                       timeout: float) -> dns.asyncresolver.Resolver | None:
        if nameservers:
            resolver = dns.asyncresolver.Resolver(configure=False)
            resolver.nameservers = [dns.nameserver.Do53Nameserver(ip, port)
                                    for ip, port in nameservers]
        else:
            try:
                resolver = dns.asyncresolver.Resolver()
            except dns.resolver.NoResolverConfiguration:
                logger.warning("No system DNS configuration; resolving with getaddrinfo")
                return None
        resolver.lifetime = timeout
        resolver.timeout = timeout
        resolver.cache = None  # our cache is the only one, so TTL policy is ours
        return resolver

    def __len__(self) -> int:
        return len(self._cache)

    def lookup(self, hostname: str) -> object:
        """The cached IP (or None for a cached failure), or ``MISS``."""
        entry = self._cache.get(hostname)
        if entry is not None and entry[1] > self._clock():
            self.stats.cache_hits += 1
            return entry[0]
        return self.MISS

    def pin(self, hostname: str, ip: str) -> None:
        """Remember that the gate accounted a fetch of ``hostname`` to ``ip``."""
        self._pins[hostname] = (ip, self._clock())

    def pinned(self, hostname: str) -> str | None:
        """The address the gate last accounted ``hostname`` to, if any."""
        entry = self._pins.get(hostname)
        return entry[0] if entry is not None else None

    async def resolve(self, hostname: str) -> str | None:
        """The IP of ``hostname``, or None when it cannot be resolved."""
        literal = ip_literal(hostname)
        if literal is not None:
            return literal
        cached = self.lookup(hostname)
        if cached is not self.MISS:
            return cached  # type: ignore[return-value]
        pending = self._inflight.get(hostname)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._inflight[hostname] = fut
        try:
            ip, ttl = await self._query(hostname)
        except BaseException as exc:  # the waiters must never hang
            fut.set_exception(exc)
            fut.exception()  # mark retrieved
            raise
        finally:
            self._inflight.pop(hostname, None)
        self._cache[hostname] = (ip, self._clock() + ttl)
        fut.set_result(ip)
        return ip

    async def _query(self, hostname: str) -> tuple[str | None, float]:
        static = self._hosts.get(hostname)
        if static is not None:
            return static, self.max_ttl
        self.stats.lookups += 1
        try:
            if self._resolver is None:
                return await self._getaddrinfo(hostname), self.min_ttl
            for rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
                try:
                    answer = await self._resolver.resolve(hostname, rdtype, search=False)
                except dns.resolver.NoAnswer:
                    continue
                rrset = answer.rrset
                if rrset is None or not len(rrset):
                    continue
                ttl = min(max(float(rrset.ttl), self.min_ttl), self.max_ttl)
                return rrset[0].to_text(), ttl
            raise dns.resolver.NoAnswer()  # type: ignore[no-untyped-call]
        except (dns.exception.DNSException, OSError, ValueError) as exc:
            self.stats.failures += 1
            logger.debug("DNS lookup of %s failed: %r", hostname, exc)
            return None, self.negative_ttl

    @staticmethod
    async def _getaddrinfo(hostname: str) -> str | None:
        infos = await asyncio.get_running_loop().getaddrinfo(hostname, None)
        return str(infos[0][4][0]) if infos else None

    def evict(self, pin_cutoff: float) -> int:
        """Drop expired answers and pins older than ``pin_cutoff``; returns the count."""
        now = self._clock()
        stale = [name for name, (_, expiry) in self._cache.items() if expiry <= now]
        for name in stale:
            del self._cache[name]
        old = [name for name, (_, at) in self._pins.items() if at <= pin_cutoff]
        for name in old:
            del self._pins[name]
        if len(stale) > len(self._cache):  # dicts never shrink on deletion: rebuild
            self._cache = dict(self._cache)
        if len(old) > len(self._pins):
            self._pins = dict(self._pins)
        return len(stale) + len(old)
