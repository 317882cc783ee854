"""The gate: decides when each waiting request may start.

A request is released only when BOTH its host bucket and its IP bucket
permit; releasing spends both. Requests of one host leave in arrival order.
The gate owns no clock and no timers: the caller passes ``now`` and arms one
timer at :meth:`Gate.next_event`, so it runs the same on a fake clock.

Scheduling is event driven, O(log n) per release: a heap holds one entry per
host whose head request waits for its host bucket, and one entry per IP whose
bucket is the blocker; hosts blocked only by a busy IP queue behind it in
arrival order (round robin between vhosts of one machine).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from scrapy_politeness.policy.eligibility import Eligibility
from scrapy_politeness.policy.tables import HostTable, IPTable

__all__ = ["Gate", "Release"]

T = TypeVar("T")


@dataclass(slots=True)
class Release(Generic[T]):
    """One request the gate let through, and what it spent.

    Not frozen: a driver that hands the release to its token (a future set to
    the release) clears ``token`` first, or the two would form a reference
    cycle that only the garbage collector frees, one per request."""

    token: T
    key: str
    ip: str | None
    interval: float
    at: float
    # Until the request resumes with it, the send slip holds its buckets
    # (``policy.stalls.Unwritten``): a long turn may hold the resume itself.
    until: float = float("-inf")
    unwritten: bool = False


class Gate(Generic[T]):
    """Host and IP buckets in step, with FIFO queues per host.

    When a host or IP may go is :class:`Eligibility`'s rule (with ``margin``
    added to every spacing), the one the scheduler queue estimates by too.
    ``max_in_flight``
    (0 = unlimited) caps the released-but-unfinished requests of a host, so
    released requests never queue again behind the downloader's own
    per-domain concurrency (where they would leave in bursts).
    """

    __slots__ = ("_heap", "_host_ready", "_host_seq", "_in_flight", "_ip_armed", "_ip_lines",
                 "_ip_ready", "_on_ip", "_queues", "_seq", "_since", "_waiting", "eligibility",
                 "hosts", "ips", "max_in_flight")

    def __init__(self, hosts: HostTable, ips: IPTable, *, margin: float = 0.0,
                 max_in_flight: int = 0) -> None:
        self.hosts = hosts
        self.ips = ips
        self.eligibility = Eligibility(hosts, ips, margin)  # shared with the queue's estimates
        self._host_ready = self.eligibility.host_ready
        self._ip_ready = self.eligibility.ip_ready
        self.max_in_flight = max_in_flight
        self._queues: dict[str, deque[tuple[T, str | None]]] = {}
        self._in_flight: dict[str, int] = {}
        self._heap: list[tuple[float, int, str, bool]] = []
        self._seq = 0
        self._host_seq: dict[str, int] = {}
        self._ip_armed: dict[str, int] = {}
        self._ip_lines: dict[str, deque[str]] = {}
        self._on_ip: set[str] = set()
        self._since: dict[str, float] = {}  # when each host's queue last became non-empty
        self._waiting = 0

    # -- queries -----------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Requests submitted and neither released nor dropped."""
        return self._waiting

    def waiting_for(self, key: str) -> int:
        q = self._queues.get(key)
        return len(q) if q else 0

    def waiting_hosts(self) -> Iterator[tuple[str, int, float]]:
        """(key, requests waiting, since when it has had some) of every host with
        requests waiting: for the live line, O(those hosts)."""
        for key, since in self._since.items():
            q = self._queues.get(key)
            if q:
                yield key, len(q), since

    def waiting_host_count(self) -> int:
        """Hosts with requests waiting, O(1)."""
        return len(self._since)

    def in_flight(self, key: str) -> int:
        return self._in_flight.get(key, 0)

    def blocked_heads(self) -> list[tuple[str, T]]:
        """(key, first waiting token) of every host with requests both in flight
        and waiting: the only hosts a lost in-flight slot can hold up."""
        return [(key, q[0][0]) for key in self._in_flight
                if (q := self._queues.get(key))]

    def next_event(self) -> float | None:
        """The earliest instant at which :meth:`poll` may release something."""
        heap = self._heap
        while heap:
            t, seq, key, is_ip = heap[0]
            live = self._ip_armed.get(key) if is_ip else self._host_seq.get(key)
            if live == seq:
                return t
            heapq.heappop(heap)
        return None

    # -- events ------------------------------------------------------------

    def submit(self, key: str, ip: str | None, token: T, now: float) -> None:
        """Queue ``token`` for host ``key`` on ``ip`` (None: no IP bucket)."""
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = deque()
        q.append((token, ip))
        self._waiting += 1
        if len(q) == 1:
            self._since[key] = now
        if len(q) == 1 and key not in self._host_seq and key not in self._on_ip:
            self._schedule_host(key, self._host_ready(key))

    def poll(self, now: float) -> list[Release[T]]:
        """Release every request eligible at ``now``, spending its buckets."""
        released: list[Release[T]] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, seq, key, is_ip = heapq.heappop(heap)
            if is_ip:
                if self._ip_armed.get(key) == seq:
                    del self._ip_armed[key]
                    self._service_ip(key, now, released)
            elif self._host_seq.get(key) == seq:
                del self._host_seq[key]
                self._service_host(key, now, released)
        return released

    def done(self, key: str) -> None:
        """A released request of ``key`` finished (response, error or drop)."""
        if not self.max_in_flight:
            return
        n = self._in_flight.get(key, 0) - 1
        if n > 0:
            self._in_flight[key] = n
        else:
            self._in_flight.pop(key, None)
        if self._queues.get(key) and key not in self._host_seq and key not in self._on_ip:
            self._schedule_host(key, self._host_ready(key))

    def touch(self, key: str) -> None:
        """Re-time ``key`` after its interval changed (feedback, crawl-delay)."""
        if key in self._host_seq and self._queues.get(key):
            self._schedule_host(key, self._host_ready(key))

    def drop_host(self, key: str) -> list[T]:
        """Remove and return every waiting request of ``key``."""
        q = self._queues.pop(key, None)
        self._host_seq.pop(key, None)
        self._since.pop(key, None)
        if key in self._on_ip:  # in line behind its head request's IP: leave the line
            self._on_ip.discard(key)
            ip = q[0][1] if q else None
            line = self._ip_lines.get(ip) if ip is not None else None
            if ip is not None and line is not None and key in line:
                line.remove(key)
                if not line:
                    del self._ip_lines[ip]
                    self._ip_armed.pop(ip, None)
        if not q:
            return []
        self._waiting -= len(q)
        return [token for token, _ in q]

    def drain(self) -> list[T]:
        """Remove and return every waiting request (spider closing)."""
        tokens = [token for q in self._queues.values() for token, _ in q]
        self._queues.clear()
        self._since.clear()
        self._heap.clear()
        self._host_seq.clear()
        self._ip_armed.clear()
        self._ip_lines.clear()
        self._on_ip.clear()
        self._waiting = 0
        return tokens

    # -- internals ---------------------------------------------------------

    def _schedule_host(self, key: str, at: float) -> None:
        self._seq += 1
        self._host_seq[key] = self._seq
        heapq.heappush(self._heap, (at, self._seq, key, False))

    def _arm_ip(self, ip: str, at: float) -> None:
        self._seq += 1
        self._ip_armed[ip] = self._seq
        heapq.heappush(self._heap, (at, self._seq, ip, True))

    def _blocked_by_cap(self, key: str) -> bool:
        return bool(self.max_in_flight) and self._in_flight.get(key, 0) >= self.max_in_flight

    def _service_host(self, key: str, now: float, released: list[Release[T]]) -> None:
        q = self._queues.get(key)
        if not q or self._blocked_by_cap(key):
            return  # done() reschedules once a slot frees up
        ready = self._host_ready(key)
        if ready > now:
            self._schedule_host(key, ready)
            return
        ip = q[0][1]
        if ip is not None:
            line = self._ip_lines.get(ip)
            if line:
                line.append(key)
                self._on_ip.add(key)
                return
            ip_ready = self._ip_ready(ip)
            if ip_ready > now:
                self._ip_lines[ip] = deque((key,))
                self._on_ip.add(key)
                self._arm_ip(ip, ip_ready)
                return
        self._dispatch(key, q, now, released)

    def _service_ip(self, ip: str, now: float, released: list[Release[T]]) -> None:
        line = self._ip_lines.get(ip)
        if not line:
            self._ip_lines.pop(ip, None)
            return
        ip_ready = self._ip_ready(ip)
        if ip_ready > now:
            self._arm_ip(ip, ip_ready)
            return
        while line:
            key = line.popleft()
            self._on_ip.discard(key)
            q = self._queues.get(key)
            if not q or self._blocked_by_cap(key):
                continue
            if q[0][1] != ip or self._host_ready(key) > now:
                if key not in self._host_seq:
                    self._schedule_host(key, self._host_ready(key))
                continue
            self._dispatch(key, q, now, released)
            break
        if line:
            self._arm_ip(ip, self._ip_ready(ip))
        else:
            del self._ip_lines[ip]

    def _dispatch(self, key: str, q: deque[tuple[T, str | None]], now: float,
                  released: list[Release[T]]) -> None:
        token, ip = q.popleft()
        self._waiting -= 1
        interval = self.hosts.start(key, now, self._since.get(key, now), len(q))
        if ip is not None:
            self.ips.spend(ip, now, self.hosts.get(key).ip_clamped)
        if self.max_in_flight:
            self._in_flight[key] = self._in_flight.get(key, 0) + 1
        released.append(Release(token, key, ip, interval, now))
        if q:
            if not self._blocked_by_cap(key):
                self._schedule_host(key, self._host_ready(key))
        else:
            del self._queues[key]
            del self._since[key]
