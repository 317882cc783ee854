"""A fleet's first requests: three processes released at one instant, again and again.

Each run starts three scrapy-redis processes (the shipped ``RedisSpider``,
the frontier queue) on one fresh Redis; a barrier releases them once each
one's spider and plugin are open, so their first pops and sends race. Every
gap is judged on the farm's server-side arrivals from the crawl's first
request on: a promise kept from the second second only is not kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from frontier_crawl import run_fleet, seed
from redis_server import RedisServer, redis_server_fixture
from test_frontier_fleet import fleet_settings
from test_multiprocess import count_violations, describe_violations

pytest.importorskip("scrapy_redis")

RUNS = 10

# Three hosts per IP, plus names that fail DNS (half time out, half NXDOMAIN).
BROAD_FAILING: dict[str, Any] = {
    "ips": ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"],
    "hosts": {**{f"h{i:02d}.farm.test": {"ip": f"127.0.0.{2 + i % 4}", "pages": 3}
                 for i in range(12)},
              **{f"x{i}.farm.test": {"ip": "127.0.0.2", "pages": 1,
                                     "dns": {"mode": "timeout" if i % 2 else "nxdomain"}}
                 for i in range(4)}}}
# A big host queued first, then small hosts on IPs of their own.
HEAD_OF_LINE: dict[str, Any] = {
    "ips": ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"],
    "hosts": {"big.farm.test": {"ip": "127.0.0.2", "pages": 8},
              **{f"s{i}.farm.test": {"ip": f"127.0.0.{3 + i}", "pages": 2} for i in range(4)}}}


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from redis_server_fixture()


def _urls(farm: Any, spec: dict[str, Any]) -> list[str]:
    most = max(raw["pages"] for raw in spec["hosts"].values())
    return [farm.url(h, f"/p/{n}") for n in range(most)
            for h, raw in spec["hosts"].items() if n < raw["pages"]]


def _runs(farm_factory: Any, server: RedisServer, spec: dict[str, Any],
          **extra: Any) -> list[str]:
    """``RUNS`` fleets released at one instant; the short gaps of each, from the first request."""
    farm = farm_factory(spec)
    urls = _urls(farm, spec)
    client = redis.Redis.from_url(server.url)
    problems: list[str] = []
    for run in range(RUNS):
        client.flushall()
        farm.reset()
        half = len(urls) // 2
        seed(server.url, urls[:half])

        def more(*_: Any, half: int = half) -> None:  # the rest after the first request
            deadline = time.monotonic() + 30
            while not farm.arrivals() and time.monotonic() < deadline:
                time.sleep(0.005)
            seed(server.url, urls[half:])

        fleet = run_fleet(fleet_settings(farm, server, **extra), kill=more, barrier=True)
        assert fleet.codes == [0, 0, 0], fleet.logs
        arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
        if count_violations(arrivals) != (0, 0):
            problems += [f"run {run}: {v}" for v in describe_violations(arrivals)]
    client.close()
    return problems


def test_a_fleet_keeps_every_gap_from_its_first_request_broad_with_failing_names(
        farm_factory: Any, redis_server: RedisServer) -> None:
    problems = _runs(farm_factory, redis_server, BROAD_FAILING, POLITENESS_DNS_TIMEOUT=1.0,
                     RETRY_TIMES=1)
    assert problems == []


def test_a_fleet_keeps_every_gap_from_its_first_request_head_of_line(
        farm_factory: Any, redis_server: RedisServer) -> None:
    problems = _runs(farm_factory, redis_server, HEAD_OF_LINE, CONCURRENT_REQUESTS=4)
    assert problems == []


@pytest.mark.integration
def test_the_barrier_releases_the_processes_together(tmp_path: Path) -> None:
    """The test's own harness: no process passes the barrier before all reached it."""
    import subprocess
    import sys

    folder = tmp_path / "barrier"
    folder.mkdir()
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); "
            "from redis_crawl_script import _barrier; "
            "_barrier(sys.argv[2], 3); print(time.monotonic())")
    tests = str(Path(__file__).parent)
    procs = []
    for delay in (0.0, 0.3, 0.6):
        time.sleep(delay and 0.3)
        procs.append(subprocess.Popen([sys.executable, "-c", code, tests, str(folder)],
                                      stdout=subprocess.PIPE, text=True))
    released = [float(p.communicate(timeout=30)[0]) for p in procs]
    assert max(released) - min(released) < 0.2  # all at once, though started 0.6 s apart
