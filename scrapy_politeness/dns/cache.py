"""Resolving hosts to the IP the per-IP bucket is keyed on.

dnspython's asyncio resolver keeps the reactor free, builds every query and
parses every answer. It resolves as a stub resolver does: a query unanswered
for a quarter of the lookup's time (``TRIES``) is sent again, to the next
nameserver in turn, until the lookup's time is up, so one lost datagram costs
a retransmission, not the name; a truncated answer is asked again over TCP.
Answers are cached by their TTL (clamped). A definite negative answer
(NXDOMAIN, or the name without an address: NODATA) is cached as long as its
zone's SOA says (RFC 2308), no longer than ``negative_ttl``; anything else
(a timeout, SERVFAIL, REFUSED, a socket error) is transient: cached at most
``TRANSIENT_TTL`` so a burst of requests fails once, and a retried request
asks again (``resolve(..., ask_again=True)``). Each failure is kept with its
kind, so a request to a failing name can fail at once. Concurrent lookups of
one name share a single query (single flight) that no one caller can cancel
for the others. Names resolve as the system resolves them
(:mod:`scrapy_politeness.dns.system`): the hosts file first, then DNS with
resolv.conf's search list and ndots. An answer keeps every address, in the
order to try them: when the one in use cannot be connected to, the download
moves to the next (``fall_back``). At most ``MAX_QUERIES`` queries are in flight at
once: a broad crawl enqueues thousands of new names in its first second, and a
burst like that overflows a resolver's UDP buffer, so answers are lost and
healthy names fail as timeouts (Scrapy's own resolver is bounded the same way,
by its thread pool). A name waiting for its turn is not yet on its timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import dns.exception
import dns.rdatatype
import dns.resolver

from scrapy_politeness.dns.failures import DEFINITE, dns_failure_kind, negative_ttl_of
from scrapy_politeness.dns.system import make_resolver, read_hosts_file
from scrapy_politeness.policy import FailureKind, ip_literal
from scrapy_politeness.policy.idle_maps import pop_idle, refit

__all__ = ["MAX_QUERIES", "TRANSIENT_TTL", "TRIES", "DnsCache", "DnsStats", "read_hosts_file"]

_Answer = tuple[tuple[str, ...] | None, float, FailureKind | None]

logger = logging.getLogger(__name__)

MAX_QUERIES = 32
"""DNS queries in flight at once, per crawler."""

TRIES = 4
"""A lookup's time is split in this many tries: each query unanswered for
``timeout / TRIES`` seconds is sent again (dnspython adds its short back-off
between rounds of nameservers), so a lost datagram costs a quarter of it."""

TRANSIENT_TTL = 3.0
"""Seconds a transient failure (timeout, SERVFAIL, socket error) is believed:
the requests of the moment fail once, a retried request asks again."""


@dataclass(slots=True)
class DnsStats:
    lookups: int = 0
    cache_hits: int = 0
    failures: int = 0


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
        resolv_conf: str | None = "/etc/resolv.conf",
        clock: Callable[[], float] = time.monotonic,
        max_queries: int = MAX_QUERIES,
    ) -> None:
        self.min_ttl = min_ttl
        self.max_ttl = max_ttl
        self.negative_ttl = negative_ttl
        self.stats = DnsStats()
        self._clock = clock
        self._hosts = read_hosts_file(hosts_file)
        self._cache: dict[str, tuple[str | None, float]] = {}  # name -> (address in use, expiry)
        self._answers: dict[str, tuple[str, ...]] = {}  # every address, for names with several
        self._failed: dict[str, FailureKind] = {}  # the kind of each cached failure
        self._definite: set[str] = set()  # those that are the zone's answer (RFC 2308)
        self._used: OrderedDict[str, float] = OrderedDict()  # name -> last use, oldest first
        self._pins: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._high = self._pins_high = 0  # the maps' high-water marks (policy.idle_maps)
        self._inflight: dict[str, asyncio.Task[str | None]] = {}
        self._resolver = make_resolver(nameservers, timeout, TRIES, resolv_conf)
        self._max_queries = max_queries
        self._turns: asyncio.Semaphore | None = None  # made on the loop that first queries
        self.on_cname: Callable[[str, str, tuple[str, ...]], None] | None = None  # CNAME'd answers

    def __len__(self) -> int:
        return len(self._cache)

    def lookup(self, hostname: str) -> object:
        """The cached IP (or None for a cached failure), or ``MISS``."""
        entry = self._cache.get(hostname)
        if entry is not None:
            now = self._clock()
            if entry[1] > now:
                self.stats.cache_hits += 1
                self._used[hostname] = now
                self._used.move_to_end(hostname)
                return entry[0]
        return self.MISS

    def last_answer(self, hostname: str) -> object:
        """The cached IP (None: a failure) even past its TTL, until evicted; else ``MISS``.

        For a request the scheduler queue handed out just as its answer expired:
        the queue looked it up, so the middleware need not wait for DNS again.
        """
        entry = self._cache.get(hostname)
        return self.MISS if entry is None else entry[0]

    def failure(self, hostname: str) -> FailureKind:
        """Why ``hostname`` last failed to resolve (``DNS_ERROR`` when unknown)."""
        return self._failed.get(hostname, FailureKind.DNS_ERROR)

    def transient(self, hostname: str) -> bool:
        """Whether the failure cached for ``hostname`` may go away when asked again."""
        return hostname in self._failed and hostname not in self._definite

    def pin(self, hostname: str, ip: str) -> None:
        """Remember that the gate accounted a fetch of ``hostname`` to ``ip``.

        Stored under the spelling the resolver asks with (no trailing dot;
        URL host names are already lower case), whatever the URL's spelling.
        """
        name = hostname.rstrip(".")
        self._pins[name] = (ip, self._clock())
        self._pins.move_to_end(name)

    def pinned(self, hostname: str) -> str | None:
        """The address the gate last accounted ``hostname`` to, if any."""
        entry = self._pins.get(hostname)
        return entry[0] if entry is not None else None

    async def resolve(self, hostname: str, *, ask_again: bool = False) -> str | None:
        """The IP of ``hostname``, or None when it cannot be resolved.

        ``ask_again``: a transient failure in the cache is asked again (a
        retried request); a definite one still stands.
        """
        literal = ip_literal(hostname)
        if literal is not None:
            return literal
        cached = self.lookup(hostname)
        if cached is not self.MISS and not (cached is None and ask_again
                                            and self.transient(hostname)):
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
        addresses, ttl, kind = await self._query(hostname)
        ip = addresses[0] if addresses else None
        now = self._clock()
        self._cache[hostname] = (ip, now + ttl)
        self._used[hostname] = now
        self._used.move_to_end(hostname)
        if addresses is not None and len(addresses) > 1:
            self._answers[hostname] = addresses
        else:
            self._answers.pop(hostname, None)
        if kind is not None:
            self._failed[hostname] = kind
        else:
            self._failed.pop(hostname, None)
            self._definite.discard(hostname)
        return ip

    def addresses(self, hostname: str) -> tuple[str, ...]:
        """Every address of the cached answer for ``hostname``, in the order to
        try them (empty when nothing is cached)."""
        several = self._answers.get(hostname)
        if several is not None:
            return several
        entry = self._cache.get(hostname)
        return () if entry is None or entry[0] is None else (entry[0],)

    def fall_back(self, hostname: str, failed: str, to: str) -> None:
        """Connecting to ``failed`` did not work: the name's requests go to
        ``to`` (another address of its answer) until the answer expires."""
        entry = self._cache.get(hostname)
        if entry is not None and entry[0] == failed and to in self._answers.get(hostname, ()):
            self._cache[hostname] = (to, entry[1])

    async def _query(self, hostname: str) -> _Answer:
        """(addresses, seconds to cache them, None) or (None, seconds, the failure's kind)."""
        static = self._hosts.get(hostname.rstrip("."))
        if static is not None:
            return static, self.max_ttl, None
        self.stats.lookups += 1
        if self._turns is None:
            self._turns = asyncio.Semaphore(self._max_queries)
        async with self._turns:
            return await self._ask(hostname)

    async def _ask(self, hostname: str) -> _Answer:
        try:
            if self._resolver is None:
                addresses = await self._getaddrinfo(hostname)
                if not addresses:
                    raise dns.resolver.NoAnswer()  # type: ignore[no-untyped-call]
                return addresses, self.min_ttl, None
            no_answer: Exception = dns.resolver.NoAnswer()  # type: ignore[no-untyped-call]
            for rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
                try:
                    # the search list and ndots of resolv.conf apply (use_search_by_default)
                    answer = await self._resolver.resolve(hostname, rdtype)
                except dns.resolver.NoAnswer as exc:
                    no_answer = exc
                    continue
                rrset = answer.rrset
                if rrset is None or not len(rrset):
                    continue
                # the least TTL along a CNAME chain: any link may change first
                least = float(answer.chaining_result.minimum_ttl)
                ttl = min(max(least, self.min_ttl), self.max_ttl)
                addresses = tuple(dict.fromkeys(rr.to_text() for rr in rrset))
                if self.on_cname is not None and answer.canonical_name != answer.qname:
                    self.on_cname(hostname, answer.canonical_name.to_text(), addresses)
                return addresses, ttl, None
            raise no_answer
        except (dns.exception.DNSException, OSError, ValueError) as exc:
            self.stats.failures += 1
            kind = dns_failure_kind(exc)
            soa = negative_ttl_of(exc) if kind in DEFINITE else None
            # RFC 2308 5: a negative answer without an SOA is not cached as one
            ttl = min(TRANSIENT_TTL if soa is None else soa, self.negative_ttl)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("DNS lookup of %s failed (%s, cached %.0fs): %r", hostname, kind,
                             ttl, exc)
            if soa is None:
                self._definite.discard(hostname)
            else:  # the zone's answer: a retry does not ask again
                self._definite.add(hostname)
            return None, ttl, kind

    @staticmethod
    async def _getaddrinfo(hostname: str) -> tuple[str, ...]:
        infos = await asyncio.get_running_loop().getaddrinfo(hostname, None)
        return tuple(dict.fromkeys(str(info[4][0]) for info in infos))

    def evict(self, pin_cutoff: float) -> int:
        """Drop answers not looked up and pins not renewed since ``pin_cutoff``
        (O(evicted): the cache follows the names in use); returns the count.
        An answer expired but in use stays until a new look-up replaces it."""
        self._high = max(self._high, len(self._used))
        gone = pop_idle(self._used, pin_cutoff, float)
        for name in gone:
            self._cache.pop(name, None)
            self._failed.pop(name, None)
            self._definite.discard(name)
            self._answers.pop(name, None)
        self._used, high = refit(self._used, self._high)
        if high < self._high:  # refitted: the others lost as many names
            self._cache, self._failed = dict(self._cache), dict(self._failed)
            self._answers = dict(self._answers)
            self._definite = set(self._definite)
        self._high = high
        self._pins_high = max(self._pins_high, len(self._pins))
        unpinned = pop_idle(self._pins, pin_cutoff, lambda pin: pin[1])
        self._pins, self._pins_high = refit(self._pins, self._pins_high)
        return len(gone) + len(unpinned)
