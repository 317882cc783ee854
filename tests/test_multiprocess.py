"""Three crawler processes, one farm, the SAME hosts: one budget only with Redis.

Each process is a real ``scrapy`` crawl (``crawling.run_crawl``) started from
its own thread, so they run side by side. The farm's server-side arrival times
judge the result. The memory backend runs the same scenario and must show the
violations Redis removes, which proves the check can fail.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from crawling import CrawlResult, farm_settings, run_crawl
from redis_server import RedisServer, redis_server_fixture

from scrapy_politeness._sitefarm import Arrival, Farm

TOL = 0.015
INTERVAL = 0.3
SPEC: dict[str, Any] = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
    "a.farm.test": {"ip": "127.0.0.2", "pages": 10},
    "b.farm.test": {"ip": "127.0.0.2", "pages": 10},
    "c.farm.test": {"ip": "127.0.0.3", "pages": 10},
}}


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from redis_server_fixture()


# -- the scenario (bench/bench_redis.py reuses it) --------------------------------------

def split_urls(farm: Farm, per_host: int, processes: int = 3) -> list[list[str]]:
    """Every host's ``per_host`` pages dealt round-robin to the processes."""
    lists: list[list[str]] = [[] for _ in range(processes)]
    for host in SPEC["hosts"]:
        for n in range(per_host):
            lists[n % processes].append(farm.url(host, f"/p/{n}"))
    return lists


def scenario_settings(farm: Farm, backend: str, **extra: Any) -> dict[str, Any]:
    return farm_settings(
        farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_IP_FLOOR=INTERVAL, POLITENESS_LATENCY_RISE=100.0,
        POLITENESS_BACKEND=backend, POLITENESS_NAMESPACE=f"mp:{uuid.uuid4().hex[:8]}",
        **extra)


def crawl_together(url_lists: list[list[str]], settings: dict[str, Any]) -> list[CrawlResult]:
    """One crawl process per URL list, all at once; their results in order."""
    results: list[CrawlResult | BaseException | None] = [None] * len(url_lists)

    def run(i: int) -> None:
        try:
            results[i] = run_crawl(url_lists[i], settings, follow=False, timeout=120)
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(url_lists))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done: list[CrawlResult] = []
    for r in results:
        if not isinstance(r, CrawlResult):
            raise AssertionError(f"a crawl process failed: {r}")
        done.append(r)
    return done


def _grouped(arrivals: list[Arrival], attr: str) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for a in arrivals:
        groups.setdefault(getattr(a, attr), []).append(a.t)
    return {k: sorted(v) for k, v in groups.items()}


def count_violations(arrivals: list[Arrival]) -> tuple[int, int]:
    """(host gaps, IP gaps) shorter than the 0.3 s interval minus the tolerance."""
    def bad(groups: dict[str, list[float]]) -> int:
        return sum(b - a < INTERVAL - TOL for ts in groups.values() for a, b in pairwise(ts))
    return bad(_grouped(arrivals, "host")), bad(_grouped(arrivals, "ip"))


def describe_violations(arrivals: list[Arrival]) -> list[str]:
    """The short gaps, readable, for assertion messages."""
    out = []
    for attr in ("host", "ip"):
        ordered = sorted(arrivals, key=lambda a: a.t)
        last: dict[str, Arrival] = {}
        for a in ordered:
            prev = last.get(getattr(a, attr))
            if prev is not None and a.t - prev.t < INTERVAL - TOL:
                out.append(f"{attr} {getattr(a, attr)}: {prev.host}{prev.path} -> "
                           f"{a.host}{a.path} after {(a.t - prev.t) * 1000:.1f} ms "
                           f"(t={a.t - ordered[0].t:.3f})")
            last[getattr(a, attr)] = a
    return out


def assert_one_budget(arrivals: list[Arrival]) -> None:
    host_bad, ip_bad = count_violations(arrivals)
    assert (host_bad, ip_bad) == (0, 0), describe_violations(arrivals)
    for host, times in _grouped(arrivals, "host").items():
        # The processes together kept ONE host's budget, not three.
        assert times[-1] - times[0] >= (len(times) - 1) * INTERVAL - TOL, host


