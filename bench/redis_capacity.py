"""How many requests per second one Redis carries for the frontier: N simulated processes.

    .venv/bin/python -m bench.redis_capacity [--processes 1,5,10,25,50] [--seconds 10]
        [--rate 20] [--workers 4]

One redis-server; N simulated crawl processes, each a real Redis client issuing
the plugin's real scripts as a busy crawl process would: ``frontier_pop.lua``
(its acks and its pushes riding on it, as the queue sends them) at up to
``--rate`` hand-outs per second, and for every request handed out, 0.1 s
later, ``feedback.lua`` through the real ``RedisBackend``; every request
handed out is replaced by a new one pushed for its host (a crawl finding
links), so the frontier never runs dry. 4,000 hosts on 4,000 IPs at 1 s: the
buckets allow 4,000 starts/s, more than offered, so what limits the rate is
the clients or Redis. The simulated processes run as asyncio tasks spread over
``--workers`` OS processes.

Per N: requests served per second, Redis CPU per request (``INFO cpu``,
used_cpu_sys + used_cpu_user), Redis's CPU use (its share of one core), the
commands and script calls per request (``INFO commandstats``, those scripts
run included), and the rate at which one Redis core would be saturated at
that cost (1 / CPU per request). On a machine where the clients share the
cores with Redis, the clients saturate first: the last column is the figure
for a Redis on a core of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import redis
from frontier_crawl import CommandStats
from redis_server import RedisServer

from scrapy_politeness.distributed.frontier import frontier_script
from scrapy_politeness.distributed.redis_backend import RedisBackend
from scrapy_politeness.policy import Config, Signal

P, NS = "cap:requests", "cap"
HOSTS = 4000
INTERVAL, IP_FLOOR = 1.0, 0.25
LATENCY = 0.1  # from hand-out to the response's feedback
PAYLOAD = 400  # bytes of a serialised request (scrapy-redis pickles ~300-500)
LEASE, LOOKS, LEAD, CLAIM, IP_TTL, MARGIN, IDLE = 10.0, 16, 0.05, 0.2, 600.0, 0.01, 60.0
BEAT = LEASE / 5  # a pop beats this long after the last beat, as the queue's (_BEAT)


def _host(i: int) -> tuple[str, str]:
    return f"h{i:05d}.test", f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"


def _data(host: str) -> str:
    return (host + "|").ljust(PAYLOAD, "x")


def seed(url: str) -> None:
    """Two queued requests per host, before the clock starts."""
    client = redis.Redis.from_url(url)
    push = client.register_script(frontier_script("push"))
    pipe = client.pipeline(transaction=False)
    for i in range(HOSTS):
        host, ip = _host(i)
        for _ in range(2):
            push(args=[P, _data(host), 0, host, ip, IP_TTL, 2.0, ""], client=pipe)
    pipe.execute()
    client.close()


async def _simulate(url: str, rate: float, until: float, served: list[int]) -> None:
    """One crawl process: pops at up to ``rate`` per second, feedback per request."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(url)
    pop = client.register_script(frontier_script("pop"))
    backend = RedisBackend(url, namespace=NS)
    await backend.open()
    config = Config(default=INTERVAL, floor=INTERVAL, ip_floor=IP_FLOOR)
    pid = uuid.uuid4().hex
    acks: list[str] = []
    pushes: list[Any] = []
    tasks: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    last_beat = -LEASE

    async def finish(lease: str, host: str) -> None:
        await asyncio.sleep(LATENCY)
        await backend.feedback(host, Signal(200, 0.0, LATENCY), config, 5)
        acks.append(lease)  # acknowledged with the next pop, as the queue does

    while time.time() < until:
        began = loop.time()
        taken, acks = acks, []
        carried, pushes = pushes, []
        beat = LEASE if began - last_beat >= BEAT else 0.0
        if beat:
            last_beat = began
        reply = await pop(args=[P, NS, pid, beat, 1, INTERVAL, INTERVAL, 60.0, IP_FLOOR,
                                MARGIN, IDLE, LOOKS, LEAD, 0.0, CLAIM, IP_TTL,
                                len(taken), *taken, 0, len(carried) // 6, *carried,
                                "decoupled"])
        kind = reply[0].decode()
        wait = 1.0 / rate
        if kind == "req":
            served[0] += 1
            host = reply[1].decode().split("|", 1)[0]
            ip = reply[3].decode()
            task = loop.create_task(finish(reply[2].decode(), host))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            pushes += [_data(host), 0, host, ip, 2.0, ""]  # a link found on the page
        elif kind in ("wait", "claimed"):
            wait = max(wait, min(float(reply[1]), 0.5))
        else:
            wait = 0.5
        await asyncio.sleep(max(0.0, wait - (loop.time() - began)))
    if tasks:
        await asyncio.wait(tasks)
    await backend.close()
    await client.aclose()


def _worker(url: str, sims: int, rate: float, until: float, out: Any) -> None:
    async def main() -> int:
        counts = [[0] for _ in range(sims)]
        await asyncio.gather(*(_simulate(url, rate, until, c) for c in counts))
        return sum(c[0] for c in counts)

    out.put(asyncio.run(main()))


def _cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def measure(binary: str, processes: int, seconds: float, rate: float, workers: int) -> str:
    server = RedisServer(binary).start()
    try:
        seed(server.url)
        client = redis.Redis.from_url(server.url)
        counter = CommandStats(server.url)
        cpu0, t0 = _cpu(client), time.time()
        until = t0 + seconds
        out: Any = multiprocessing.Queue()
        k = min(workers, processes)
        shares = [processes // k + (i < processes % k) for i in range(k)]
        procs = [multiprocessing.Process(target=_worker, args=(server.url, s, rate, until, out))
                 for s in shares]
        for p in procs:
            p.start()
        served = sum(out.get(timeout=seconds + 60) for _ in procs)
        for p in procs:
            p.join()
        wall = time.time() - t0
        cpu = _cpu(client) - cpu0
        counts = counter.stop()
        client.close()
    finally:
        server.stop()
    per = cpu / max(served, 1)
    return (f"| {processes} | {processes * rate:.0f} | {served / wall:.0f} "
            f"| {per * 1e6:.0f} | {cpu / wall:.2f} "
            f"| {sum(counts.values()) / max(served, 1):.1f} "
            f"| {CommandStats.scripts(counts) / max(served, 1):.2f} | {1 / per:,.0f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="1,5,10,25,50")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=20.0,
                        help="hand-outs per second a simulated process asks for at most")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args(argv)
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install -y redis-server)")
    print("| processes | offered req/s | served req/s | Redis CPU µs / request "
          "| Redis CPU (cores) | commands / request | scripts / request "
          "| req/s one Redis core carries |")
    print("|" + " ---: |" * 8)
    for n in (int(x) for x in args.processes.split(",")):
        print(measure(binary, n, args.seconds, args.rate, args.workers), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
