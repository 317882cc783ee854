"""Pure helpers to check request spacing from server-side Arrival lists.

Typical use in a test::

    arrivals = farm.arrivals()
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        assert not violations(times, required=1.5, tolerance=0.05), host
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise

from scrapy_politeness._sitefarm.arrival import Arrival


def starts_by(arrivals: Iterable[Arrival], key: Callable[[Arrival], str]) -> dict[str, list[float]]:
    """Group first-byte times by ``key`` (e.g. host or ip); each list sorted."""
    groups: dict[str, list[float]] = {}
    for arrival in arrivals:
        groups.setdefault(key(arrival), []).append(arrival.t)
    return {k: sorted(times) for k, times in groups.items()}


def min_gap(times: Sequence[float]) -> float | None:
    """Smallest distance between consecutive times; None with fewer than two."""
    ordered = sorted(times)
    if len(ordered) < 2:
        return None
    return min(b - a for a, b in pairwise(ordered))


def _min_gaps(groups: dict[str, list[float]]) -> dict[str, float]:
    result: dict[str, float] = {}
    for k, times in groups.items():
        gap = min_gap(times)
        if gap is not None:
            result[k] = gap
    return result


def host_gaps(arrivals: Iterable[Arrival]) -> dict[str, float]:
    """Min gap per virtual host; hosts with fewer than two arrivals are omitted."""
    return _min_gaps(starts_by(arrivals, lambda a: a.host))


def ip_gaps(arrivals: Iterable[Arrival]) -> dict[str, float]:
    """Min gap per server IP; IPs with fewer than two arrivals are omitted."""
    return _min_gaps(starts_by(arrivals, lambda a: a.ip))


def violations(
    times: Sequence[float], required: float, tolerance: float
) -> list[tuple[float, float]]:
    """Consecutive (earlier, later) pairs closer than ``required - tolerance``."""
    ordered = sorted(times)
    limit = required - tolerance
    return [(a, b) for a, b in pairwise(ordered) if b - a < limit]
