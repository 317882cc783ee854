"""CDN edges in real crawls against the farm: spaced per site once recognised,
a shared host kept spaced per machine. Judged on the farm's arrival times."""

from __future__ import annotations

import uuid
from itertools import pairwise
from typing import Any

import pytest
from crawling import farm_settings, run_crawl

from scrapy_politeness._sitefarm import starts_by, violations

TOL = 0.015
INTERVAL = 0.25
PAGES = 10
EDGES = ("127.0.0.2", "127.0.0.3")
CLOUDFLARE = {"Server": "cloudflare", "CF-RAY": "8c1d2e3f4a5b6c7d-AMS"}
FASTLY = {"X-Served-By": "cache-ams21080-AMS", "X-Cache": "MISS"}


def forty_sites(headers_of: Any) -> dict[str, Any]:
    """40 sites, 20 on each of two addresses; ``headers_of(i)`` the i-th site's headers."""
    return {"ips": list(EDGES), "hosts": {
        f"s{i}.farm.test": {"ip": EDGES[i % 2], "pages": PAGES, "headers": headers_of(i)}
        for i in range(40)}}


def crawl(farm: Any, spec: dict[str, Any], **extra: Any) -> Any:
    return run_crawl([farm.url(h) for h in spec["hosts"]], farm_settings(
        farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_IP_FLOOR=INTERVAL, POLITENESS_LATENCY_RISE=100.0, CONCURRENT_REQUESTS=64,
        **extra), timeout=300)


def host_violations(arrivals: list[Any]) -> list[str]:
    return [host for host, times in starts_by(arrivals, lambda a: a.host).items()
            if violations(times, INTERVAL, TOL)]


def test_forty_sites_behind_two_edges_are_spaced_per_site(farm_factory: Any) -> None:
    """Every answer carries one CDN's edge headers (Cloudflare on one address,
    Fastly on the other): both addresses are edges after their second site's
    answer, and the crawl finishes within twice one host's bound (10 x 0.25 s), not
    in 220 x 0.25 s per address. A host's bound as this machine keeps it is
    measured side by side: the same crawl with both addresses listed in
    ``POLITENESS_IP_EXEMPT`` (the explicit override, spaced per site from the
    start); a starved loop stretches both alike."""
    spec = forty_sites(lambda i: CLOUDFLARE if i % 2 == 0 else FASTLY)
    farm = farm_factory(spec)
    result = crawl(farm, spec)
    arrivals = farm.arrivals()
    assert len(arrivals) == 40 * (1 + PAGES)
    assert not host_violations(arrivals)
    assert result.stat("politeness/ip/cdn_edges") == 2
    assert "127.0.0.2 is a Cloudflare edge (CF-RAY from 2 sites): spaced per site" in result.log
    assert "127.0.0.3 is a Fastly edge (X-Served-By from 2 sites): spaced per site" in result.log
    assert "2 addresses recognised as CDN edges" in result.log
    # Held to the IP floor the crawl would take 219 x 0.25 s per address (~55 s); per
    # site it takes one host's bound, 10 x 0.25 s = 2.5 s, as the machine keeps it.
    span = max(a.t for a in arrivals) - min(a.t for a in arrivals)
    host_bound = PAGES * INTERVAL  # a site's root, then its 10 pages, one interval apart
    farm.reset()
    crawl(farm, spec, POLITENESS_IP_EXEMPT=[f"{ip}/32" for ip in EDGES])
    exempt = farm.arrivals()
    assert len(exempt) == 40 * (1 + PAGES)
    per_site = max(a.t for a in exempt) - min(a.t for a in exempt)
    print(f"\n40 sites on 2 edges: {span:.2f} s = {span / host_bound:.2f}x the host bound; "
          f"exempt by the override: {per_site:.2f} s")
    assert span <= max(host_bound, per_site) + host_bound, (span, per_site, host_bound)
    for ip, times in starts_by(arrivals, lambda a: a.ip).items():  # far more than 1 / 0.25 s
        assert max(sum(1 for u in times if t <= u < t + 1.0) for t in times) > 20, ip


