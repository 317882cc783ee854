"""What explaining a slow crawl costs: ``python -m bench.wait_accounting``.

Side by side in one process, on a fake clock (no crawl, no network):

- per request: the scheduler queue's push + pop (``bench.queue_cost``'s steady
  state, 1,000 pending over 100 hosts, with the middleware's gate seen by the
  queue as in a crawl) with its waits counted, and with the counting switched
  off (``SchedulerWaits.count`` and ``.popped`` made no-ops); rounds alternate
  and the best of each is kept. Target: within 10 %.
- per live line: ``Observer.live_line`` with 100 and 10,000 hosts holding
  requests in the scheduler (5 each); the cost per host should stay flat
  (O(hosts with requests waiting)), the tick's own check is O(1).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import sys
import time
from types import SimpleNamespace
from typing import Any

from scrapy.utils.reactor import install_reactor

TARGET = 1.10  # counted / not counted, per push + pop


def _setup(settings: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The real middleware, and a scheduler queue that sees it (as in a crawl), on a
    fake clock."""
    from scrapy.squeues import FifoMemoryQueue
    from scrapy.utils.test import get_crawler

    from bench.queue_cost import Clock
    from scrapy_politeness.middleware import PolitenessMiddleware
    from scrapy_politeness.scheduler import queue as pqueue

    clock = Clock()
    pqueue.clock = clock  # type: ignore[assignment]
    crawler = get_crawler(settings_dict={"POLITENESS_DNS_HOSTS_FILE": None, **settings})
    mw = PolitenessMiddleware.from_crawler(crawler)
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(  # type: ignore[assignment]
        middleware=SimpleNamespace(middlewares=[mw]), active=set()))
    q = pqueue.PolitenessAwarePriorityQueue(crawler, FifoMemoryQueue, "")
    assert q._mw is mw
    return clock, mw, q


def steady(pending: int, n_hosts: int, steps: int) -> float:
    """µs per push + pop with ``pending`` requests over ``n_hosts`` hosts (10 per IP, 1 s
    intervals, IP floor 0.1 s): ``bench.queue_cost``'s steady state, the gate in place."""
    from scrapy import Request

    clock, mw, q = _setup({"POLITENESS_DEFAULT": 1.0, "POLITENESS_FLOOR": 1.0,
                           "POLITENESS_IP_FLOOR": 0.1, "POLITENESS_SEND_MARGIN": 0.0})
    hosts = [f"h{i}.test" for i in range(n_hosts)]
    for i, host in enumerate(hosts):
        mw.dns._cache[host] = (f"127.1.{i // 10 // 250}.{i // 10 % 250}", math.inf)
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

    for _ in range(min(steps, pending)):
        step()
    gc.collect()
    gc.freeze()
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - t0) / steps * 1e6
    finally:
        gc.unfreeze()


def push_pop(rounds: int, steps: int) -> tuple[float, float]:
    """Best µs per push + pop with the waits counted, and without."""
    from scrapy_politeness.scheduler.waits import SchedulerWaits

    real = SchedulerWaits.count, SchedulerWaits.popped
    best = {True: math.inf, False: math.inf}
    for _ in range(rounds):
        for counted in (True, False):
            if not counted:
                SchedulerWaits.count = SchedulerWaits.popped = (  # type: ignore[method-assign]
                    lambda *args: None)
            try:
                best[counted] = min(best[counted], steady(1_000, 100, steps))
            finally:
                SchedulerWaits.count, SchedulerWaits.popped = real  # type: ignore[method-assign]
    return best[True], best[False]


def line_cost(n_hosts: int, repeat: int) -> tuple[float, float]:
    """µs per live line and per tick with ``n_hosts`` hosts holding requests."""
    from scrapy import Request

    clock, mw, q = _setup({})
    for i in range(n_hosts):
        host = f"h{i}.test"
        mw.dns._cache[host] = (f"127.1.{i // 250 % 250}.{i % 250}", math.inf)
        for n in range(5):
            q.push(Request(f"http://{host}/{n}"))
    observer = mw.observer
    observer.open(SimpleNamespace(name="s"), clock.now)
    gc.collect()
    gc.freeze()  # the backlog's Requests: a full collection's walk over them is not the line's
    try:
        t0 = time.perf_counter()
        for _ in range(repeat):
            observer.live_line(clock.now, 0, None)
        line = (time.perf_counter() - t0) / repeat * 1e6
        t0 = time.perf_counter()
        for i in range(repeat * 100):
            observer.tick(clock.now + i * 0.25, 0, None)  # the line is not due: the O(1) check
        tick = (time.perf_counter() - t0) / (repeat * 100) * 1e6
    finally:
        gc.unfreeze()
    return line, tick


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wait_accounting",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args(argv)
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    counted, plain = push_pop(args.rounds, args.steps)
    ratio = counted / plain
    print(f"push + pop: {counted:.1f} µs counted, {plain:.1f} µs not counted: x{ratio:.3f}",
          file=sys.stderr)
    lines: list[dict[str, Any]] = []
    for n_hosts, repeat in ((100, 200), (10_000, 20)):
        line, tick = line_cost(n_hosts, repeat)
        lines.append({"hosts": n_hosts, "us_per_line": round(line, 1),
                      "us_per_host": round(line / n_hosts, 3), "us_per_tick": round(tick, 2)})
        print(f"{n_hosts:>6,} hosts waiting: {line:9.1f} µs per live line "
              f"({line / n_hosts:.2f} µs per host), {tick:.2f} µs per tick", file=sys.stderr)
    print(json.dumps({"us_per_push_pop_counted": round(counted, 2),
                      "us_per_push_pop_plain": round(plain, 2), "ratio": round(ratio, 3),
                      "target": TARGET, "met": ratio <= TARGET, "live_line": lines}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
