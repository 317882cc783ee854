"""One overhead crawl, two checkouts, alternated: ``python -m bench.compare_roots``.

``python -m bench.compare_roots --old /tmp/old shared-hosting --rounds 3`` runs
the case's plugin crawl from the checkout at ``--old`` (``git worktree add
/tmp/old <commit>``) and from this one, in turns, against one farm, then prints
the medians: CPU of the crawl process, crawl wall time, and, from the farm's
first-byte times, the mean time an IP sat idle beyond its spacing. A change of
the plugin measured beside its parent on the same minutes, not across runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness._sitefarm.arrival import Arrival

from .overhead import CASES, _cases
from .runner import ROOT


def _idle(arrivals: Sequence[Arrival], spacing: float) -> float:
    """Mean over IPs of the time between starts beyond ``spacing``."""
    by_ip: dict[str, list[float]] = {}
    for a in arrivals:
        by_ip.setdefault(a.ip, []).append(a.t)
    return statistics.mean(
        sum(max(0.0, b - x - spacing) for x, b in itertools.pairwise(ts))
        for ts in (sorted(v) for v in by_ip.values()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare_roots")
    parser.add_argument("case", choices=CASES)
    parser.add_argument("--old", required=True, help="the other checkout's directory")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    case = _cases(False)[args.case]
    spec, pairs = case.spec()
    roots = {"old": str(Path(args.old).resolve()), "new": str(ROOT)}
    rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in roots}
    with Farm(spec) as farm, tempfile.TemporaryDirectory() as tmp:
        urls = [farm.url(h, p) for h, p in pairs]
        for i in range(args.rounds):
            for name, root in roots.items():
                farm.reset()
                job, out = Path(tmp, "job.json"), Path(tmp, "out.json")
                job.write_text(json.dumps({"urls": urls, "out": str(out),
                                           "settings": case.settings("plugin", farm)}))
                env = {**os.environ, "PYTHONPATH": root}
                before = os.times()
                subprocess.run([sys.executable, "-m", "bench.crawl", str(job)], cwd=root,
                               env=env, check=True, stderr=subprocess.DEVNULL)
                after = os.times()
                cpu = (after.children_user - before.children_user
                       + after.children_system - before.children_system)
                wall = float(json.loads(out.read_text())["crawl_wall"])
                idle = _idle(farm.arrivals(), case.interval)
                rows[name].append((cpu, wall, idle))
                print(f"round {i + 1} {name}: CPU {cpu:.2f} s, wall {wall:.2f} s, "
                      f"IP idle {idle:.2f} s", file=sys.stderr)
    for name, got in rows.items():
        med = [statistics.median(r[k] for r in got) for k in range(3)]
        print(f"{name}: median CPU {med[0]:.2f} s, wall {med[1]:.2f} s, IP idle {med[2]:.2f} s "
              f"({len(got)} crawls; {roots[name]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