def test_one_site_with_edge_headers_leaves_its_shared_host_spaced(farm_factory: Any) -> None:
    """Only s0 sends Cloudflare's headers: one site cannot make its address an
    edge, so both addresses keep their IP floor (0 IP violations)."""
    spec = forty_sites(lambda i: CLOUDFLARE if i == 0 else {})
    farm = farm_factory(spec)
    result = crawl(farm, spec)
    arrivals = farm.arrivals()
    assert len(arrivals) == 40 * (1 + PAGES)
    assert result.stat("politeness/ip/cdn_edges") == 0
    assert " edge (" not in result.log
    for ip, times in starts_by(arrivals, lambda a: a.ip).items():
        assert not violations(times, INTERVAL, TOL), ip
    assert not host_violations(arrivals)


def cname_farm(n: int) -> dict[str, Any]:
    """``n`` sites, each a CNAME into Cloudflare's domain, on one address; no headers."""
    hosts: dict[str, Any] = {}
    for i in range(n):
        target = f"c{i}.farm.test.cdn.cloudflare.net"
        hosts[f"c{i}.farm.test"] = {"ip": "127.0.0.2", "pages": 0,
                                    "dns": {"mode": "cname", "target": target}}
        hosts[target] = {"ip": "127.0.0.2", "pages": 0}
    return {"ips": ["127.0.0.2"], "hosts": hosts}


@pytest.mark.parametrize("recognise", [True, False])
def test_a_cname_into_a_cdn_is_an_edge_before_the_first_response(farm_factory: Any,
                                                                  recognise: bool) -> None:
    """Four sites whose names are CNAMEs into cdn.cloudflare.net, with the IP floor
    at 2 s: recognised from DNS, their first requests go together; with
    POLITENESS_CDN_EDGES = False the seed's rule spaces them 2 s apart."""
    spec = cname_farm(4)
    farm = farm_factory(spec)
    sites = [h for h in spec["hosts"] if not h.endswith(".net")]
    result = run_crawl([farm.url(h) for h in sites], farm_settings(
        farm, POLITENESS_IP_FLOOR=2.0, POLITENESS_CDN_EDGES=recognise), follow=False)
    arrivals = sorted(farm.arrivals(), key=lambda a: a.t)
    assert len(arrivals) == 4
    gaps = [b.t - a.t for a, b in pairwise(arrivals)]
    if recognise:
        assert result.stat("politeness/ip/cdn_edges") == 1
        assert "127.0.0.2 is a Cloudflare edge (CNAME (c" in result.log
        assert max(gaps) < 1.0, gaps  # no 2 s IP spacing, from the first request on
    else:
        assert result.stat("politeness/ip/cdn_edges") == 0
        assert min(gaps) >= 2.0 - TOL, gaps


def test_on_redis_one_process_recognition_counts_for_the_fleet(farm_factory: Any,
                                                              redis_server: Any) -> None:
    """A first crawl recognises the edge from its sites' headers and tells the
    namespace; a second crawl of other sites on that address, which send no
    evidence at all, spaces them per site from its first request."""
    import redis

    edge_sites = {f"e{i}.farm.test": {"ip": "127.0.0.2", "pages": 0, "headers": CLOUDFLARE}
                  for i in range(2)}
    quiet_sites = {f"q{i}.farm.test": {"ip": "127.0.0.2", "pages": 0} for i in range(4)}
    spec = {"ips": ["127.0.0.2"], "hosts": {**edge_sites, **quiet_sites}}
    farm = farm_factory(spec)
    namespace = f"edges:{uuid.uuid4().hex[:8]}"
    shared = {"POLITENESS_BACKEND": redis_server.url, "POLITENESS_NAMESPACE": namespace,
              "POLITENESS_IP_FLOOR": 2.0}
    first = run_crawl([farm.url(h) for h in edge_sites], farm_settings(farm, **shared),
                      follow=False)
    assert first.stat("politeness/ip/cdn_edges") == 1
    stored = redis.Redis.from_url(redis_server.url).hgetall(f"{namespace}:cdn_edges")
    assert stored == {b"127.0.0.2": b"Cloudflare\tCF-RAY from 2 sites"}
    farm.reset()
    second = run_crawl([farm.url(h) for h in quiet_sites], farm_settings(farm, **shared),
                       follow=False)
    assert second.stat("politeness/ip/cdn_edges") == 1
    assert ("127.0.0.2 is a Cloudflare edge (CF-RAY from 2 sites, from another process): "
            "spaced per site") in second.log
    times = sorted(a.t for a in farm.arrivals())
    assert len(times) == 4
    assert max(b - a for a, b in pairwise(times)) < 1.0  # not the 2 s IP floor
