"""Demo: crawl a local site farm with the example project and check its spacing.

Run from anywhere with the project's virtualenv Python::

    python example_project/demo.py

It starts the bundled demo farm (eight virtual hosts on three loopback IPs,
plus a loopback DNS server), runs ``scrapy crawl farm`` in this project as a
subprocess, then compares what the crawler reported (the stats JSON written by
``farmcrawl.extensions.StatsToJson``) with what the SERVER measured: request
counts and the smallest start-to-start gap per host and per IP.

The crawl also writes a decision trace (``POLITENESS_TRACE``) to
``.demo/trace.jsonl`` in the repository, and the demo draws it to
``.demo/timeline.png`` (interval per host over time, fetch starts, 429/5xx,
per-IP load; needs matplotlib, the ``plot`` extra). See docs/usage/observability.md.

Exit status: 0 on success, 1 when the farm did not start or the crawl failed
(``scrapy crawl`` exited with 1), 2 when a gap was below the interval the
plugin was asked to keep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from scrapy_politeness._sitefarm import (
    Arrival,
    Farm,
    FarmError,
    demo_spec,
    host_gaps,
    ip_gaps,
    starts_by,
)

PROJECT = Path(__file__).resolve().parent
TOLERANCE = 0.015  # seconds: timer and loopback jitter allowed below an interval
LOG_TAIL = 15
CRAWL_TIMEOUT = 180.0
DEMO_DIR = PROJECT.parent / ".demo"
TRACE_PATH = DEMO_DIR / "trace.jsonl"
TIMELINE_PATH = DEMO_DIR / "timeline.png"

sys.path.insert(0, str(PROJECT))
from farmcrawl import settings as project_settings  # noqa: E402

FLOOR = float(project_settings.POLITENESS_FLOOR)
IP_FLOOR = float(project_settings.POLITENESS_IP_FLOOR)


def _start_urls(farm: Farm, hosts: list[str]) -> list[str]:
    """Every host's root page; the always-503 host's pages too, so that the
    crawl keeps asking it (its 503 page has no links) until it is suspended."""
    urls = [farm.url(h) for h in hosts]
    for host, spec in farm.spec["hosts"].items():
        if spec.get("kind") == "always_503":
            urls += [farm.url(host, f"/p/{i}") for i in range(int(spec.get("pages", 0)))]
    return urls


def run_crawl(farm: Farm, hosts: list[str], stats_path: Path) -> tuple[int, str, float]:
    """``scrapy crawl farm`` in the project directory; (exit code, log, seconds)."""
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)  # let scrapy.cfg pick farmcrawl.settings
    env.update(
        FARM_DNS=farm.dns,
        FARM_URLS=",".join(_start_urls(farm, hosts)),
        STATS_JSON_PATH=str(stats_path),
    )
    # LOG_LEVEL / STATS_DUMP only shape the log: the stats go to the JSON file.
    cmd = [sys.executable, "-m", "scrapy", "crawl", "farm",
           "-s", "LOG_LEVEL=INFO", "-s", "STATS_DUMP=False", "-s", "POLITENESS_REPORT_STAT=True",
           "-s", f"POLITENESS_TRACE={TRACE_PATH}"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True,
                          timeout=CRAWL_TIMEOUT, check=False)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned first column, right-aligned others, two spaces apart."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        parts = [str(c).ljust(w) if i == 0 else str(c).rjust(w)
                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  " + "  ".join(parts).rstrip()

    return [line(headers), "  " + "  ".join("-" * w for w in widths), *map(line, rows)]


def fmt_backoffs(backoffs: dict[str, int]) -> str:
    return " ".join(f"{cause}:{n}" for cause, n in sorted(backoffs.items())) or "-"


def gap_after_429(arrivals: list[Arrival], host: str) -> float | None:
    """Smallest start-to-start gap from a 429 answer to the host's next request."""
    mine = sorted((a for a in arrivals if a.host == host), key=lambda a: a.t)
    gaps = [b.t - a.t for a, b in pairwise(mine) if a.status == 429]
    return min(gaps) if gaps else None


def draw_timeline(trace: Path, out: Path) -> str:
    """Draw the crawl's trace; a line saying what was written (or why not)."""
    if not trace.exists():
        return f"no trace at {trace}: no timeline drawn"
    try:
        from scrapy_politeness.observe.plot import read_trace, render, series
        path = render(series(read_trace(trace), top=8), out, width=1200, height=800, dpi=100)
    except ImportError:
        return ("timeline not drawn: matplotlib is missing "
                "(pip install matplotlib)")
    return f"Timeline of the decisions (trace {trace}): {path}"


