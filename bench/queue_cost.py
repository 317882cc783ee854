"""Scheduler cost per request as the backlog grows: ``python -m bench.queue_cost``.

The politeness-aware queue with the real middleware behind it, on a fake clock
(no crawl, no network): N requests pending over H hosts (10 hosts per IP, or
``--per-ip``; names already resolved, 1 s intervals, IP floor 0.1 s), then in
steady state each step pops the next eligible request (moving the clock to the
queue's next eligible instant when nothing is), releases it as the gate would,
and pushes a new one, so the backlog stays at N. Reports microseconds per push
+ pop for each size and the ratio of the largest to the smallest; the target is
growth at most logarithmic: 100,000 pending over 10,000 hosts within 2x of 1,000 over 100.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import sys
import time
from typing import Any

from scrapy.utils.reactor import install_reactor

SIZES = ((1_000, 100), (10_000, 1_000), (100_000, 10_000))
TARGET = 2.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def measure(pending: int, n_hosts: int, steps: int, per_ip: int = 10) -> float:
    from scrapy import Request
    from scrapy.squeues import FifoMemoryQueue
    from scrapy.utils.test import get_crawler

    from scrapy_politeness.middleware import PolitenessMiddleware
    from scrapy_politeness.scheduler import queue as pqueue

    clock = Clock()
    pqueue.clock = clock  # type: ignore[assignment]
    crawler = get_crawler(settings_dict={
        "POLITENESS_DEFAULT": 1.0, "POLITENESS_FLOOR": 1.0, "POLITENESS_IP_FLOOR": 0.1,
        "POLITENESS_SEND_MARGIN": 0.0, "POLITENESS_DNS_HOSTS_FILE": None})
    mw = PolitenessMiddleware.from_crawler(crawler)
    hosts = [f"h{i}.test" for i in range(n_hosts)]
    for i, host in enumerate(hosts):
        mw.dns._cache[host] = (f"127.1.{i // per_ip // 250}.{i // per_ip % 250}", math.inf)
    q = pqueue.PolitenessAwarePriorityQueue(crawler, FifoMemoryQueue, "")
    serial = itertools.count()
    for i in range(pending):
        q.push(Request(f"http://{hosts[i % n_hosts]}/{next(serial)}"))

    def step() -> None:
        request = q.pop()
        while request is None:
            clock.now = max(clock.now, q.next_eligible())
            request = q.pop()
        host = request.url.split("/")[2]
        interval = mw.hosts.start(host, clock.now)  # released by the gate now
        mw.ips.spend(mw.dns._cache[host][0], clock.now, interval)
        q._handed.forget(request)
        q.push(Request(f"http://{host}/{next(serial)}"))

    for _ in range(min(steps, pending)):  # warm up: every host handed out once
        step()
    # The backlog's objects are long-lived: freeze them, so the cyclic GC's full
    # passes over them (a cost of holding 100,000 Requests in memory at all,
    # with any queue) do not blur the queue's own cost per operation.
    gc.collect()
    gc.freeze()
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - t0) / steps * 1e6
    finally:
        gc.unfreeze()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.queue_cost",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--per-ip", type=int, default=10, metavar="N",
                        help="hosts per IP (10; at 100 the IPs, not the hosts, set the pace)")
    args = parser.parse_args(argv)
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    rows: list[dict[str, Any]] = []
    for pending, n_hosts in SIZES:
        us = measure(pending, n_hosts, args.steps, args.per_ip)
        rows.append({"pending": pending, "hosts": n_hosts, "us_per_push_pop": round(us, 1)})
        print(f"{pending:>7,} pending over {n_hosts:>6,} hosts: {us:6.1f} µs per push + pop",
              file=sys.stderr)
    ratio = rows[-1]["us_per_push_pop"] / rows[0]["us_per_push_pop"]
    print(json.dumps({"rows": rows, "ratio_largest_to_smallest": round(ratio, 2),
                      "target": TARGET, "met": ratio <= TARGET}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
