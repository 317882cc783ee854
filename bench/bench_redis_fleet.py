"""A fleet started at one instant, run again and again: every gap from the first request.

    .venv/bin/python -m bench.bench_redis_fleet [--runs 10] [--quick]
        [--scenarios head-of-line,broad,broad-dns]

Three scrapy-redis processes (the shipped ``RedisSpider``, the frontier queue)
on one fresh redis-server per run, released by a barrier once each one's
spider and plugin are open, so their first requests race. Per run: host and
IP violations judged on the farm's server-side arrivals from the first
request on (the short gaps are printed, with when and which process), wall /
T*, the smallest share of pages one process fetched, and the Redis commands
and script calls per request served counted by the server (``INFO
commandstats``, the commands scripts run included).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from frontier_crawl import CommandStats, run_fleet, seed
from redis_server import RedisServer

from scrapy_politeness._sitefarm import Farm

from .frontier import FAILING, SCENARIOS, settings_for, short_gaps
from .metrics import judge
from .scenarios import Scenario


def run_once(scenario: Scenario, binary: str) -> tuple[str, list[str]]:
    server = RedisServer(binary).start()
    try:
        with Farm(scenario.spec) as farm:
            pairs = list(scenario.urls)
            for i, bad in enumerate(FAILING.get(scenario.name, [])):
                pairs.insert(min(len(pairs), i * 3), bad)
            urls = [farm.url(h, p) for h, p in pairs]
            half = len(urls) // 2
            seed(server.url, urls[:half])

            def more(*_: Any) -> None:
                deadline = time.monotonic() + 60
                while not farm.arrivals() and time.monotonic() < deadline:
                    time.sleep(0.01)
                seed(server.url, urls[half:])

            counter = CommandStats(server.url)
            fleet = run_fleet(settings_for("frontier", scenario, farm, server.url),
                              timeout=300, kill=more, barrier=True)
            counts = counter.stop()
            arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
    finally:
        server.stop()
    j = judge(scenario, arrivals)
    by_url = {f"{urlsplit(i['url']).hostname}{urlsplit(i['url']).path}": i
              for i in fleet.items}
    per_process = Counter(i["process"] for i in fleet.items)
    share = min(per_process.get(p, 0) for p in range(3)) / max(len(fleet.items), 1)
    served = max(len(arrivals), 1)
    ok = "ok" if fleet.codes == [0, 0, 0] else f"exit codes {fleet.codes}"
    top = ", ".join(f"{n} {c}" for n, c in counts.most_common(6))
    row = (f"| {scenario.name} | {j.host_viol} | {j.ip_viol} | {j.wall / j.bound:.2f} "
           f"| {share:.2f} | {sum(counts.values()) / served:.1f} "
           f"| {CommandStats.scripts(counts) / served:.2f} | {top} | {ok} |")
    gaps = short_gaps(scenario, arrivals, by_url)
    if gaps:
        stats: Counter[str] = Counter()
        for log in fleet.logs:
            for name, n in re.findall(r"'politeness/((?:frontier|shared)/\w+)': (\d+)", log):
                stats[name] += int(n)
        gaps.append(f"stats: {dict(stats)}")
    return row, gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--scenarios", default="head-of-line,broad,broad-dns")
    args = parser.parse_args(argv)
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install -y redis-server)")
    print("| scenario | host viol | IP viol | wall/T* | share | commands / request "
          "| scripts / request | most run | processes |")
    print("| --- |" + " ---: |" * 6 + " --- | --- |")
    bad_runs = 0
    for name in args.scenarios.split(","):
        for _ in range(args.runs):
            row, gaps = run_once(SCENARIOS[name](args.quick), binary)
            print(row, flush=True)
            bad_runs += bool(gaps)
            for gap in gaps:
                print(f"    {gap}", flush=True)
    print(f"runs with a short gap: {bad_runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
