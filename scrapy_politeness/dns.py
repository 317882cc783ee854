"""Resolving hosts to the IP the per-IP bucket is keyed on.

dnspython's asyncio resolver keeps the reactor free; answers are cached by
their TTL (clamped), failures by their negative TTL (RFC 2308: the SOA of the
authority section, bounded by ``negative_ttl``) with their kind, so a request
to a failing name can fail at once. Concurrent lookups of one name share a
single query (single flight) that no one caller can cancel for the others.
Names in the hosts file (``localhost`` among them) resolve from it, as the
system would. At most ``MAX_QUERIES`` queries are in flight at once: a broad
crawl enqueues thousands of new names in its first second, and a burst like
that overflows a resolver's UDP buffer, so answers are lost and healthy names
fail as timeouts (Scrapy's own resolver is bounded the same way, by its
thread pool). A name waiting for its turn is not yet on its timeout.

The common answer (NOERROR, A records, perhaps after a CNAME chain) is read
straight from the wire (:mod:`.dnsfastpath`) from the first nameserver;
everything else (a failure, an empty answer, a truncated one, AAAA, another
nameserver) is dnspython's resolver's to decide, so its semantics stand.
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
import dns.rdatatype
import dns.resolver

from .dnsfailures import dns_failure_kind, negative_ttl_of
from .dnsfastpath import ask_a
from .dnswire import UdpNameserver, on_plain_sockets
from .policy import FailureKind, ip_literal

__all__ = ["MAX_QUERIES", "DnsCache", "DnsStats", "read_hosts_file"]

logger = logging.getLogger(__name__)

MAX_QUERIES = 32
"""DNS queries in flight at once, per crawler."""


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
        max_queries: int = MAX_QUERIES,
        wire_answers: bool = True,
    ) -> None:
        self.min_ttl = min_ttl
        self.max_ttl = max_ttl
        self.negative_ttl = negative_ttl
        self.stats = DnsStats()
        self._clock = clock
        self._hosts = read_hosts_file(hosts_file)
        self._cache: dict[str, tuple[str | None, float]] = {}
        self._failed: dict[str, FailureKind] = {}  # the kind of each cached failure
        self._pins: dict[str, tuple[str, float]] = {}
        self._inflight: dict[str, asyncio.Task[str | None]] = {}
        self._resolver = self._make_resolver(nameservers, timeout)
        self._timeout = timeout
        # Where the common answer is read from the wire; None: the resolver alone.
        self._direct = _direct_nameserver(self._resolver) if wire_answers else None
        self._max_queries = max_queries
        self._turns: asyncio.Semaphore | None = None  # made on the loop that first queries

    @staticmethod
    def _make_resolver(nameservers: tuple[tuple[str, int], ...],
                       timeout: float) -> dns.asyncresolver.Resolver | None:
        if nameservers:
            resolver = dns.asyncresolver.Resolver(configure=False)
            resolver.nameservers = [UdpNameserver(ip, port) for ip, port in nameservers]
        else:
            try:
                resolver = dns.asyncresolver.Resolver()
            except dns.resolver.NoResolverConfiguration:
                logger.warning("No system DNS configuration; resolving with getaddrinfo")
                return None
            resolver.nameservers = on_plain_sockets(resolver)
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

    def failure(self, hostname: str) -> FailureKind:
        """Why ``hostname`` last failed to resolve (``DNS_ERROR`` when unknown)."""
        return self._failed.get(hostname, FailureKind.DNS_ERROR)

    def pin(self, hostname: str, ip: str) -> None:
        """Remember that the gate accounted a fetch of ``hostname`` to ``ip``.

        Stored under the spelling the resolver asks with (no trailing dot;
        URL host names are already lower case), whatever the URL's spelling.
        """
        self._pins[hostname.rstrip(".")] = (ip, self._clock())

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
        return await asyncio.shield(self.flight(hostname))

    def flight(self, hostname: str) -> asyncio.Task[str | None]:
        """The lookup of ``hostname`` (a name, not an IP literal) in flight,
        started if none is. A caller that only needs its end (the scheduler
        queue) adds a callback to it: no task or coroutine of its own."""
        task = self._inflight.get(hostname)
        if task is None:
            # The query runs as its own task: a caller that is cancelled
            # (a download given up) cancels its wait, not the others' answer.
            task = asyncio.get_running_loop().create_task(self._lookup_and_cache(hostname))
            self._inflight[hostname] = task
            task.add_done_callback(lambda _t: self._inflight.pop(hostname, None))
        return task

    async def _lookup_and_cache(self, hostname: str) -> str | None:
        ip, ttl, kind = await self._query(hostname)
        self._cache[hostname] = (ip, self._clock() + ttl)
        if kind is not None:
            self._failed[hostname] = kind
        else:
            self._failed.pop(hostname, None)
        return ip

    async def _query(self, hostname: str) -> tuple[str | None, float, FailureKind | None]:
        """(IP, seconds to cache it, None) or (None, negative TTL, failure kind)."""
        static = self._hosts.get(hostname)
        if static is not None:
            return static, self.max_ttl, None
        self.stats.lookups += 1
        if self._turns is None:
            self._turns = asyncio.Semaphore(self._max_queries)
        async with self._turns:
            return await self._ask(hostname)

    async def _ask(self, hostname: str) -> tuple[str | None, float, FailureKind | None]:
        try:
            if self._resolver is None:
                ip = await self._getaddrinfo(hostname)
                if ip is None:
                    raise dns.resolver.NoAnswer()  # type: ignore[no-untyped-call]
                return ip, self.min_ttl, None
            if self._direct is not None:
                ip, ttl = await self._ask_directly(hostname, self._direct)
                if ip:
                    return ip, min(max(ttl, self.min_ttl), self.max_ttl), None
            no_answer: Exception = dns.resolver.NoAnswer()  # type: ignore[no-untyped-call]
            for rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
                try:
                    answer = await self._resolver.resolve(hostname, rdtype, search=False)
                except dns.resolver.NoAnswer as exc:
                    no_answer = exc
                    continue
                rrset = answer.rrset
                if rrset is None or not len(rrset):
                    continue
                # the least TTL along a CNAME chain: any link may change first
                least = float(answer.chaining_result.minimum_ttl)
                ttl = min(max(least, self.min_ttl), self.max_ttl)
                return rrset[0].to_text(), ttl, None
            raise no_answer
        except (dns.exception.DNSException, OSError, ValueError) as exc:
            self.stats.failures += 1
            kind = dns_failure_kind(exc)
            ttl = self.negative_ttl
            soa = negative_ttl_of(exc)
            if soa is not None:
                ttl = min(soa, self.negative_ttl)
            logger.debug("DNS lookup of %s failed (%s, cached %.0fs): %r", hostname, kind, ttl,
                         exc)
            return None, ttl, kind

    async def _ask_directly(self, hostname: str, where: tuple[str, int]) -> tuple[str, float]:
        """(IP, TTL) read from the wire; ("", -1) leaves the name to the resolver.

        A timeout is the resolver's too (its lifetime is one timeout), so it
        stands; a socket error may not be (the resolver tries the next
        nameserver), so it does not.
        """
        try:
            return await ask_a(hostname, where[0], where[1], self._timeout)
        except NotImplementedError:  # a loop without add_reader: the resolver from now on
            self._direct = None
        except OSError:
            pass
        return "", -1.0

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
        for name in stale:
            self._failed.pop(name, None)
        old = [name for name, (_, at) in self._pins.items() if at <= pin_cutoff]
        for name in old:
            del self._pins[name]
        if len(stale) > len(self._cache):  # dicts never shrink on deletion: rebuild
            self._cache = dict(self._cache)
        if len(old) > len(self._pins):
            self._pins = dict(self._pins)
        return len(stale) + len(old)


def _direct_nameserver(resolver: dns.asyncresolver.Resolver | None) -> tuple[str, int] | None:
    """The plain UDP nameserver the resolver asks first, if it asks one first."""
    if resolver is None or resolver.rotate or not resolver.nameservers:
        return None
    first = resolver.nameservers[0]
    if isinstance(first, UdpNameserver):
        return first.address, first.port
    return None
