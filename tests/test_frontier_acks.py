"""Every request the frontier hands out ends its lease, whatever ends it.

Real scrapy-redis processes (RedisSpider, default batch) on a real redis-server
against the farm. A request that ends before the downloader (a DNS failure,
a dead or parked host, robots.txt, an HTTP cache hit, IgnoreRequest or another
request from some middleware) once kept its lease: ``len(queue)`` stayed above
0, no process ever idled, and at close the lease was requeued, so the failed
URL came back on the next run. Each test: the fleet closes by itself, Redis
holds no lease and no queued request, and a second run fetches nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from crawling import farm_settings
from frontier_crawl import run_fleet, seed
from redis_server import RedisServer, redis_server_fixture

from scrapy_politeness._sitefarm import Farm

pytest.importorskip("scrapy_redis")

Q = "frontier:requests"
HEALTHY = {"a.farm.test": {"ip": "127.0.0.2", "pages": 4},
           "b.farm.test": {"ip": "127.0.0.3", "pages": 4}}


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from redis_server_fixture()


def _settings(farm: Farm, server: RedisServer, **extra: Any) -> dict[str, Any]:
    return farm_settings(
        farm, POLITENESS_DEFAULT=0.2, POLITENESS_FLOOR=0.2, POLITENESS_IP_FLOOR=0.2,
        POLITENESS_BACKEND=server.url, POLITENESS_NAMESPACE=f"ack:{uuid.uuid4().hex[:8]}",
        REDIS_URL=server.url, MAX_IDLE_TIME_BEFORE_CLOSE=1, RETRY_TIMES=1,
        POLITENESS_DNS_TIMEOUT=0.5, **extra)


def _urls(farm: Farm, hosts: dict[str, Any]) -> list[str]:
    return [farm.url(h, f"/p/{n}") for h, raw in hosts.items() for n in range(raw["pages"])]


def _healthy_fetched(farm: Farm) -> set[str]:
    return {f"{a.host}{a.path}" for a in farm.arrivals()
            if a.host in HEALTHY and a.path != "/robots.txt"}


def _assert_no_lease_left(server: RedisServer) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        assert not list(client.scan_iter(f"{Q}:lease:*"))
        assert client.mget(f"{Q}:len", f"{Q}:leased") == [b"0", None]  # len: queued + leased
        assert client.zcard(f"{Q}:hosts") == 0
    finally:
        client.close()


def _crawl_and_again(farm: Farm, server: RedisServer, urls: list[str], *,
                     from_farm: bool = True, **extra: Any) -> None:
    """Two processes crawl ``urls`` and close by themselves, every healthy page
    fetched and no lease left; then one more process on the same Redis fetches
    nothing (nothing was requeued)."""
    seed(server.url, urls)
    settings = _settings(farm, server, **extra)
    fleet = run_fleet(settings, processes=2, timeout=60)
    assert fleet.codes == [0, 0], fleet.logs
    assert not from_farm or _healthy_fetched(farm) == {f"{h}/p/{n}" for h, raw in HEALTHY.items()
                                      for n in range(raw["pages"])}
    _assert_no_lease_left(server)
    before = len(farm.arrivals())
    again = run_fleet(settings, processes=1, timeout=60)
    assert again.codes == [0], again.logs
    assert len(farm.arrivals()) == before
    assert "returned_at_close" not in "".join(again.logs + fleet.logs)


def test_names_failing_dns(farm_factory: Any, redis_server: RedisServer) -> None:
    """The plugin's DNS failure (retried once: a copy with the lease id, then a failure)."""
    bad = {f"nx{i}.farm.test": {"ip": "127.0.0.2", "pages": 2, "dns": {"mode": "nxdomain"}}
           for i in range(2)}
    bad["to.farm.test"] = {"ip": "127.0.0.2", "pages": 2, "dns": {"mode": "timeout"}}
    farm = farm_factory({"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {**HEALTHY, **bad}})
    _crawl_and_again(farm, redis_server, _urls(farm, {**HEALTHY, **bad}))


def test_dead_host(farm_factory: Any, redis_server: RedisServer) -> None:
    """A host declared dead: its queued requests are dropped by the plugin's middleware."""
    dead = {"broken.farm.test": {"ip": "127.0.0.2", "kind": "always_503", "pages": 8}}
    farm = farm_factory({"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {**HEALTHY, **dead}})
    _crawl_and_again(farm, redis_server, _urls(farm, {**HEALTHY, **dead}),
                     POLITENESS_CEILING=0.4, POLITENESS_DEAD_AFTER=1, RETRY_ENABLED=False,
                     POLITENESS_ON_CEILING="dead")


def test_parked_host(farm_factory: Any, redis_server: RedisServer) -> None:
    """A Retry-After above POLITENESS_MAX_RETRY_AFTER parks the host: its requests drop."""
    parked = {"sleepy.farm.test": {"ip": "127.0.0.2", "pages": 6, "status_script": [503] * 20,
                                   "retry_after_header": "3600"}}
    farm = farm_factory({"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {**HEALTHY, **parked}})
    _crawl_and_again(farm, redis_server, _urls(farm, {**HEALTHY, **parked}),
                     POLITENESS_MAX_RETRY_AFTER=30)


def test_robots_disallow(farm_factory: Any, redis_server: RedisServer) -> None:
    shy = {"shy.farm.test": {"ip": "127.0.0.3", "pages": 4,
                             "robots": "User-agent: *\nDisallow: /p/\n"}}
    farm = farm_factory({"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {**HEALTHY, **shy}})
    _crawl_and_again(farm, redis_server, _urls(farm, {**HEALTHY, **shy}), ROBOTSTXT_OBEY=True)
    assert not [a for a in farm.arrivals() if a.host == "shy.farm.test" and a.path != "/robots.txt"]


@pytest.mark.parametrize(("middleware", "priority"),
                         [("IgnoreOdd", 100), ("IgnoreOdd", 990), ("ReissueOdd", 100)])
def test_another_middleware_ends_the_request(farm_factory: Any, redis_server: RedisServer,
                                             middleware: str, priority: int) -> None:
    """IgnoreRequest from another middleware, before or after the plugin's, or a new
    request in its place (the second one dropped by the dupefilter)."""
    odd = {"odd.farm.test": {"ip": "127.0.0.3", "pages": 6}}
    farm = farm_factory({"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {**HEALTHY, **odd}})
    mws = {f"drop_mw.{middleware}": priority}
    urls = _urls(farm, odd) + _urls(farm, HEALTHY)
    seed(redis_server.url, urls)
    fleet = run_fleet(_settings(farm, redis_server, DOWNLOADER_MIDDLEWARES=mws),
                      processes=2, timeout=60)
    assert fleet.codes == [0, 0], fleet.logs
    _assert_no_lease_left(redis_server)
    odd_paths = {a.path for a in farm.arrivals() if a.host == "odd.farm.test"}
    assert {"/p/0", "/p/2", "/p/4"} <= odd_paths
    assert not {"/p/1", "/p/3", "/p/5"} & odd_paths


def test_http_cache_hits(farm_factory: Any, redis_server: RedisServer, tmp_path: Path) -> None:
    """A cached answer never reaches the downloader (process_request returns it)."""
    farm = farm_factory({"ips": ["127.0.0.2", "127.0.0.3"], "hosts": HEALTHY})
    urls = _urls(farm, HEALTHY)
    cache = {"HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": str(tmp_path / "cache")}
    seed(redis_server.url, urls)
    settings = _settings(farm, redis_server, **cache)
    assert run_fleet(settings, processes=1, timeout=60).codes == [0]
    farm.reset()
    _crawl_and_again(farm, redis_server, urls, from_farm=False, **cache)
    assert farm.arrivals() == []  # every page from the cache
