"""Against nginx's own rate limiter: vhosts sharing IPs, each limited by server name.

Debian's nginx, unprivileged on 127.0.0.x from a configuration written here
(:mod:`scrapy_politeness._sitefarm.nginx`): ``limit_req`` zones per
``$server_name``, burst 0, refusals as 429 with ``Retry-After: 1``. Judged from
nginx's access log only (``$msec``, server side): every page fetched, at most
5 % of the requests refused, none inside a Retry-After window, and each host
settled at its limit: the median gap between its starts over the second half
of its requests is within ``PACE_SLACK`` of nginx's interval (a plugin that
stayed at half the rate fails). The wall time against the limits is the
bench's (``python -m bench.nginx_limits``), not a test's.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from crawling import ADDON, run_crawl

from scrapy_politeness._sitefarm.nginx import NginxFarm, NginxSpec, Vhost, judge, nginx_binary

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")

PACE_SLACK = 1.25
"""How much slower than nginx's interval a host's settled pace may be."""


def settled_gaps(log: list[tuple[float, str, int, str]]) -> dict[str, float]:
    """Host -> median gap (s) between its starts over the second half of its
    requests, from nginx's own ``$msec``: the pace the host settled at."""
    starts: dict[str, list[float]] = {}
    for at, host, _, _ in sorted(log):
        starts.setdefault(host, []).append(at)
    return {host: statistics.median(b - a for a, b in zip(times[len(times) // 2:],
                                                             times[len(times) // 2 + 1:],
                                                             strict=False))
            for host, times in starts.items() if len(times) > 3}


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Callable[[NginxSpec], NginxFarm]]:
    farms: list[NginxFarm] = []

    def start(spec: NginxSpec) -> NginxFarm:
        farm = NginxFarm(spec, tmp_path / f"nginx{len(farms)}").__enter__()
        farms.append(farm)
        return farm

    yield start
    for farm in farms:
        farm.__exit__(None, None, None)


def test_the_config_limits_by_server_name_and_adds_retry_after(
        nginx: Callable[[NginxSpec], NginxFarm]) -> None:
    """The farm itself: two quick requests to one vhost, the second refused with
    the header; its neighbour on the same IP is not limited by the first."""
    import urllib.error
    import urllib.request

    spec = NginxSpec((Vhost("a.test", "127.0.6.7", 1.0, 429, 1),
                      Vhost("b.test", "127.0.6.7", 1.0)), pages=1)
    farm = nginx(spec)
    seen = []
    for host in ("a.test", "a.test", "b.test", "b.test"):
        req = urllib.request.Request(f"http://127.0.6.7:{farm.port}/p0", headers={"Host": host})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                seen.append((host, resp.status, None))
        except urllib.error.HTTPError as exc:
            seen.append((host, exc.code, exc.headers.get("Retry-After")))
    assert seen == [("a.test", 200, None), ("a.test", 429, "1"),
                    ("b.test", 200, None), ("b.test", 503, None)]
    log = farm.log()
    assert [(host, status, uri) for _, host, status, uri in log] == [
        ("a.test", 200, "/p0"), ("a.test", 429, "/p0"), ("b.test", 200, "/p0"),
        ("b.test", 503, "/p0")]
    verdict = judge(spec, log)
    assert (verdict.requests, verdict.rejections, verdict.pages) == (4, 2, 2)


def test_four_vhosts_on_two_ips_each_at_its_own_limit(
        nginx: Callable[[NginxSpec], NginxFarm]) -> None:
    spec = NginxSpec(tuple(Vhost(f"v{i}.test", ("127.0.6.1", "127.0.6.2")[i // 2], 2.0, 429, 1)
                           for i in range(4)), pages=40)
    farm = nginx(spec)
    result = run_crawl(farm.urls(), {
        "ADDONS": ADDON, "POLITENESS_DNS_HOSTS_FILE": str(farm.hosts_file),
        "POLITENESS_ROBOTS_PREFETCH": False, "ROBOTSTXT_OBEY": False,
        "CONCURRENT_REQUESTS": 16}, follow=False, timeout=300.0)
    verdict = judge(spec, farm.log())
    assert verdict.pages == verdict.expected  # every page, once refusals were retried
    assert verdict.rejected_share <= 0.05, verdict
    assert verdict.ra_violations == 0
    assert result.stat("politeness/dispatched") == verdict.requests
    gaps = settled_gaps(farm.log())
    assert set(gaps) == {v.name for v in spec.vhosts}
    for vhost in spec.vhosts:
        assert vhost.rate is not None
        limit = 1.0 / vhost.rate
        assert limit - 0.015 <= gaps[vhost.name] <= limit * PACE_SLACK, (vhost.name, gaps)
