"""Memory: a million hosts on a simulated clock, or the bytes per table entry.

``python -X tracemalloc=3 -m bench.memory [--hosts 1000000]`` runs the broad
simulation of ``bench/active_hosts.py`` (memory per structure after the first
10,000 hosts, at the peak and after the hosts went idle; the eviction pass's
time against the hosts ever seen).

``--entries`` measures the bytes per table entry instead: it pushes N hosts
over M IPs through the pure tables (``HostTable``, ``IPTable``) on a simulated
clock: per host one ``start``, one ``spend`` on its IP and one
``feedback`` with a 200. Memory is Python's traced heap (``tracemalloc``,
started before anything is imported when run with ``-X tracemalloc``), read
at the baseline (package imported, tables empty), after filling, and after
``evict()`` with a cutoff past every instant. Allocations after filling are
split between the host table and the IP table by the source line that made
them. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import sys
import time
import tracemalloc
from typing import Any

from scrapy_politeness.policy import Config, HostTable, IPTable, Signal
from scrapy_politeness.policy import tables as tables_module

HOST_INTERVAL = 1.0
STEP = 0.001  # simulated seconds between two hosts' first fetches
LATENCY = 0.05


def _host_name(i: int) -> str:
    return f"host{i}.site{i % 9973}.example.com"


def _ip_name(j: int) -> str:
    return f"127.{(j >> 16) & 255}.{(j >> 8) & 255}.{j & 255}"


def _ip_lines() -> set[tuple[str, int]]:
    """Source lines whose allocations belong to the IP table."""
    lines: set[tuple[str, int]] = set()
    for obj in (IPTable, _ip_name):
        src, start = inspect.getsourcelines(obj)
        filename = inspect.getsourcefile(obj) or ""
        lines.update((filename, n) for n in range(start, start + len(src)))
    return lines


def fill(hosts: HostTable, ips: IPTable, n_hosts: int, n_ips: int) -> float:
    ok = Signal(200, 0.0, LATENCY)
    now = 0.0
    for i in range(n_hosts):
        now = i * STEP
        key = _host_name(i)
        interval = hosts.start(key, now)
        ips.spend(_ip_name(i % n_ips), now, interval)
        hosts.feedback(key, ok, now + LATENCY)
    return now


def measure(n_hosts: int, n_ips: int) -> dict[str, Any]:
    if not tracemalloc.is_tracing():
        tracemalloc.start()
    config = Config(default=HOST_INTERVAL, floor=0.25, ip_floor=0.25)
    hosts, ips = HostTable(config), IPTable(config.ip_floor)
    ip_lines = _ip_lines()
    gc.collect()
    baseline = tracemalloc.get_traced_memory()[0]
    before = tracemalloc.take_snapshot()
    t0 = time.perf_counter()
    end = fill(hosts, ips, n_hosts, n_ips)
    fill_s = time.perf_counter() - t0
    gc.collect()
    filled = tracemalloc.get_traced_memory()[0]
    after = tracemalloc.take_snapshot()
    ip_bytes = host_bytes = 0
    for diff in after.compare_to(before, "lineno"):
        frame = diff.traceback[0]
        if (frame.filename, frame.lineno) in ip_lines:
            ip_bytes += diff.size_diff
        else:
            host_bytes += diff.size_diff
    del after
    assert len(hosts) == n_hosts, len(hosts)
    assert len(ips) == n_ips, len(ips)
    cutoff = end + 10 * 60.0 * 60
    evicted_hosts, evicted_ips = hosts.evict(cutoff), ips.evict(cutoff)
    gc.collect()
    evicted = tracemalloc.get_traced_memory()[0]
    # What eviction left behind: still-live growth since the baseline, by source line.
    kept = tracemalloc.take_snapshot().compare_to(before, "lineno")
    leftover_sites = [
        (d.size_diff, f"{d.traceback[0].filename.rsplit('/', 1)[-1]}:{d.traceback[0].lineno}")
        for d in kept[:3] if d.size_diff > 10_000]
    del before
    return {
        "hosts": n_hosts, "ips": n_ips, "fill_seconds": round(fill_s, 2),
        "tables_module": tables_module.__file__,
        "baseline_bytes": baseline, "filled_bytes": filled, "evicted_bytes": evicted,
        "host_table_bytes": host_bytes, "ip_table_bytes": ip_bytes,
        "per_host_entry": host_bytes / n_hosts, "per_ip_entry": ip_bytes / n_ips,
        "ip_share_per_host": ip_bytes / n_hosts,
        "per_live_host_total": (filled - baseline) / n_hosts,
        "evicted_hosts": evicted_hosts, "evicted_ips": evicted_ips,
        "left_after_evict": len(hosts) + len(ips),
        "after_evict_vs_baseline": evicted / baseline,
        "leftover_bytes": evicted - baseline,
        "leftover_sites": [[site, size] for size, site in leftover_sites if size > 0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1_000_000)
    parser.add_argument("--ips", type=int, default=None,
                        help="IPs (default: 1,000; 100,000 with --entries)")
    parser.add_argument("--no-trace", action="store_true",
                        help="time the simulation without tracemalloc (no bytes)")
    parser.add_argument("--entries", action="store_true",
                        help="bytes per table entry instead of the broad simulation")
    args = parser.parse_args(argv)
    if args.entries:
        print(json.dumps(measure(args.hosts, args.ips or 100_000)))
    else:
        from bench.active_hosts import simulate

        print(json.dumps(simulate(args.hosts, args.ips or 1000, trace=not args.no_trace),
                         indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
