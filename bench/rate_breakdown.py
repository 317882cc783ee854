"""Where a rate-limited crawl's time goes: ``python -m bench.rate_breakdown CELL ...``.

Runs each ``bucket-*`` cell (or ``limit-drop``) once with the plugin and a
decision trace (``POLITENESS_TRACE``), then splits wall - T* on the SERVER
side (the farm's first-byte arrivals of the host, in order). Each gap between
two arrivals costs ``gap - p`` when it ends in a 200 (p the server's interval,
so a 200 at the server's pace costs 0) and the whole gap when it ends in a 429
(a request that fetched no page). The costs add up exactly to wall - T*:

- descent: the 200s before the first 429 (coming down from the 1 s start);
- 429s: each refused request's gap plus the pause after it (the gap that ends
  in the next 200, beyond p); the first one (found by the descent) apart from
  the later ones (refused probes);
- held: every other 200 after the first 429, split into what the controller
  asked (interval at dispatch - p, from the trace) and what the machinery
  added (server gap - interval: the send margin and loop slip).

Start-up (robots.txt is off in the bench, the first request opens the wall)
is outside the wall. ``--set NAME=VALUE`` adds a setting (JSON value), e.g.
``--set POLITENESS_RECOVERY='"additive"'``; ``--keep DIR`` keeps the
arrivals and the trace of each cell.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy_politeness._sitefarm import Arrival, Farm

from .metrics import judge
from .run import config_settings
from .runner import progress, run_crawl
from .scenarios import SCENARIOS, Scenario


@dataclass
class Breakdown:
    wall: float
    bound: float
    n429: int
    descent: float
    first_429: float
    later_429s: float
    held_asked: float
    held_slip: float
    held_gap: float  # mean server gap of the held 200s after the last 429
    held_interval: float  # mean interval asked for them

    def row(self, name: str) -> str:
        def pct(x: float) -> str:
            return f"{x:.2f} ({100 * x / self.bound:.1f}%)"

        return (f"| {name} | {self.wall / self.bound:.3f} | {self.n429} | {pct(self.descent)} "
                f"| {pct(self.first_429)} | {pct(self.later_429s)} | {pct(self.held_asked)} "
                f"| {pct(self.held_slip)} | {self.held_interval:.3f} / {self.held_gap:.3f} |")


HEADER = ("| cell | wall/T* | 429s | descent s | first 429 + pause s | later 429s + pauses s "
          "| held: asked - p s | held: slip s | after the last 429: interval / server gap |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")


def _intervals(trace: Path, host: str) -> list[tuple[str, float]]:
    """(url path, interval at dispatch) of ``host``'s dispatches, in order."""
    out = []
    for line in trace.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("type") == "dispatch" and rec.get("host") == host:
            out.append((rec["url"].split("/", 3)[-1], float(rec["interval"])))
    return out


def breakdown(scenario: Scenario, arrivals: list[Arrival], trace: Path) -> Breakdown:
    host, (p, _) = next(iter(scenario.rate_limits().items()))
    seq = sorted((a for a in arrivals if a.host == host), key=lambda a: a.t)
    asked: dict[str, list[float]] = {}
    for path, interval in _intervals(trace, host):
        asked.setdefault(path.lstrip("/"), []).append(interval)
    seen: dict[str, int] = {}
    intervals = []
    for a in seq:  # the n-th arrival of a path is its n-th dispatch
        k = seen.get(a.path.lstrip("/"), 0)
        seen[a.path.lstrip("/")] = k + 1
        got = asked.get(a.path.lstrip("/"), [])
        intervals.append(got[k] if k < len(got) else float("nan"))
    first = next((i for i, a in enumerate(seq) if a.status == 429), len(seq))
    last = max((i for i, a in enumerate(seq) if a.status == 429), default=-1)
    descent = first_429 = later = asked_x = slip = 0.0
    tail_gap, tail_int = [], []
    after_429 = False
    for i in range(1, len(seq)):
        gap = seq[i].t - seq[i - 1].t
        if seq[i].status == 429:
            cost, kind = gap, "429"
        else:
            cost, kind = gap - p, "pause" if seq[i - 1].status == 429 else "200"
        if i < first:
            descent += cost
        elif kind in ("429", "pause"):
            if i <= first + 1:
                first_429 += cost
            else:
                later += cost
            after_429 = True
        else:
            asked_x += intervals[i] - p
            slip += gap - intervals[i]
            if i > last + 1 and after_429:
                tail_gap.append(gap)
                tail_int.append(intervals[i])
    j = judge(scenario, arrivals)
    return Breakdown(j.wall, j.bound, j.n429, descent, first_429, later, asked_x,
                     slip, _mean(tail_gap), _mean(tail_int))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def run_cell(name: str, extra: dict[str, Any], keep: Path | None) -> Breakdown | None:
    scenario = SCENARIOS[name](False)
    with tempfile.TemporaryDirectory(prefix="rate-breakdown-") as tmp, Farm(scenario.spec) as farm:
        trace = Path(tmp, "trace.jsonl")
        urls = [farm.url(h, p) for h, p in scenario.urls]
        settings = {**config_settings("plugin", scenario, farm), **extra,
                    "POLITENESS_TRACE": str(trace)}
        progress(f"{name}: plugin {extra or ''}")
        run = run_crawl(urls, settings, timeout=max(180.0, 6 * scenario.lower_bound()[0] + 60))
        if not run.ok:
            progress(f"  FAILED: {run.error[-300:]}")
            return None
        arrivals = farm.arrivals()
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(trace, keep / f"{name}.trace.jsonl")
            (keep / f"{name}.arrivals.jsonl").write_text(
                "".join(json.dumps(a.to_dict()) + "\n" for a in arrivals), encoding="utf-8")
        b = breakdown(scenario, arrivals, trace)
        j = judge(scenario, arrivals)
        progress(f"  wall/T* {b.wall / b.bound:.3f}, 429s {b.n429}, violations host/IP/RA "
                 f"{j.host_viol}/{j.ip_viol}/{j.ra_viol}, URLs {j.urls_ok}/{j.urls}")
        return b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="+")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=JSON")
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args(argv)
    extra = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    rows = []
    for name in args.cells:
        b = run_cell(name, extra, args.keep)
        if b is not None:
            rows.append(b.row(name))
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print(HEADER)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
