"""The scheduler queue's DNS lookups: a few at a time, in the order hosts are needed.

A broad crawl pushes its whole start list into the scheduler within seconds.
Starting a lookup for every new name then (one task each, tens of thousands at
once) kept the event loop busy with lookups for hosts needed minutes later
while the first hosts waited, and sends a burst of queries a real resolver
drops. Here a name waits as one small heap entry, ``(-priority, arrival,
key)``, and at most ``limit`` lookups run: the highest priority first, then
first come first served, as the hosts' requests will be handed out. A name
that got into the DNS cache meanwhile (another request resolved it) needs no
query when its turn comes.

No request taken from the queue waits for DNS in the downloader (where it
would hold one of ``CONCURRENT_REQUESTS`` for the lookup's time): a retried
request of a name whose failure was transient, and a host whose answer ran
out while it waited, are looked up again here, the host held meanwhile.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.utils.httpobj import urlparse_cached

from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.policy import ip_literal

if TYPE_CHECKING:
    from scrapy import Request

    from scrapy_politeness.scheduler.host_heap import HostEntry, HostHeap

__all__ = ["HOLD_PER_POP", "QueueLookups"]

Done = Callable[[str], object]
NEEDED_NOW = 1 << 62  # a re-lookup's priority: its host was next
HOLD_PER_POP = 32  # hosts one pop sends to their lookup at most (a resumed JOBDIR: thousands)


class QueueLookups:
    """Lookups for the hosts a queue holds back, at most ``limit`` in flight.

    ``done(key)`` runs when a host's lookup ended (answered or failed: the
    cache has the outcome), or at once when its name needs none.
    """

    __slots__ = ("_dns", "_done", "_flying", "_index", "_seq", "_skips", "_waiting", "limit")

    def __init__(self, dns: DnsCache, limit: int, index: HostHeap, done: Done, *,
                 skips: Callable[[str], bool] = lambda hostname: False) -> None:
        self._dns = dns
        self._skips = skips  # names never looked up here (a proxy carries them, local DNS off)
        self._index = index
        self.limit = max(1, limit)
        self._done = done
        # (-priority, arrival, key, name, ask again)
        self._waiting: list[tuple[int, int, str, str, bool]] = []
        self._flying: set[str] = set()  # host keys whose lookup runs
        self._seq = itertools.count()

    def __len__(self) -> int:
        """Hosts waiting for their lookup or in one."""
        return len(self._waiting) + len(self._flying)

    def add(self, key: str, hostname: str, priority: int, *, ask_again: bool = False) -> None:
        """Look ``hostname`` up for host ``key`` in its turn.

        ``ask_again``: the cached answer is a transient failure to be asked
        again (a retried request), not a miss.
        """
        if key in self._flying:
            return
        heapq.heappush(self._waiting, (-priority, next(self._seq), key, hostname, ask_again))
        self._start()

    def first(self, key: str, hostname: str, request: Request) -> bool:
        """A new host's first request: whether it waits for a lookup (a name not
        cached, or a retry's transient failure) rather than entering the heap."""
        if ip_literal(hostname) is not None or self._skips(hostname):
            return False
        dns = self._dns
        found = dns.lookup(hostname)
        if found is DnsCache.MISS:
            self.add(key, hostname, request.priority)
            return True
        if found is None and "retry_times" in request.meta and dns.transient(hostname):
            self.add(key, hostname, request.priority, ask_again=True)
            return True
        return False

    def retry(self, host: HostEntry, request: Request) -> bool:
        """A retried request of a known host whose name failed transiently: the
        host waits while the name is looked up again. Whether it now waits."""
        hostname = urlparse_cached(request).hostname
        dns = self._dns
        if hostname is None or dns.lookup(hostname) is not None or not dns.transient(hostname):
            return False
        index = self._index
        key = host.key
        if not host.seq and key not in index.idle:
            return True  # waiting for a lookup already
        if key in index.idle:
            index.wake(key)
        host.hold()
        host.hostname = hostname
        self.add(key, hostname, request.priority, ask_again=True)
        return True

    def known(self, host: HostEntry) -> bool:
        """Before ``host`` is served: its name is known and cached. A host restored
        from ``JOBDIR`` (its name unknown yet) learns it from its next request and
        is re-timed; one whose answer expired is looked up again. Whether it now
        waits (False: serve it)."""
        if host.hostname is not None:
            return self.expired(host)
        try:
            request = host.queue.peek()
        except NotImplementedError:  # a downstream queue without peek
            return False
        hostname = None if request is None else urlparse_cached(request).hostname
        if request is None or hostname is None:
            return False
        host.hostname = hostname
        host.hold()
        if not self.first(host.key, hostname, request):
            self._done(host.key)  # cached already: re-timed by its buckets
        return True

    def expired(self, host: HostEntry) -> bool:
        """``host`` (about to be served) has a name whose answer ran out while it
        waited: it waits for a new one here. Whether it now waits."""
        hostname = host.hostname
        if hostname is None or self._dns.lookup(hostname) is not DnsCache.MISS \
                or ip_literal(hostname) is not None or self._skips(hostname):
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop to look it up on: the middleware does
            return False
        host.hold()
        self.add(host.key, hostname, NEEDED_NOW)
        return True

    def _start(self) -> None:
        waiting = self._waiting
        while waiting and len(self._flying) < self.limit:
            _, _, key, name, ask_again = heapq.heappop(waiting)
            if key in self._flying:  # already looked up since (a second add)
                continue
            cached = self._dns.lookup(name)
            if cached is not DnsCache.MISS and not (ask_again and cached is None):
                self._done(key)  # resolved meanwhile: no query
                continue
            try:  # the cache's own single-flight task, which the cache holds until it ends
                lookup = self._dns.flight(name)
            except RuntimeError:  # no event loop: the gate resolves it when it gets there
                self._done(key)
                continue
            self._flying.add(key)
            lookup.add_done_callback(self._ended(key))

    def _ended(self, key: str) -> Callable[[asyncio.Task[Any]], None]:
        def ended(_: asyncio.Task[Any]) -> None:
            if key in self._flying:  # not cleared by close()
                self._flying.discard(key)
                self._done(key)
                self._start()

        return ended

    def clear(self) -> None:
        """Forget every waiting host (the queue closes); lookups in flight end unheard."""
        self._waiting.clear()
        self._flying.clear()
