"""Three crawler processes on one Redis against one rate-limited host.

    .venv/bin/python bench/bench_redis_rate.py [--rate 2] [--retry-after 2] [--form seconds]

The token-bucket host of ``bench.scenarios.bucket`` (burst 1, 429 +
Retry-After above its rate), its URLs dealt round-robin to three real Scrapy
crawl processes that share the Redis backend at default settings (start at
1 s, floor 0.25 s). Judged on the farm's server-side arrivals like the
single-process scenarios: Retry-After violations, 429s, every URL fetched,
wall / T* (target <= 1.25). Needs ``redis-server`` on PATH; loopback only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from crawling import farm_settings  # noqa: E402
from redis_server import RedisServer, free_port  # noqa: E402
from test_multiprocess import crawl_together  # noqa: E402

from bench.metrics import judge  # noqa: E402
from bench.scenarios import bucket  # noqa: E402
from scrapy_politeness._sitefarm import Farm  # noqa: E402

TARGET = 1.25


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=2)
    parser.add_argument("--retry-after", type=int, default=2)
    parser.add_argument("--form", choices=("seconds", "date"), default="seconds")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--recovery", choices=("fast", "bracket", "additive"), default="fast")
    parser.add_argument("--arrivals", help="write the farm's arrivals here (JSON lines)")
    args = parser.parse_args(argv)
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install -y redis-server)")
    scenario = bucket(args.rate, args.retry_after, args.form, quick=False)
    server = RedisServer(binary, free_port()).start()
    try:
        with Farm(scenario.spec) as farm:
            urls = [farm.url(h, p) for h, p in scenario.urls]
            lists = [urls[i::args.processes] for i in range(args.processes)]
            settings = farm_settings(farm, POLITENESS_BACKEND=server.url,
                                     POLITENESS_RECOVERY=args.recovery,
                                     POLITENESS_NAMESPACE=f"rate:{uuid.uuid4().hex[:8]}")
            crawl_together(lists, settings)
            arrivals = farm.arrivals()
            j = judge(scenario, arrivals)
            if args.arrivals:
                Path(args.arrivals).write_text(
                    "".join(json.dumps(a.to_dict()) + "\n" for a in arrivals), encoding="utf-8")
    finally:
        server.stop()
    share = j.n429 / j.requests if j.requests else 0.0
    print(f"| {args.processes} processes on Redis, {scenario.name} | requests | URLs 200 | 429s "
          "| RA viol. | host viol. | wall s | T* s | wall/T* |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(f"| {scenario.about} | {j.requests} | {j.urls_ok}/{j.urls} | {j.n429} ({share:.0%}) "
          f"| {j.ra_viol} | {j.host_viol} | {j.wall:.2f} | {j.bound:.2f} | {j.ratio:.2f} |")
    ok = j.ra_viol == 0 and j.host_viol == 0 and j.urls_ok == j.urls and j.ratio <= TARGET
    print(f"\ntarget: 0 Retry-After and host violations, every URL, wall/T* <= {TARGET}: "
          f"{'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