def assert_all_fetched(results: list[CrawlResult], url_lists: list[list[str]]) -> None:
    for result, urls in zip(results, url_lists, strict=True):
        assert sorted(i["url"] for i in result.items) == sorted(urls)
        assert all(i["status"] == 200 for i in result.items)


# -- the tests -------------------------------------------------------------------------

def test_three_processes_share_one_budget_with_redis(
        farm_factory: Any, redis_server: RedisServer) -> None:
    farm = farm_factory(SPEC)
    urls = split_urls(farm, per_host=6)
    results = crawl_together(urls, scenario_settings(farm, redis_server.url))
    arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
    assert len(arrivals) == 18
    assert_all_fetched(results, urls)
    assert_one_budget(arrivals)
    for r in results:
        assert "lost the Redis backend" not in r.log


def test_three_processes_with_the_memory_backend_overrun_the_budget(farm_factory: Any) -> None:
    farm = farm_factory(SPEC)
    urls = split_urls(farm, per_host=6)
    crawl_together(urls, scenario_settings(farm, "memory"))
    host_bad, ip_bad = count_violations(farm.arrivals())
    assert host_bad > 0  # each process throttles alone: the check above can fail
    assert ip_bad > 0


def _kill_and_restart_when(farm: Farm, server: RedisServer, after: int,
                           down_for: float) -> threading.Thread:
    """SIGKILL Redis once the farm saw ``after`` requests; restart it ``down_for`` later."""
    def watch() -> None:
        deadline = time.monotonic() + 60
        while len(farm.arrivals()) < after and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill()
        time.sleep(down_for)
        server.start()

    thread = threading.Thread(target=watch)
    thread.start()
    return thread


def test_redis_killed_mid_crawl_hold_mode_loses_nothing(
        farm_factory: Any, redis_server: RedisServer) -> None:
    farm = farm_factory(SPEC)
    urls = split_urls(farm, per_host=8)
    watcher = _kill_and_restart_when(farm, redis_server, after=7, down_for=1.0)
    results = crawl_together(urls, scenario_settings(farm, redis_server.url))
    watcher.join()
    arrivals = farm.arrivals()
    assert len(arrivals) == 24
    assert_all_fetched(results, urls)
    host_bad, ip_bad = count_violations(arrivals)
    assert host_bad == 0, describe_violations(arrivals)
    assert ip_bad == 0, describe_violations(arrivals)
    for r in results:
        assert r.log.count("lost the Redis backend") <= 1
        # Each outage a process saw ends in "back", or in closing before the
        # probe reconnected (its last requests were already booked).
        assert (r.log.count("is back after") + r.log.count("still unavailable")
                == r.log.count("lost the Redis backend"))
    assert sum("lost the Redis backend" in r.log for r in results) >= 1


def test_redis_killed_mid_crawl_local_mode_falls_back(
        farm_factory: Any, redis_server: RedisServer) -> None:
    farm = farm_factory(SPEC)
    urls = [farm.url(h, f"/p/{n}") for h in ("a.farm.test", "c.farm.test") for n in range(6)]
    watcher = _kill_and_restart_when(farm, redis_server, after=3, down_for=0.8)
    (result,) = crawl_together(
        [urls], scenario_settings(farm, redis_server.url, POLITENESS_BACKEND_ON_LOSS="local"))
    watcher.join()
    assert_all_fetched([result], [urls])
    assert count_violations(farm.arrivals()) == (0, 0)  # one process: local buckets suffice
    assert result.log.count("local buckets until it is back") == 1


def test_unreachable_redis_at_start_stops_the_crawl_without_leaking_the_password(
        farm_factory: Any) -> None:
    from redis_server import free_port, require_redis_server

    require_redis_server()
    farm = farm_factory(SPEC)
    url = f"redis://crawler:Sup3rSecret@127.0.0.1:{free_port()}/0"
    result = run_crawl([farm.url("a.farm.test", "/p/0")], scenario_settings(farm, url),
                       follow=False, check=False)
    assert farm.arrivals() == []
    assert "is unreachable" in result.log  # the crawl fails to start (non-zero exit)
    assert "redis://crawler:***@127.0.0.1" in result.log
    assert "Sup3rSecret" not in result.log