def crawl_farm(spec: dict[str, Any], hosts: list[str], stats_path: Path
               ) -> tuple[int, str, float, list[Arrival]] | None:
    """Start the farm, crawl it, stop it: (exit code, log, seconds, what the sites saw);
    None when the farm did not start (said in one line)."""
    print(f"Starting the site farm: {len(hosts)} hosts on {len(spec['ips'])} IPs ...")
    try:
        farm = Farm(spec).start()
    except FarmError as exc:
        print(f"FAILED: the site farm did not start: {exc}")
        return None
    try:
        print(f"Crawling with `scrapy crawl farm` (farm DNS {farm.dns}); about 15 s ...")
        rc, log, took = run_crawl(farm, hosts, stats_path)
        return rc, log, took, farm.arrivals()
    finally:
        farm.stop()


def main() -> int:
    spec = demo_spec()
    hosts = list(spec["hosts"])
    with tempfile.TemporaryDirectory(prefix="farmcrawl-demo-") as tmp:
        stats_path = Path(tmp, "stats.json")
        crawled = crawl_farm(spec, hosts, stats_path)
        if crawled is None:
            return 1
        rc, log, took, arrivals = crawled
        stats: dict[str, Any] = (json.loads(stats_path.read_text(encoding="utf-8"))
                                 if stats_path.exists() else {})

    print(f"\n-- last {LOG_TAIL} log lines (crawl exit code {rc}, {took:.1f} s) --")
    tail = log.rstrip().splitlines()[-LOG_TAIL:]
    while len(tail) > 1 and not tail[0][:1].isdigit():  # start at a timestamped line
        tail.pop(0)
    for line in tail:
        print("  " + line)
    if rc != 0 or not stats:
        print(f"\nFAILED: the crawl exited with {rc}"
              + ("" if stats else " and wrote no stats JSON"))
        return 1

    # -- per host: what the server saw vs. what the plugin reported ----------
    report = {row["host"]: row for row in stats.get("politeness/report", [])}
    seen = starts_by(arrivals, lambda a: a.host)
    rows = []
    for host in hosts:
        r = report.get(host)
        rows.append([
            host, spec["hosts"][host]["ip"], str(len(seen.get(host, []))),
            "-" if r is None else f"{r['interval']:.2f}",
            "-" if r is None else fmt_backoffs(r["backoffs"]),
            "-" if r is None else f"{r['crawl_delay']:g}",
            "-" if r is None else ("yes" if r["dead"] else "no"),
        ])
    print("\n-- per host (requests: as seen by the server, robots.txt included) --")
    print("\n".join(table(["host", "ip", "requests", "interval", "backoffs", "crawl-delay",
                           "dead"], rows)))

    # -- spacing measured by the farm ------------------------------------------
    checks: list[tuple[str, float | None, float]] = []
    hgaps, igaps = host_gaps(arrivals), ip_gaps(arrivals)
    for host in hosts:
        delay = spec["hosts"][host].get("crawl_delay")
        checks.append((host, hgaps.get(host), max(FLOOR, delay or 0.0)))
    for host, hspec in spec["hosts"].items():
        if hspec.get("kind") == "rate_limited":
            checks.append((f"{host} after 429", gap_after_429(arrivals, host),
                           float(hspec.get("retry_after", 1))))
    for ip in spec["ips"]:
        checks.append((f"IP {ip}", igaps.get(ip), IP_FLOOR))
    bad = [(name, gap, need) for name, gap, need in checks
           if gap is not None and gap < need - TOLERANCE]
    gap_rows = [[name, "-" if gap is None else f"{gap:.3f}", f"{need:.3f}",
                 "-" if gap is None else ("BELOW" if gap < need - TOLERANCE else "ok")]
                for name, gap, need in checks]
    print("\n-- smallest start-to-start gap measured by the farm (seconds) --")
    print("\n".join(table(["host / ip", "min gap", "asked", "check"], gap_rows)))
    if bad:
        print(f"VIOLATIONS (tolerance {TOLERANCE * 1000:.0f} ms):")
        for name, gap, need in bad:
            print(f"  {name}: gap {gap:.3f} s < interval {need:.3f} s")
    else:
        print(f"OK: no host gap below its interval (tolerance {TOLERANCE * 1000:.0f} ms)")

    # -- the plugin's own counters -----------------------------------------------
    keys = sorted(k for k in stats if k.startswith("politeness/") and k != "politeness/report")
    cells = [f"{k.removeprefix('politeness/')} = "
             f"{round(v, 2) if isinstance(v, float) else v}" for k in keys for v in [stats[k]]]
    width = max((len(c) for c in cells), default=0) + 2
    print("\n-- politeness/* stats --")
    for i in range(0, len(cells), 3):
        print("  " + "".join(c.ljust(width) for c in cells[i:i + 3]).rstrip())
    print("\n" + draw_timeline(TRACE_PATH, TIMELINE_PATH))
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
