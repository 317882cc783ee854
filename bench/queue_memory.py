"""Scheduler queue memory per host: ``python -m bench.queue_memory``.

The politeness-aware queue with the real middleware behind it, outside a crawl
(no network): N hosts (100,000) on 1,000 IPs, names already resolved, each
given 1 or 2 requests (``--per-host``). What is measured is what the queue
itself allocates to hold them (Python's traced heap, ``tracemalloc``), divided
by the hosts: the host records, their request queues, the heaps and groups
(in memory the Requests are built before tracing: the queue holds them, it did
not make them). Prints one JSON object; ``--jobdir`` measures the queue as the
scheduler builds it under ``JOBDIR`` (the requests in the store, on disk).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import tempfile
import tracemalloc
from types import SimpleNamespace
from typing import Any

from scrapy.utils.reactor import install_reactor


def measure(n_hosts: int, per_host: int, jobdir: bool) -> dict[str, Any]:
    from scrapy import Request
    from scrapy.squeues import FifoMemoryQueue, PickleLifoDiskQueue
    from scrapy.utils.httpobj import urlparse_cached
    from scrapy.utils.test import get_crawler

    from scrapy_politeness.middleware import PolitenessMiddleware
    from scrapy_politeness.scheduler import queue as pqueue

    crawler = get_crawler(settings_dict={
        "POLITENESS_DEFAULT": 1.0, "POLITENESS_FLOOR": 1.0, "POLITENESS_IP_FLOOR": 0.1,
        "POLITENESS_SEND_MARGIN": 0.0, "POLITENESS_DNS_HOSTS_FILE": None})
    mw = PolitenessMiddleware.from_crawler(crawler)
    hosts = [f"h{i}.test" for i in range(n_hosts)]
    for i, host in enumerate(hosts):
        mw.dns._cache[host] = (f"127.1.{i // 1000 % 250}.{i % 250}", math.inf)
    urls = [f"http://{host}/{n}" for n in range(per_host) for host in hosts]
    # In memory the queue holds the Requests: they are built (and parsed: Scrapy's parse
    # cache is every component's) before tracing. On disk it does not: each is built, pushed
    # and dropped while tracing, so what stays is what the queue keeps.
    requests: Any = (Request(u) for u in urls) if jobdir else [Request(u) for u in urls]
    if not jobdir:
        for request in requests:
            urlparse_cached(request)
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(  # how the scheduler builds it
        middleware=SimpleNamespace(middlewares=[mw]), active=set()))
    with tempfile.TemporaryDirectory(prefix="qmem-") as tmp:
        cls: Any = PickleLifoDiskQueue if jobdir else FifoMemoryQueue
        key = tmp + "/requests.queue" if jobdir else ""
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        q = pqueue.PolitenessAwarePriorityQueue(crawler, cls, key)
        for request in requests:
            q.push(request)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(q) == len(urls)
        q.close()
    return {"hosts": n_hosts, "requests_per_host": per_host, "jobdir": jobdir,
            "queue_bytes": after - before, "bytes_per_host": round((after - before) / n_hosts)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.queue_memory",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--per-host", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--jobdir", action="store_true", help="disk queues, as under JOBDIR")
    args = parser.parse_args(argv)
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    rows = [measure(args.hosts, n, args.jobdir) for n in args.per_host]
    for row in rows:
        print(f"{row['hosts']:,} hosts x {row['requests_per_host']} requests: "
              f"{row['bytes_per_host']:,} bytes per host", file=sys.stderr)
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
