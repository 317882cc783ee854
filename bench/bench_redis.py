"""Benchmark the Redis backend: reservations per second, then memory vs Redis.

    .venv/bin/python bench/bench_redis.py

(1) ``RedisBackend.reserve`` throughput on loopback against a throwaway
``redis-server`` (5,000 sequential, then 5,000 with 50 in flight), and the
same for ``feedback``. (2) The multi-process scenario of
``tests/test_multiprocess.py`` (three crawler processes, 3 hosts on 2 IPs,
0.3 s interval) once with the memory backend and once with Redis, judged by
the farm's server-side arrival times. Takes about 30 s.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from redis_server import RedisServer, free_port
from test_multiprocess import (
    SPEC,
    count_violations,
    crawl_together,
    scenario_settings,
    split_urls,
)

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness.distributed.redis_backend import RedisBackend
from scrapy_politeness.policy import Config, Signal

N = 5000
CONCURRENCY = 50


async def throughput(url: str) -> list[tuple[str, float]]:
    """(what, operations per second) for reserve and feedback."""
    backend = RedisBackend(url, namespace=f"bench:{uuid.uuid4().hex[:8]}")
    await backend.open()
    config = Config(default=0.0, floor=0.0, ceiling=60.0, ip_floor=0.0)
    rows = []
    try:
        started = time.perf_counter()
        for i in range(N):
            await backend.reserve(f"h{i % 500}.test", f"127.0.{i % 50}.1", config)
        rows.append(("reserve, sequential", N / (time.perf_counter() - started)))

        async def worker(w: int, op: str) -> None:
            for i in range(w, N, CONCURRENCY):
                if op == "reserve":
                    await backend.reserve(f"h{i % 500}.test", f"127.0.{i % 50}.1", config)
                else:
                    await backend.feedback(f"h{i % 500}.test", Signal(200, 0.0, 0.01), config, 5)

        for op in ("reserve", "feedback"):
            started = time.perf_counter()
            await asyncio.gather(*(worker(w, op) for w in range(CONCURRENCY)))
            rows.append((f"{op}, {CONCURRENCY} in flight", N / (time.perf_counter() - started)))
    finally:
        await backend.close()
    return rows


def scenario(url: str) -> list[tuple[str, int, int, int]]:
    """(backend, requests, host violations, IP violations) for memory and Redis."""
    rows = []
    for name, backend in (("memory", "memory"), ("redis", url)):
        with Farm(SPEC) as farm:
            urls = split_urls(farm, per_host=6)
            crawl_together(urls, scenario_settings(farm, backend))
            arrivals = farm.arrivals()
            host_bad, ip_bad = count_violations(arrivals)
            rows.append((name, len(arrivals), host_bad, ip_bad))
    return rows


def main() -> None:
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install -y redis-server)")
    server = RedisServer(binary, free_port()).start()
    try:
        rows = asyncio.run(throughput(server.url))
        print("| RedisBackend on loopback | ops/s |\n| --- | ---: |")
        for what, rate in rows:
            print(f"| {what} | {rate:,.0f} |")
        print()
        print("| 3 processes, 3 hosts on 2 IPs, 0.3 s | requests | host violations "
              "| IP violations |\n| --- | ---: | ---: | ---: |")
        for name, total, host_bad, ip_bad in scenario(server.url):
            print(f"| {name} | {total} | {host_bad} | {ip_bad} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
