"""Three scrapy-redis crawler processes on one Redis, the frontier queue, the farm.

Real scrapy-redis (scheduler, dupefilter, RedisSpider fed through its start URLs
key), real redis-server, server-side arrival times. The stock scrapy-redis queue
runs the same crawl for the Redis command count it is held to.
"""

from __future__ import annotations

import collections
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from crawling import farm_settings
from frontier_crawl import STOCK_QUEUE, Fleet, run_fleet, seed
from redis_server import RedisServer, redis_server_fixture
from test_multiprocess import INTERVAL, SPEC, count_violations, describe_violations

from sitefarm import Farm

pytest.importorskip("scrapy_redis")


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from redis_server_fixture()


def fleet_settings(farm: Farm, server: RedisServer, **extra: Any) -> dict[str, Any]:
    return farm_settings(
        farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_IP_FLOOR=INTERVAL, POLITENESS_LATENCY_RISE=100.0,
        POLITENESS_BACKEND=server.url, POLITENESS_NAMESPACE=f"fl:{uuid.uuid4().hex[:8]}",
        REDIS_URL=server.url, REDIS_START_URLS_BATCH_SIZE=1000,
        MAX_IDLE_TIME_BEFORE_CLOSE=1, **extra)


def all_urls(farm: Farm, per_host: int) -> list[str]:
    return [farm.url(h, f"/p/{n}") for n in range(per_host) for h in SPEC["hosts"]]


def fetched(farm: Farm) -> collections.Counter[str]:
    return collections.Counter(f"{a.host}{a.path}" for a in farm.arrivals()
                               if a.path != "/robots.txt")


def wanted(urls: list[str]) -> collections.Counter[str]:
    return collections.Counter(u.split("://", 1)[1].replace(
        u.split("://", 1)[1].split("/", 1)[0], u.split("://", 1)[1].split("/", 1)[0]
        .split(":")[0], 1) for u in urls)


def test_three_processes_fetch_every_url_once_within_one_budget(
        farm_factory: Any, redis_server: RedisServer) -> None:
    farm = farm_factory(SPEC)
    urls = all_urls(farm, per_host=6)
    seed(redis_server.url, urls)
    fleet = run_fleet(fleet_settings(farm, redis_server))
    assert fleet.codes == [0, 0, 0], fleet.logs
    arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
    assert fetched(farm) == wanted(urls)
    assert count_violations(arrivals) == (0, 0), describe_violations(arrivals)
    assert sorted(i["url"] for i in fleet.items) == sorted(urls)
    assert sum("frontier/popped" in log for log in fleet.logs) >= 1
