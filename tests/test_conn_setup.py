"""Connection set-up on a real network: a new connection's first request
reaches the server one to three round trips after it was sent.

The farm holds a new connection's first request ``setup`` seconds before
reading it (and stamps its arrival then). Vhosts share IPs; judged on the
server side, set-up from 0 to more than the host interval.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from crawling import farm_settings, run_crawl
from test_integration import TOL

from scrapy_politeness._sitefarm import starts_by, violations

pytestmark = pytest.mark.integration

INTERVAL, IP_FLOOR, PAGES, VHOSTS = 0.5, 0.25, 4, 8


def spec(setup: float) -> dict[str, Any]:
    ips = ["127.0.0.2", "127.0.0.3"]
    return {"ips": ips, "hosts": {
        f"v{i}.farm.test": {"ip": ips[i % 2], "pages": PAGES, "setup": setup}
        for i in range(VHOSTS)}}


@pytest.mark.parametrize("setup", [0.3, 0.7])
def test_host_and_ip_gaps_hold_with_connection_set_up(farm_factory: Any, setup: float) -> None:
    s = spec(setup)
    farm = farm_factory(s)
    urls = [farm.url(h, f"/p/{n}") for n in range(PAGES) for h in s["hosts"]]
    result = run_crawl(urls, farm_settings(
        farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_IP_FLOOR=IP_FLOOR, POLITENESS_LATENCY_RISE=100.0), follow=False)
    arrivals = farm.arrivals()
    assert len(arrivals) == len(urls), result.log[-3000:]
    bad = {}
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        if violations(times, INTERVAL, TOL):
            bad[host] = violations(times, INTERVAL, TOL)
    for ip, times in starts_by(arrivals, lambda a: a.ip).items():
        if violations(times, IP_FLOOR, TOL):
            bad[ip] = violations(times, IP_FLOOR, TOL)
    gaps = {k: min(b - a for a, b in pairwise(v))
            for k, v in starts_by(arrivals, lambda a: a.ip).items()}
    assert not bad, (bad, gaps)


def test_the_farm_holds_a_new_connections_first_request(farm_factory: Any) -> None:
    """The first request of a host pays the set-up, the next ones on its
    kept-alive connection do not (the interval is longer than the set-up, so
    one connection does)."""
    farm = farm_factory({"ips": ["127.0.0.2"], "hosts": {
        "s.farm.test": {"ip": "127.0.0.2", "pages": 3, "setup": 0.4}}})
    run_crawl([farm.url("s.farm.test", f"/p/{n}") for n in range(3)],
              farm_settings(farm, POLITENESS_DEFAULT=1.0, POLITENESS_FLOOR=1.0), follow=False)
    arrivals = farm.arrivals()
    assert len(arrivals) == 3
    assert len({a.conn for a in arrivals}) == 1  # one kept-alive connection
    gaps = [b.t - a.t for a, b in pairwise(arrivals)]
    assert all(g >= 1.0 - TOL for g in gaps), gaps
