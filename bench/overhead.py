"""CPU per request, plugin vs stock Scrapy, side by side: ``python -m bench --only overhead``.

Three crawls, each run in rounds of stock then plugin (interleaved, so a
load change hits both alike), CPU time of the crawl process from ``os.wait4``:

- ``50-hosts``: 5,000 requests, 50 hosts on 2 IPs, every interval 0. Target:
  process CPU plugin / stock <= 1.10.
- ``many-hosts``: 1,500 hosts x 2 pages on 30 IPs, every interval 0,
  CONCURRENT_REQUESTS=64: the per-host cost (DNS, gate and queue state) the
  50-host crawl hides. Target: plugin requests/s >= 0.9 x stock.
- ``many-hosts-spaced``: the same crawl with 0.1 s spacing ON: the plugin at
  interval = IP floor = 0.1 s, stock Scrapy with ``DOWNLOAD_DELAY = 0.1``
  (no jitter), the delay a stock user would set for the same host spacing,
  and ``stock-per-ip``: the same delay on per-IP download slots
  (``CONCURRENT_REQUESTS_PER_IP = 1``), the pace the plugin keeps here. Per
  host, two pages a host space almost nothing, so that crawl runs unpaced;
  pacing alone changes Scrapy's own CPU per request (the garbage collector,
  docs/benchmark.md), so the target (<= 1.15) is judged against the same pace.
- ``shared-hosting``: 600 hosts x 2 pages on 2 IPs at 0.02 s spacing, judged as
  ``many-hosts-spaced``: hundreds of vhosts behind one IP, where the IP, not
  the host, sets every host's next start (the scheduler queue's IP groups,
  ``scrapy_politeness/scheduler/host_heap.py``).

Every ratio compares like with like: the plugin and stock both with the garbage
collector as Python leaves it (``POLITENESS_GC_FREEZE`` is off by default). The two
many-hosts cases also run ``plugin-hosts-file`` (every farm name in
``POLITENESS_DNS_HOSTS_FILE``: no DNS query) after the plugin in each round, to split
its cost into its DNS queries and the rest; and every case runs a frozen pair,
``stock-frozen`` (stock with ``bench.freeze``) and ``plugin-frozen``
(``POLITENESS_GC_FREEZE = True``), both with the start-up heap frozen at spider open,
to show what the freeze does for each; not judged.

``python -m bench.overhead --profile CASE`` runs each configuration once
under cProfile instead and prints the top functions (by own time and by
cumulative time), the "where the time goes" of docs/benchmark.md.
"""

from __future__ import annotations

import argparse
import os
import pstats
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy_politeness._sitefarm import Farm

from .freeze import EXTENSION as FREEZE_EXTENSION
from .runner import ADDON, STATIC_RESOLVER, STOCK_PER_IP, CrawlRun, progress, run_crawl

__all__ = ["CASES", "Case", "run_overhead"]

PROFILE_ENV = "BENCH_PROFILE"  # bench.crawl writes a cProfile of the crawl there
HOSTS_FILE = "plugin-hosts-file"
"""The plugin with every farm name in ``POLITENESS_DNS_HOSTS_FILE``: no DNS query, as
stock's static resolver. Beside the plugin it splits the plugin's cost into its DNS
queries and the rest (queue, gate, send slip, feedback), which no profile does
reliably: cProfile's own times are smeared by the garbage collector."""
FROZEN = "frozen"
"""A pair run after the plugin: ``stock-frozen`` and ``plugin-frozen``, both with the
start-up heap frozen when the spider opens (``bench.freeze``; ``POLITENESS_GC_FREEZE``),
so the freeze's effect shows on both sides alike."""
DIAGNOSES = {HOSTS_FILE: "the DNS queries"}
"""What the plugin minus each diagnostic configuration measures."""


