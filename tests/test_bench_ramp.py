"""bench/ramp.py: the ramp, gap and tail figures of a crawl, on made-up arrivals."""

from __future__ import annotations

import pytest

from bench.ramp import ramp
from bench.scenarios import crawl_delay_head
from scrapy_politeness._sitefarm import Arrival


def _arrivals(delay_of: dict[str, float], gap: float) -> list[Arrival]:
    """Each scenario host starting at ``delay_of[host]`` (default 0), then every ``gap``."""
    scenario = crawl_delay_head(quick=True)
    out = []
    for host, ip in scenario.host_ip().items():
        step = scenario.interval_of(host) if host.startswith("cd") else gap
        n = 1 + sum(h == host for h, _ in scenario.urls)  # robots.txt first
        t0 = delay_of.get(host, 0.0)
        out += [Arrival(t=t0 + i * step, wall=0.0, host=host, ip=ip, path="/", status=200,
                        conn=0) for i in range(n)]
    return out


def test_a_crawl_at_the_limit_from_the_start_is_judged_at_the_limit() -> None:
    scenario = crawl_delay_head(quick=True)
    r = ramp(scenario, _arrivals({}, scenario.interval))
    assert r is not None
    assert r.first_rate == pytest.approx(r.limit)
    assert r.first_start == 0.0
    assert r.gap_excess == pytest.approx(0.0, abs=1e-9)
    assert r.tail == pytest.approx(0.0, abs=1e-9)


def test_late_starts_and_long_gaps_show_as_ramp_and_excess() -> None:
    scenario = crawl_delay_head(quick=True)
    fast = sorted(h for h in scenario.host_ip() if not h.startswith("cd"))
    r = ramp(scenario, _arrivals(dict.fromkeys(fast, 0.5), scenario.interval + 0.01))
    assert r is not None
    assert r.first_start == r.median_first_start == pytest.approx(0.5)
    assert r.first_rate < 0.95 * r.limit
    per_host = sum(h == fast[0] for h, _ in scenario.urls)  # gaps of a host: its pages
    assert r.gap_excess == pytest.approx(0.01 * per_host)


def test_one_host_ending_late_is_the_tail() -> None:
    scenario = crawl_delay_head(quick=True)
    fast = sorted(h for h in scenario.host_ip() if not h.startswith("cd"))
    r = ramp(scenario, _arrivals({fast[0]: 0.5}, scenario.interval))
    assert r is not None
    assert r.tail == pytest.approx(0.5)
    assert r.median_first_start == 0.0
