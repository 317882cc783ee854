"""Where a paced crawl's wall time goes, per IP: ``python -m bench.gap_spread``.

``python -m bench.gap_spread many-hosts-spaced --runs 2 -s POLITENESS_GC_FREEZE=false``
runs the plugin crawl of an overhead case (bench/overhead.py) against one farm
and prints, from the farm's first-byte times, the spread of the start-to-start
gaps on each IP (compare them with the case's spacing): percentiles, split by
whether the gap follows a host's first request (a new connection, a latency
not yet known) or a later one; and, from the crawl process (``BENCH_GC=1``), how many full garbage
collections ran and the wall seconds they held the loop. ``-s NAME=VALUE``
(JSON values, repeatable) overrides a setting of the plugin, to set two
configurations side by side.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
from typing import Any

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness._sitefarm.arrival import Arrival

from .overhead import CASES, _cases
from .runner import run_crawl


def _percentiles(gaps: list[float]) -> str:
    if not gaps:
        return "none"
    gaps = sorted(gaps)
    n = len(gaps)
    return (f"n {n}, p10 {gaps[n // 10]:.4f}, p50 {gaps[n // 2]:.4f}, "
            f"p90 {gaps[9 * n // 10]:.4f}, mean {sum(gaps) / n:.4f} s")


def split_gaps(arrivals: list[Arrival]) -> tuple[list[float], list[float]]:
    """Start-to-start gaps on each IP: those after a host's first request, and the rest."""
    seen: set[str] = set()
    after_first: list[float] = []
    after_later: list[float] = []
    by_ip: dict[str, list[tuple[Arrival, bool]]] = {}
    for a in sorted(arrivals, key=lambda a: a.t):
        by_ip.setdefault(a.ip, []).append((a, a.host not in seen))
        seen.add(a.host)
    for starts in by_ip.values():
        for (x, first), (y, _) in itertools.pairwise(starts):
            (after_first if first else after_later).append(y.t - x.t)
    return after_first, after_later


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gap_spread")
    parser.add_argument("case", choices=CASES)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("-s", dest="overrides", action="append", default=[],
                        metavar="NAME=VALUE", help="a plugin setting, the value as JSON")
    args = parser.parse_args(argv)
    case = _cases(False)[args.case]
    extra: dict[str, Any] = {}
    for item in args.overrides:
        name, _, value = item.partition("=")
        extra[name] = json.loads(value)
    spec, pairs = case.spec()
    os.environ["BENCH_GC"] = "1"  # the crawl process times its full collections
    print(f"{args.case}: spacing {case.interval} s, overrides {extra or 'none'}")
    with Farm(spec) as farm:
        urls = [farm.url(h, p) for h, p in pairs]
        for i in range(args.runs):
            farm.reset()
            run = run_crawl(urls, {**case.settings("plugin", farm), **extra}, timeout=600)
            if not run.ok:
                print(f"run {i + 1}: crawl failed: {run.error[-500:]}")
                return 1
            after_first, after_later = split_gaps(farm.arrivals())
            stats = run.result.get("gc_collections", [{}] * 3)
            print(f"run {i + 1}: crawl wall {run.result['crawl_wall']:.2f} s, CPU {run.cpu:.2f} s, "
                  f"{stats[-1].get('collections', 0)} full collections holding the loop "
                  f"{run.result.get('gc_full_wall', 0.0):.2f} s")
            print(f"  gaps after a host's first request: {_percentiles(after_first)}")
            print(f"  gaps after a later request:        {_percentiles(after_later)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