@dataclass(frozen=True)
class Case:
    name: str
    about: str
    n_hosts: int
    n_ips: int
    per_host: int
    concurrent: int
    interval: float  # the spacing asked of both (0: every interval off)
    measure: str  # "cpu" (plugin/stock CPU per request <= target) or "rate" (>= target)
    target: float
    # Stock configurations run beside the plugin; the target is judged against the last.
    baselines: tuple[str, ...] = ("stock",)
    # Plugin configurations run after it in each round, to split its cost (not judged).
    diagnostics: tuple[str, ...] = ()

    def spec(self) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        ips = [f"127.0.0.{2 + i}" for i in range(self.n_ips)]
        width = 4 if self.n_hosts > 100 else 2
        hosts = {f"o{i:0{width}d}.farm.test": {"ip": ips[i % self.n_ips], "kind": "normal",
                                                "pages": self.per_host}
                 for i in range(self.n_hosts)}
        urls = [(h, f"/p/{p}") for p in range(self.per_host) for h in hosts]
        return {"ips": ips, "hosts": hosts}, urls

    def settings(self, config: str, farm: Farm, hosts_file: str | None = None
                 ) -> dict[str, Any]:
        """``hosts_file``: the farm's names as an /etc/hosts file, for ``HOSTS_FILE``."""
        base: dict[str, Any] = {"CONCURRENT_REQUESTS": self.concurrent}
        if config == "stock-frozen":  # the judged baseline, frozen
            return {**self.settings(self.baselines[-1], farm),
                    "EXTENSIONS": {FREEZE_EXTENSION: 0}}
        if config.startswith("stock"):
            stock = {**base, "TWISTED_DNS_RESOLVER": STATIC_RESOLVER,
                     "DOWNLOAD_DELAY": self.interval, "RANDOMIZE_DOWNLOAD_DELAY": False}
            return {**stock, **STOCK_PER_IP} if config == "stock-per-ip" else stock
        spacing = self.interval
        plugin = {**base, "ADDONS": ADDON, "POLITENESS_DEFAULT": spacing,
                  "POLITENESS_FLOOR": spacing, "POLITENESS_IP_FLOOR": spacing,
                  **({} if spacing else {"POLITENESS_SEND_MARGIN": 0}),
                  "POLITENESS_DNS_NAMESERVERS": [farm.dns]}
        if config == HOSTS_FILE:
            assert hosts_file is not None, "HOSTS_FILE needs the farm's hosts file"
            plugin["POLITENESS_DNS_HOSTS_FILE"] = hosts_file
        elif config == "plugin-frozen":
            plugin["POLITENESS_GC_FREEZE"] = True
        return plugin


def _cases(quick: bool) -> dict[str, Case]:
    def scale(full: int, small: int) -> int:
        return small if quick else full

    return {c.name: c for c in (
        Case("50-hosts", "50 hosts x 100 URLs on 2 IPs, every interval 0",
             scale(50, 10), 2, scale(100, 50), 16, 0.0, "cpu", 1.10,
             diagnostics=(FROZEN,)),
        Case("many-hosts", "1,500 hosts x 2 URLs on 30 IPs, every interval 0",
             scale(1500, 300), scale(30, 10), 2, 64, 0.0, "rate", 0.9,
             diagnostics=(HOSTS_FILE, FROZEN)),
        Case("many-hosts-spaced", "1,500 hosts x 2 URLs on 30 IPs, 0.1 s spacing ON "
             "(stock: DOWNLOAD_DELAY 0.1, no jitter; per host, and per IP)",
             scale(1500, 300), scale(30, 10), 2, 64, 0.1, "cpu", 1.15,
             ("stock", "stock-per-ip"), (HOSTS_FILE, FROZEN)),
        Case("shared-hosting", "600 hosts x 2 URLs on 2 IPs (300 vhosts an IP), 0.02 s "
             "spacing ON (stock: DOWNLOAD_DELAY 0.02, no jitter; per host, and per IP)",
             scale(600, 120), 2, 2, 64, 0.02, "cpu", 1.15, ("stock", "stock-per-ip"),
             (FROZEN,)),
    )}


CASES = tuple(_cases(False))


ROUNDS = 3
"""Rounds of (each baseline, plugin) per case. A crawl settles in one of two garbage
collector modes (docs/benchmark.md), stock too, about 1.5 s of CPU apart: with two
rounds the ratio of the medians was mostly which mode each configuration drew."""


