"""The benchmark runner: ``python -m bench [--quick] [--out FILE] [--only NAME ...]``.

1. Politeness scenarios (real crawls against the local site farm, judged on the
   server side) for five configurations side by side: the plugin with the queue
   its add-on sets, the plugin with Scrapy's default queue, AutoThrottle,
   DOWNLOAD_DELAY with and without jitter.
2. CPU overhead per request (:mod:`bench.overhead`): a 5,000-request crawl and a
   1,500-host crawl with all intervals 0, and the 1,500-host crawl with 0.1 s
   spacing; stock vs plugin, alternating, CPU time of the crawl process.
3. Memory per tracked host / IP entry and after eviction (pure tables, tracemalloc).
4. ``bench/bench_redis.py`` when it exists and ``redis-server`` is on PATH.

Markdown goes to stdout (and ``--out``); progress lines go to stderr. Only
loopback addresses are used.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scrapy
import twisted

from scrapy_politeness._sitefarm import Farm

from .metrics import Judgement, after_change, judge, served_bound
from .ramp import ramp
from .reissue import PATH as REISSUE
from .runner import ADDON, ROOT, STATIC_RESOLVER, STOCK_PER_IP, T0, progress, run_crawl
from .scenarios import DEFAULT_SKIP, GROUPS, SCENARIOS, Scenario

DEFAULT_QUEUE = "scrapy.pqueues.DownloaderAwarePriorityQueue"
CONFIGS = ("plugin", "plugin+default-queue", "autothrottle", "delay+jitter", "delay")
ALL_CONFIGS = (*CONFIGS, "plugin-additive", "plugin-bracket", "delay-per-ip",
               "plugin+reissue-960")
# "plugin-additive": the plugin with the reference design's recovery (POLITENESS_RECOVERY);
# "plugin-bracket": with the bracket search alone (no round-pace prior).
EXTRA_SECTIONS = ("dns-faults", "dns-loss", "overhead", "memory", "redis")
MEM_TARGET = 400.0
EVICT_TARGET = 1.10


def config_settings(config: str, scenario: Scenario, farm: Farm) -> dict[str, Any]:
    settings: dict[str, Any] = {"CONCURRENT_REQUESTS": scenario.concurrent_requests,
                                **scenario.extra}
    interval = scenario.interval
    if config.startswith("plugin"):
        start = interval if scenario.start_interval is None else scenario.start_interval
        settings.update(ADDONS=ADDON, POLITENESS_DEFAULT=start, POLITENESS_FLOOR=interval,
                        POLITENESS_IP_FLOOR=scenario.ip_floor,
                        POLITENESS_DNS_NAMESERVERS=[farm.dns])
        if scenario.host_intervals and not scenario.robots_delays:
            settings["POLITENESS_HOSTS"] = {h: {"floor": v}
                                            for h, v in scenario.host_intervals.items()}
        if config == "plugin+default-queue":
            settings["SCHEDULER_PRIORITY_QUEUE"] = DEFAULT_QUEUE
        if config == "plugin-additive":
            settings["POLITENESS_RECOVERY"] = "additive"
        elif config == "plugin-bracket":
            settings["POLITENESS_RECOVERY"] = "bracket"
        elif config == "plugin+reissue-960":  # a custom retry above the plugin
            settings["DOWNLOADER_MIDDLEWARES"] = {REISSUE: 960}
        return settings
    settings["TWISTED_DNS_RESOLVER"] = STATIC_RESOLVER
    settings["DOWNLOAD_DELAY"] = interval
    if scenario.host_intervals:
        settings["DOWNLOAD_SLOTS"] = {h: {"delay": v} for h, v in scenario.host_intervals.items()}
    if config == "autothrottle":
        settings.update(AUTOTHROTTLE_ENABLED=True, AUTOTHROTTLE_START_DELAY=interval)
    elif config == "delay":
        settings["DOWNLOAD_DELAY_JITTER"] = 0
    elif config == "delay-per-ip":
        settings.update(STOCK_PER_IP, DOWNLOAD_DELAY=scenario.ip_floor, DOWNLOAD_DELAY_JITTER=0)
    elif config != "delay+jitter":
        raise ValueError(config)
    return settings


# -- 1. scenarios --------------------------------------------------------------

@dataclass
class Row:
    config: str
    queue: str
    judgement: Judgement | None
    error: str = ""
    after: dict[str, tuple[int, int]] | None = None  # host -> (requests, 429s) after a drop
    ramp: str = ""  # starts/s in the first seconds, ramp, gaps, tail (robots_delays scenarios)
    note: str = ""  # the bound of the requests the server saw, when they exceed the URLs


def run_scenario(scenario: Scenario, only: tuple[str, ...] | None = None) -> list[Row]:
    rows: list[Row] = []
    bound, _ = scenario.lower_bound()
    with Farm(scenario.spec) as farm:
        urls = [farm.url(h, p) for h, p in scenario.urls]
        configs = scenario.configs or (*CONFIGS, *scenario.also)
        for config in configs if only is None else [c for c in configs if c in only]:
            farm.reset()
            progress(f"{scenario.name}: {config} ({len(urls)} URLs, T* {bound:.2f} s)")
            stock = not config.startswith("plugin")
            run = run_crawl(urls, config_settings(config, scenario, farm),
                            static_hosts=scenario.host_ip() if stock else None,
                            timeout=max(180.0, 6 * bound + 60))
            queue = str(run.result.get("queue", "?")).rsplit(".", 1)[-1]
            if not run.ok:
                progress(f"  FAILED: {run.error[-300:]}")
                rows.append(Row(config, queue, None, run.error))
                continue
            arrivals = farm.arrivals()
            j = judge(scenario, arrivals)
            progress(f"  wall {j.wall:.2f} s (T* ratio {j.ratio:.2f}), host/IP/RA violations "
                     f"{j.host_viol}/{j.ip_viol}/{j.ra_viol}, 429s {j.n429}, "
                     f"URLs ok {j.urls_ok}/{j.urls}")
            after = {h: after_change(arrivals, h, k) for h, k in scenario.rate_change().items()}
            for host, (n, bad) in after.items():
                progress(f"  after the rate change of {host}: {bad} 429s in {n} requests")
            figures = ramp(scenario, arrivals) if scenario.robots_delays else None
            if figures is not None:
                progress(f"  {figures.line()}")
            note = ""
            freed = run.result["stats"].get("politeness/watchdog_released", 0)
            if config == "plugin+reissue-960" or freed:  # re-fetches: T* of the URLs is below
                served = served_bound(scenario, arrivals)
                note = (f"{j.requests} requests served: their T* {served:.2f} s, wall/that "
                        f"{j.wall / served if served else float('nan'):.2f}; "
                        f"watchdog frees {freed}")
                progress(f"  {note}")
            rows.append(Row(config, queue, j, after=after,
                            ramp="" if figures is None else figures.line(), note=note))
    return rows


def _gap(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def scenario_table(scenario: Scenario, rows: list[Row]) -> list[str]:
    bound, what = scenario.lower_bound()
    rate = "".join(f"; server rate 1 per {r:g} s, Retry-After {ra:g} s"
                   for r, ra in scenario.rate_limits().values())
    lines = [
        f"### {scenario.name}", "",
        f"{scenario.about}. Target interval **{scenario.interval:g} s**, IP floor "
        f"**{scenario.ip_floor:g} s** (IP rule "
        f"{'coupled: max(floor, interval)' if scenario.coupled else 'decoupled: the floor'} = "
        f"{scenario.ip_spacing:g} s){rate}; CONCURRENT_REQUESTS={scenario.concurrent_requests}. "
        f"T* = **{bound:.2f} s** (set by {what}).", "",
        "| config | queue | requests | URLs 200 | 429s | host viol. | IP viol. | RA viol. "
        "| min host gap s | min IP gap s | wall s | T* s | wall/T* |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for row in rows:
        j = row.judgement
        if j is None:
            lines.append(f"| {row.config} | {row.queue} | crawl failed: "
                         f"{row.error.strip().splitlines()[-1][:80] if row.error else '?'} "
                         "| | | | | | | | | | |")
            continue
        lines.append(
            f"| {row.config} | {row.queue} | {j.requests} | {j.urls_ok}/{j.urls} | {j.n429} "
            f"| {j.host_viol} | {j.ip_viol} | {j.ra_viol} | {_gap(j.min_host_gap)} "
            f"| {_gap(j.min_ip_gap)} | {j.wall:.2f} | {j.bound:.2f} | {j.ratio:.2f} |")
    drops = [f"- {row.config}: {host} answered {bad} 429s to {n} requests after its rate "
             f"changed ({100 * bad / n if n else 0:.1f}%)"
             for row in rows for host, (n, bad) in (row.after or {}).items()]
    if drops:
        lines += ["", *drops]
    ramps = [f"- {row.config}: {row.ramp}" for row in rows if row.ramp]
    ramps += [f"- {row.config}: {row.note}" for row in rows if row.note]
    if ramps:
        lines += ["", *ramps]
    return [*lines, ""]


# -- 2b. memory ----------------------------------------------------------------

def run_memory(quick: bool) -> list[str]:
    n_hosts, n_ips = (100_000, 10_000) if quick else (1_000_000, 100_000)
    progress(f"memory: {n_hosts:,} hosts over {n_ips:,} IPs (tracemalloc)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-X", "tracemalloc", "-m", "bench.memory", "--entries",
                           "--hosts", str(n_hosts), "--ips", str(n_ips)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        progress(f"  FAILED: {proc.stderr[-300:]}")
        return ["## Memory", "", f"failed: {proc.stderr[-500:]}", ""]
    m = json.loads(proc.stdout)
    progress(f"  {m['per_live_host_total']:.0f} B per live host, after eviction "
             f"{m['after_evict_vs_baseline']:.2f} x baseline")
    per_host = m["per_live_host_total"]
    after = m["after_evict_vs_baseline"]
    sites = ", ".join(f"`{site}` {size / 1e6:.1f} MB" for site, size in m["leftover_sites"])
    return [
        "## Memory per tracked entry", "",
        f"{m['hosts']:,} hosts over {m['ips']:,} IPs pushed through `HostTable` + `IPTable` on a "
        "simulated clock (per host: `start`, `spend` on its IP, one `feedback` with a 200); "
        "Python heap measured with `tracemalloc` (tracing from interpreter start, so the "
        f"baseline is the imported package with empty tables). Fill took "
        f"{m['fill_seconds']:.1f} s under tracing.", "",
        "| measure | value | target |",
        "| --- | ---: | --- |",
        f"| baseline (traced heap) | {m['baseline_bytes'] / 1e6:.1f} MB | |",
        f"| after filling | {m['filled_bytes'] / 1e6:.1f} MB | |",
        f"| host table, bytes per host entry | {m['per_host_entry']:.0f} | |",
        f"| IP table, bytes per IP entry | {m['per_ip_entry']:.0f} | |",
        f"| IP table share per host entry | {m['ip_share_per_host']:.0f} | |",
        f"| **total per live host entry** | **{per_host:.0f}** | <= {MEM_TARGET:.0f} "
        f"({'met' if per_host <= MEM_TARGET else 'MISSED'}) |",
        f"| after `evict()` ({m['evicted_hosts']:,} hosts, {m['evicted_ips']:,} IPs evicted, "
        f"{m['left_after_evict']} left) | {m['evicted_bytes'] / 1e6:.1f} MB | |",
        f"| **after eviction / baseline** | **{after:.2f}** | <= {EVICT_TARGET:.2f} "
        f"({'met' if after <= EVICT_TARGET else 'MISSED'}) |",
        "",
        f"Still allocated after eviction, by source line: {sites or 'nothing notable'}.", "",
    ]


# -- 3. redis ------------------------------------------------------------------

def run_redis(quick: bool) -> list[str]:
    script = ROOT / "bench" / "bench_redis.py"
    if not script.exists() or shutil.which("redis-server") is None:
        why = "bench/bench_redis.py missing" if not script.exists() else "no redis-server"
        progress(f"redis: skipped ({why})")
        return ["## Redis backend", "", f"Skipped: {why}.", ""]
    args = [sys.executable, str(script)]
    if quick and "--quick" in script.read_text(encoding="utf-8"):
        args.append("--quick")
    progress(f"redis: {' '.join(args[1:])}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    try:
        proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=900, check=False)
        body, code = proc.stdout + (proc.stderr[-3000:] if proc.returncode else ""), \
            proc.returncode
    except subprocess.TimeoutExpired:
        body, code = "timed out after 900 s", -1
    return ["## Redis backend (`bench/bench_redis.py`)", "", f"exit status {code}", "", "```",
            body.rstrip(), "```", ""]


# -- main ----------------------------------------------------------------------

def header(argv: list[str]) -> list[str]:
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        nproc = os.cpu_count() or 0
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    cmd = " ".join(["python -m bench", *argv])
    return [
        "# scrapy-politeness benchmark", "",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {platform.platform()}, {platform.machine()}, nproc {nproc}, "
        f"load average at start {load}",
        f"- Python {platform.python_version()}, Scrapy {scrapy.__version__}, "
        f"Twisted {twisted.__version__}",
        f"- command: `{cmd}`", "",
        "Violations are counted on the server side (the farm's first-byte times) with a 15 ms "
        "tolerance; see docs/benchmark.md for every column.", "",
    ]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (development)")
    parser.add_argument("--out", type=Path, help="also write the markdown report here")
    names = [*SCENARIOS, *EXTRA_SECTIONS]
    parser.add_argument("--only", action="append", metavar="NAME",
                        help="run only these (repeat or comma-separate): "
                             f"{', '.join([*GROUPS, *names])}")
    parser.add_argument("--configs", metavar="A,B",
                        help="configurations to compare (default: each scenario's own; "
                             f"any of {', '.join(ALL_CONFIGS)})")
    args = parser.parse_args(argv)
    if args.configs is not None:
        configs = tuple(c for c in args.configs.split(",") if c)
        if not configs or set(configs) - set(ALL_CONFIGS):
            parser.error(f"unknown --configs {args.configs!r}; choose from {ALL_CONFIGS}")
        args.configs = configs
    only = [n for item in args.only or [] for n in item.split(",") if n]
    only = [m for n in only for m in GROUPS.get(n, (n,))]
    unknown = sorted(set(only) - set(names))
    if unknown:
        parser.error(f"unknown --only {unknown}; choose from {[*GROUPS, *names]}")
    args.only = only or [n for n in names if n not in DEFAULT_SKIP]
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    out = header(argv)
    for name, make in SCENARIOS.items():
        if name in args.only:
            if not any(line.startswith("## Politeness") for line in out):
                out += ["## Politeness scenarios", ""]
            scenario = make(args.quick)
            out += scenario_table(scenario, run_scenario(scenario, args.configs))
    if "dns-faults" in args.only:
        from .dns_faults import run_dns_faults

        out += run_dns_faults(args.quick)
    if "dns-loss" in args.only:
        from .dns_faults import run_dns_loss

        out += run_dns_loss(args.quick)
    if "overhead" in args.only:
        from .overhead import run_overhead

        out += run_overhead(args.quick)
    if "memory" in args.only:
        out += run_memory(args.quick)
    if "redis" in args.only:
        out += run_redis(args.quick)
    out.append(f"Total benchmark time: {time.monotonic() - T0:.0f} s.")
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        progress(f"wrote {args.out}")
    progress(f"done in {time.monotonic() - T0:.0f} s")
    return 0
