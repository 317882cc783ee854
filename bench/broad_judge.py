"""Judge one broad-bench crawl from nginx's access log and the crawl's RSS samples.

Server side only for what the servers saw: requests, pages, throughput (over
the crawl and in its first and last fifth), and politeness violations:
consecutive requests of one host (or on one server address) closer than the
floor less the tests' 15 ms tolerance. The floors are the plugin's defaults
(``POLITENESS_FLOOR``, ``POLITENESS_IP_FLOOR``: 0.25 s), the closest any
crawl polite by the plugin's rules may come.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .broad_servers import LogLine

__all__ = ["HOSTS_MARK", "HOST_FLOOR", "IP_FLOOR", "TOL", "Traffic", "nth_host_at", "rss_at",
           "traffic", "violations"]

HOSTS_MARK = 10_000  # RSS is also read when this many hosts had a page fetched
HOST_FLOOR = 0.25
IP_FLOOR = 0.25
TOL = 0.015


@dataclass(frozen=True)
class Traffic:
    requests: int
    robots: int  # robots.txt requests
    pages: int  # distinct pages (not robots.txt) answered 200
    repeated: int  # page requests beyond the first of their URL
    first: float  # first and last request, nginx's clock
    last: float
    rate: float  # requests/s, first to last
    rate_first_fifth: float
    rate_last_fifth: float
    host_viol: int
    ip_viol: int
    min_host_gap: float | None
    min_ip_gap: float | None
    hosts_mark_at: float | None = None  # when the HOSTS_MARK-th host had its first page

    @property
    def wall(self) -> float:
        return self.last - self.first

    @property
    def fifth_ratio(self) -> float:
        return self.rate_last_fifth / self.rate_first_fifth if self.rate_first_fifth else 0.0


def violations(log: Sequence[LogLine], key: str, floor: float) -> tuple[int, float | None]:
    """(gaps closer than ``floor - TOL``, the smallest gap) per ``host`` or ``ip``."""
    last: dict[str, float] = {}
    bad, smallest = 0, None
    for line in sorted(log, key=lambda x: x.at):
        name = getattr(line, key)
        before = last.get(name)
        if before is not None:
            gap = line.at - before
            smallest = gap if smallest is None or gap < smallest else smallest
            if gap < floor - TOL:
                bad += 1
        last[name] = line.at
    return bad, smallest


def nth_host_at(log: Sequence[LogLine], n: int) -> float | None:
    """When the ``n``-th distinct host got its first page request (robots.txt aside)."""
    hosts: set[str] = set()
    for line in sorted(log, key=lambda x: x.at):
        if line.uri != "/robots.txt" and line.host not in hosts:
            hosts.add(line.host)
            if len(hosts) == n:
                return line.at
    return None


def traffic(log: Sequence[LogLine]) -> Traffic:
    times = sorted(line.at for line in log)
    if not times:
        return Traffic(0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, None, None)
    first, last = times[0], times[-1]
    wall = last - first
    fifth = wall / 5
    head = sum(1 for t in times if t <= first + fifth)
    tail = sum(1 for t in times if t >= last - fifth)
    page_hits = [(line.host, line.uri) for line in log if line.uri != "/robots.txt"]
    ok = {(line.host, line.uri) for line in log
          if line.uri != "/robots.txt" and line.status == 200}
    host_viol, min_host = violations(log, "host", HOST_FLOOR)
    ip_viol, min_ip = violations(log, "ip", IP_FLOOR)
    return Traffic(
        requests=len(times), robots=len(times) - len(page_hits), pages=len(ok),
        repeated=len(page_hits) - len(set(page_hits)), first=first, last=last,
        rate=len(times) / wall if wall else 0.0,
        rate_first_fifth=head / fifth if fifth else 0.0,
        rate_last_fifth=tail / fifth if fifth else 0.0,
        host_viol=host_viol, ip_viol=ip_viol, min_host_gap=min_host, min_ip_gap=min_ip,
        hosts_mark_at=nth_host_at(log, HOSTS_MARK))


def rss_at(samples: Sequence[tuple[float, int]], at: float | None) -> int | None:
    """The last RSS sample (kB) taken at or before ``at``."""
    if at is None:
        return None
    best = None
    for t, kb in samples:
        if t > at:
            break
        best = kb
    return best