def _run_case(case: Case, rounds: int = ROUNDS
              ) -> tuple[list[tuple[str, CrawlRun, int]], int] | str:
    spec, pairs = case.spec()
    host_ip = {h: raw["ip"] for h, raw in spec["hosts"].items()}
    runs: list[tuple[str, CrawlRun, int]] = []
    extra = [c for d in case.diagnostics
             for c in (("stock-frozen", "plugin-frozen") if d == FROZEN else (d,))]
    order = [*case.baselines, "plugin", *extra] * rounds
    with Farm(spec) as farm, tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
        urls = [farm.url(h, p) for h, p in pairs]
        hosts_file = Path(tmp, "hosts")
        if HOSTS_FILE in case.diagnostics:
            hosts_file.write_text("".join(f"{ip} {h}\n" for h, ip in host_ip.items()),
                                  encoding="utf-8")
        for i, config in enumerate(order):
            farm.reset()
            load = os.getloadavg()[0]
            progress(f"overhead {case.name}: run {i + 1}/{len(order)} {config} "
                     f"({len(urls)} requests, load {load:.2f})")
            stock = config.startswith("stock")
            run = run_crawl(urls, case.settings(config, farm, str(hosts_file)),
                            static_hosts=host_ip if stock else None, timeout=600)
            if not run.ok:
                progress(f"  FAILED: {run.error[-300:]}")
                return run.error
            got = sum(a.status == 200 for a in farm.arrivals())
            progress(f"  CPU {run.cpu:.2f} s, {got}/{len(urls)} 200s, crawl wall "
                     f"{run.result['crawl_wall']:.2f} s")
            runs.append((config, run, got))
    return runs, len(pairs)


