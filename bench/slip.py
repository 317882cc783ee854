"""The send slip, seen by the server: ``python -m bench.slip [--load] [--margin S ...]``.

Crawls 8 hosts on 2 IPs (128 requests, interval 0.25 s) once per send margin
and prints the smallest start-to-start gap the farm measured per IP. With
``--load`` two busy loops keep both cores saturated during the crawls (they
stop by themselves after the run), the "busy 2-core machine" case.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from crawling import farm_settings, run_crawl

from scrapy_politeness._sitefarm import Farm, starts_by

INTERVAL = 0.25
SPEC = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
    **{f"h{i}.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 15} for i in range(4)},
    **{f"s{i}.farm.test": {"ip": "127.0.0.3", "kind": "slow", "latency": 0.3, "pages": 15}
       for i in range(4)},
}}


def _spin(until: float) -> None:
    while time.monotonic() < until:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--margin", type=float, action="append")
    parser.add_argument("--load", action="store_true", help="saturate both cores meanwhile")
    args = parser.parse_args()
    margins = args.margin or [0.0, 0.01]
    spinners = []
    if args.load:
        until = time.monotonic() + 40 * len(margins)
        spinners = [multiprocessing.Process(target=_spin, args=(until,)) for _ in range(2)]
        for p in spinners:
            p.start()
    try:
        print(f"| send margin | requests | smallest IP gap (needs {INTERVAL:.3f}) |")
        print("| --- | --- | --- |")
        for margin in margins:
            with Farm(SPEC) as farm:
                run_crawl([farm.url(h) for h in SPEC["hosts"]], farm_settings(
                    farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
                    POLITENESS_IP_FLOOR=0.05, POLITENESS_SEND_MARGIN=margin,
                    POLITENESS_LATENCY_RISE=100.0))
                arrivals = farm.arrivals()
            gaps = [min(b - a for a, b in pairwise(t))
                    for t in starts_by(arrivals, lambda a: a.ip).values()]
            print(f"| {margin:g} | {len(arrivals)} | {min(gaps):.4f} |")
    finally:
        for p in spinners:
            p.terminate()


if __name__ == "__main__":
    main()
