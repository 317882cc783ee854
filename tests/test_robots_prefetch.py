"""robots.txt fetched when a host's first request is scheduled (real crawls, farm).

Judged on the server side: with few download slots and many new hosts, every
host's robots.txt reaches its server before any page does, because it was
fetched while the pages waited in the scheduler; without the prefetch each
host's robots.txt waits until one of its pages reaches the downloader.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from crawling import farm_settings, run_crawl

from scrapy_politeness._sitefarm import Arrival, violations

TOL = 0.015
N_HOSTS = 6
INTERVAL = 0.5


def _crawl(farm_factory: Any, **extra: Any) -> tuple[list[Arrival], Any]:
    ips = [f"127.0.0.{2 + i}" for i in range(N_HOSTS)]
    spec = {"ips": ips, "hosts": {f"h{i}.farm.test": {"ip": ip, "kind": "normal", "pages": 2}
                                  for i, ip in enumerate(ips)}}
    farm = farm_factory(spec)
    urls = [farm.url(f"h{i}.farm.test", f"/p/{p}") for i in range(N_HOSTS) for p in range(2)]
    result = run_crawl(urls, farm_settings(
        farm, ROBOTSTXT_OBEY=True, CONCURRENT_REQUESTS=2, POLITENESS_DEFAULT=INTERVAL,
        POLITENESS_FLOOR=INTERVAL, POLITENESS_IP_FLOOR=INTERVAL, **extra), follow=False)
    return sorted(farm.arrivals(), key=lambda a: a.t), result


def _assert_polite(arrivals: list[Arrival]) -> None:
    by_host: dict[str, list[float]] = {}
    for a in arrivals:
        by_host.setdefault(a.host, []).append(a.t)
    for host, times in by_host.items():
        assert len(times) == 3, host  # robots.txt and two pages
        assert not violations(times, INTERVAL, TOL), (host, [b - a for a, b in pairwise(times)])


def test_every_robots_txt_starts_before_the_first_page(farm_factory: Any) -> None:
    arrivals, result = _crawl(farm_factory)
    _assert_polite(arrivals)
    robots = [a.t for a in arrivals if a.path == "/robots.txt"]
    pages = [a.t for a in arrivals if a.path != "/robots.txt"]
    assert len(robots) == N_HOSTS
    assert max(robots) < min(pages)
    assert result.stat("politeness/robots/prefetched") == N_HOSTS


def test_prefetch_off_fetches_robots_txt_with_the_first_page(farm_factory: Any) -> None:
    """POLITENESS_ROBOTS_PREFETCH = False: Scrapy's own order (a page's slot first)."""
    arrivals, result = _crawl(farm_factory, POLITENESS_ROBOTS_PREFETCH=False)
    _assert_polite(arrivals)
    robots = [a.t for a in arrivals if a.path == "/robots.txt"]
    pages = [a.t for a in arrivals if a.path != "/robots.txt"]
    assert len(robots) == N_HOSTS
    assert max(robots) > min(pages)  # two slots: later hosts' robots.txt wait for pages
    assert result.stat("politeness/robots/prefetched") == 0


def test_no_robots_txt_for_an_offsite_host(farm_factory: Any) -> None:
    """Scrapy's OffsiteMiddleware drops the request before the robots middleware:
    the prefetch must not fetch that host's robots.txt either."""
    spec = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        "on.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 2},
        "off.farm.test": {"ip": "127.0.0.3", "kind": "normal", "pages": 2}}}
    farm = farm_factory(spec)
    urls = [farm.url(h, f"/p/{p}") for h in ("off.farm.test", "on.farm.test") for p in range(2)]
    result = run_crawl(urls, farm_settings(farm, ROBOTSTXT_OBEY=True), follow=False,
                       spider_args={"allowed_domains": ["on.farm.test"], "dont_filter": False})
    hosts = {a.host for a in farm.arrivals()}
    assert hosts == {"on.farm.test"}
    assert result.stat("offsite/filtered") == 2
    assert result.stat("politeness/robots/prefetched") == 1


def test_no_robots_txt_fetch_starts_once_the_engine_is_closing(farm_factory: Any) -> None:
    """A crawl closed early (CLOSESPIDER_PAGECOUNT) with many robots.txt fetches
    waiting: none may start after the engine began closing, or it outlives the
    engine's slot and Scrapy fails on it (``'NoneType' ... 'nextcall'`` in
    ``_download``, or ``assert self._slot is not None`` in ``download_async``)."""
    ips = [f"127.0.0.{n}" for n in range(2, 6)]
    names = [f"c{i:03d}.farm.test" for i in range(300)]
    farm = farm_factory({"ips": ips, "hosts": {  # slow: fetches are in flight at the close
        name: {"ip": ips[i % len(ips)], "pages": 1, "latency": 0.3}
        for i, name in enumerate(names)}})
    result = run_crawl([farm.url(name, "/p/0") for name in names], farm_settings(
        farm, ROBOTSTXT_OBEY=True, CONCURRENT_REQUESTS=16, POLITENESS_DEFAULT=0.2,
        POLITENESS_FLOOR=0.2, POLITENESS_IP_FLOOR=0.2, CLOSESPIDER_PAGECOUNT=20),
        follow=False)
    assert result.stat("finish_reason") == "closespider_pagecount"
    assert "nextcall" not in result.log, result.log[-3000:]
    assert "Traceback" not in result.log, result.log[-3000:]


def test_a_host_waits_in_the_scheduler_for_its_robots_txt(farm_factory: Any) -> None:
    """More new hosts than prefetch slots, each robots.txt slow to come: a host whose
    robots.txt waits for a prefetch slot (or is on its way) is held in the scheduler,
    so no page takes a download slot to fetch its robots.txt itself: the servers
    never see more robots.txt fetches at once than the prefetch's slots, and each
    page follows its own robots.txt one interval on."""
    n = 12
    ips = [f"127.0.0.{2 + i}" for i in range(n)]
    spec = {"ips": ips, "hosts": {f"h{i}.farm.test": {"ip": ip, "kind": "slow", "pages": 1,
                                                      "latency": 0.3}
                                  for i, ip in enumerate(ips)}}
    farm = farm_factory(spec)
    urls = [farm.url(f"h{i}.farm.test", "/p/0") for i in range(n)]
    result = run_crawl(urls, farm_settings(
        farm, ROBOTSTXT_OBEY=True, CONCURRENT_REQUESTS=4, POLITENESS_DEFAULT=INTERVAL,
        POLITENESS_FLOOR=INTERVAL, POLITENESS_IP_FLOOR=INTERVAL), follow=False)
    arrivals = sorted(farm.arrivals(), key=lambda a: a.t)
    robots = {a.host: a.t for a in arrivals if a.path == "/robots.txt"}
    pages = {a.host: a.t for a in arrivals if a.path != "/robots.txt"}
    assert len(robots) == len(pages) == n
    assert result.stat("politeness/robots/prefetched") == n
    starts = sorted(robots.values())
    at_once = max(sum(1 for u in starts if t <= u < t + 0.25) for t in starts)  # each takes 0.3 s
    assert at_once <= 4 // 2, starts  # CONCURRENT_REQUESTS // 2 prefetch slots
    for host, t in pages.items():
        assert t - robots[host] >= INTERVAL - TOL, host