def _case_lines(case: Case, runs: list[tuple[str, CrawlRun, int]], n: int) -> list[str]:
    lines = [
        f"### {case.name}", "",
        f"{n:,} requests ({case.about}), CONCURRENT_REQUESTS={case.concurrent}. "
        f"Load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}.", "",
        "| run | config | 200s | process CPU s | crawl-phase CPU s | crawl wall s "
        "| requests/s | process CPU µs/request | GC runs gen 0 / 2 |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, (config, run, got) in enumerate(runs, 1):
        wall = float(run.result["crawl_wall"])
        gcs = [g.get("collections", 0) for g in run.result.get("gc_collections", [{}] * 3)]
        full = run.result.get("gc_full_wall", 0.0)  # with BENCH_GC=1 only
        stalls = f" ({full:.2f} s)" if full else ""
        lines.append(f"| {i} | {config} | {got} | {run.cpu:.2f} | "
                     f"{run.result['crawl_cpu']:.2f} | {wall:.2f} | {n / wall:.0f} "
                     f"| {run.cpu / n * 1e6:.0f} | {gcs[0]} / {gcs[-1]}{stalls} |")

    def med(config: str, field: str) -> float:
        return statistics.median(r.cpu if field == "cpu" else float(r.result[field])
                                 for c, r, _ in runs if c == config)

    base = case.baselines[-1]
    cpu = med("plugin", "cpu") / med(base, "cpu")
    phase = med("plugin", "crawl_cpu") / med(base, "crawl_cpu")
    rate = med(base, "crawl_wall") / med("plugin", "crawl_wall")
    diff = (med("plugin", "cpu") - med(base, "cpu")) / n * 1e6
    if case.measure == "cpu":
        verdict = f"(target <= {case.target:.2f}: {'met' if cpu <= case.target else 'MISSED'})"
        lines += [""]
        for other in case.baselines[:-1]:
            lines.append(f"- process CPU, plugin / {other}: "
                         f"{med('plugin', 'cpu') / med(other, 'cpu'):.3f}")
        lines += [f"- process CPU, plugin / {base} (ratio of the medians): **{cpu:.3f}** "
                  f"{verdict}; difference **{diff:+.0f} µs CPU per request**",
                  f"- crawl-phase CPU, plugin / {base}: {phase:.3f}",
                  f"- requests/s, plugin / {base}: {rate:.3f}", ""]
    else:
        verdict = f"(target >= {case.target:.2f}: {'met' if rate >= case.target else 'MISSED'})"
        lines += ["", f"- requests/s, plugin / stock (ratio of the medians): **{rate:.3f}** "
                  f"{verdict}",
                  f"- process CPU, plugin / stock: {cpu:.3f}; difference {diff:+.0f} µs CPU "
                  "per request", f"- crawl-phase CPU, plugin / stock: {phase:.3f}", ""]
    for other in case.diagnostics:  # before the closing blank line
        if other == FROZEN:
            cpu_f = med("plugin-frozen", "cpu") / med("stock-frozen", "cpu")
            rate_f = med("stock-frozen", "crawl_wall") / med("plugin-frozen", "crawl_wall")
            lines[-1:] = [f"- both frozen: process CPU, plugin-frozen / stock-frozen: "
                          f"{cpu_f:.3f}; requests/s: {rate_f:.3f}", ""]
            continue
        part = (med("plugin", "cpu") - med(other, "cpu")) / n * 1e6
        alone = med(other, "cpu") / med(base, "cpu")
        split = med("plugin", "cpu") / med(other, "cpu")
        walls = med("plugin", "crawl_wall") / med(other, "crawl_wall")
        lines[-1:] = [f"- process CPU, {other} / {base}: {alone:.3f}; plugin / {other}: "
                      f"{split:.3f} ({DIAGNOSES[other]}: {part:+.0f} µs CPU per request); "
                      f"crawl wall, plugin / {other}: {walls:.3f}", ""]
    return lines


def run_overhead(quick: bool, only: tuple[str, ...] = CASES, rounds: int = ROUNDS) -> list[str]:
    lines = [
        "## CPU overhead per request", "",
        f"Each crawl runs {rounds} rounds of stock (and stock-per-ip where listed) then plugin "
        f"(then {HOSTS_FILE} where listed: every name in a hosts file, no DNS query; "
        "then stock-frozen and plugin-frozen: both with the start-up heap frozen), "
        "interleaved. Plugin: the add-on (its queue); "
        "stock: no add-on, a static resolver. Process CPU = user+sys of the crawl process "
        "(`os.wait4`), start-up included; crawl-phase CPU = `time.process_time()` from "
        "`engine_started` to `spider_closed`; requests/s over the crawl phase. See "
        "bench/overhead.py for why each comparison is made as it is.", "",
    ]
    for name, case in _cases(quick).items():
        if name not in only:
            continue
        result = _run_case(case, rounds)
        if isinstance(result, str):
            lines += [f"### {name}", "", f"crawl failed: {result[-500:]}", ""]
            continue
        lines += _case_lines(case, *result)
    return lines


# -- profiles ------------------------------------------------------------------

def profile(case: Case, top: int) -> None:
    """One crawl per configuration under cProfile; print the top entries."""
    spec, pairs = case.spec()
    host_ip = {h: raw["ip"] for h, raw in spec["hosts"].items()}
    with Farm(spec) as farm, tempfile.TemporaryDirectory(prefix="bench-prof-") as tmp:
        urls = [farm.url(h, p) for h, p in pairs]
        for config in (*case.baselines, "plugin"):
            farm.reset()
            path = Path(tmp, f"{config}.prof")
            os.environ[PROFILE_ENV] = str(path)
            try:
                run = run_crawl(urls, case.settings(config, farm),
                                static_hosts=None if config == "plugin" else host_ip,
                                timeout=600)
            finally:
                del os.environ[PROFILE_ENV]
            if not run.ok:
                print(f"{config}: crawl failed: {run.error[-500:]}")
                continue
            print(f"\n==== {case.name} {config}: process CPU {run.cpu:.2f} s (under cProfile), "
                  f"crawl wall {run.result['crawl_wall']:.2f} s, load "
                  f"{os.getloadavg()[0]:.2f}")
            stats = pstats.Stats(str(path), stream=sys.stdout)
            stats.strip_dirs().sort_stats("tottime").print_stats(top)
            stats.sort_stats("cumulative").print_stats(top)
            if os.environ.get("BENCH_PROFILE_KEEP"):
                keep = Path(os.environ["BENCH_PROFILE_KEEP"], f"{case.name}-{config}.prof")
                keep.write_bytes(path.read_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.overhead")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", metavar="CASE", choices=CASES)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--only", action="append", choices=CASES)
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help=f"rounds of (stock..., plugin) per case (default {ROUNDS})")
    args = parser.parse_args(argv)
    if args.profile:
        profile(_cases(args.quick)[args.profile], args.top)
        return 0
    print("\n".join(run_overhead(args.quick, tuple(args.only or CASES), args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
