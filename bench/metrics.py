"""Judge one crawl from the farm's server-side arrivals (first-byte times)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from scrapy_politeness._sitefarm import Arrival

from .scenarios import Scenario

TOL = 0.015  # the integration tests' tolerance


@dataclass(frozen=True)
class Judgement:
    requests: int
    urls_ok: int  # distinct scenario URLs that got a 200
    urls: int
    n429: int
    host_viol: int
    ip_viol: int
    ra_viol: int
    min_host_gap: float | None
    min_ip_gap: float | None
    wall: float
    bound: float

    @property
    def ratio(self) -> float:
        return self.wall / self.bound if self.bound > 0 else float("nan")


def _group(arrivals: list[Arrival], key: str) -> dict[str, list[Arrival]]:
    groups: dict[str, list[Arrival]] = {}
    for a in arrivals:
        groups.setdefault(getattr(a, key), []).append(a)
    return groups


def _gaps(groups: dict[str, list[Arrival]],
          need_of: Callable[[str], float]) -> tuple[int, float | None]:
    bad, smallest = 0, None
    for name, seq in groups.items():
        need = need_of(name)
        for a, b in pairwise(seq):
            gap = b.t - a.t
            smallest = gap if smallest is None or gap < smallest else smallest
            if gap < need - TOL:
                bad += 1
    return bad, smallest


def retry_after_violations(arrivals: list[Arrival], retry_after: dict[str, float]) -> int:
    """Starts of a host before t_429 + Retry-After - TOL after any earlier 429 of it."""
    bad = 0
    for host, seq in _group(arrivals, "host").items():
        window_end = float("-inf")
        wait = retry_after.get(host)
        for a in seq:
            if a.t < window_end - TOL:
                bad += 1
            if a.status == 429 and wait is not None:
                window_end = max(window_end, a.t + wait)
    return bad


def judge(scenario: Scenario, arrivals: list[Arrival]) -> Judgement:
    ordered = sorted(arrivals, key=lambda a: a.t)
    host_viol, min_host = _gaps(_group(ordered, "host"), scenario.interval_of)
    ip_viol, min_ip = _gaps(_group(ordered, "ip"), scenario.ip_spacing_of)
    ra = {h: wait for h, (_, wait) in scenario.rate_limits().items()}
    wanted = set(scenario.urls)
    ok = {(a.host, a.path) for a in ordered if a.status == 200} & wanted
    return Judgement(
        requests=len(ordered), urls_ok=len(ok), urls=len(wanted),
        n429=sum(a.status == 429 for a in ordered),
        host_viol=host_viol, ip_viol=ip_viol,
        ra_viol=retry_after_violations(ordered, ra),
        min_host_gap=min_host, min_ip_gap=min_ip,
        wall=ordered[-1].t - ordered[0].t if ordered else 0.0,
        bound=scenario.lower_bound()[0],
    )


def served_bound(scenario: Scenario, arrivals: list[Arrival]) -> float:
    """T* of the requests the server saw (re-fetches included): per host
    (n - 1) x interval, per IP (n - 1) x its spacing, the largest."""
    best = 0.0
    for host, seq in _group(arrivals, "host").items():
        best = max(best, (len(seq) - 1) * scenario.interval_of(host))
    for ip, seq in _group(arrivals, "ip").items():
        best = max(best, (len(seq) - 1) * scenario.ip_spacing_of(ip))
    return best


def after_change(arrivals: list[Arrival], host: str, served: int) -> tuple[int, int]:
    """(requests, 429s) of ``host`` after its ``served``-th 200: a limit drop's cost."""
    ok = 0
    requests = refused = 0
    for a in sorted(arrivals, key=lambda a: a.t):
        if a.host != host:
            continue
        if ok >= served:
            requests += 1
            refused += a.status == 429
        ok += a.status == 200
    return requests, refused
