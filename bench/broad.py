"""The broad-crawl bench: many hosts on many IPs, real servers, plugin and stock side by side.

``python -m bench.broad [--hosts N] [--ips M] [--only once,together,twice,jobdir] [--out FILE]``

Debian's nginx serves every host (one catch-all server on M loopback
addresses, robots.txt allowing all) and Debian's dnsmasq answers the names
(:mod:`bench.broad_servers`); robots.txt is obeyed, ``CONCURRENT_REQUESTS``
64, the start list yielded lazily. Scenarios:

- ``once``: N hosts visited once each (robots.txt + one page);
- ``together``: each host's pages together (robots.txt + ``--pages``), then never again;
- ``twice``: a pass over the hosts, then a second one (robots.txt + 2 pages, page-major);
- ``jobdir``: with ``JOBDIR`` and an open-file limit of 1,024, robots.txt + 2 pages per
  host, stopped with SIGINT ``--stop-after`` s into the crawl, then resumed to the end
  (:mod:`bench.broad_jobdir`).

``--stock-stop-after S`` stops stock's crawls with SIGINT ``S`` seconds after their
start list is in (stock's RSS is flat from there; at 40,000 hosts its whole crawl
takes ~30 min). ``--configs plugin`` runs the plugin alone.

Configurations: ``plugin`` (the add-on, its defaults, the plugin's DNS pointed at
dnsmasq) and ``stock`` (Scrapy's defaults with ``DOWNLOAD_DELAY = --stock-delay``,
Twisted's DNS client to the same dnsmasq: :mod:`bench.broad_dns`). Each crawl is a
process of its own (:mod:`bench.broad_crawl`); the servers run once for all.
The issue's sizes: ``--hosts-once 40000 --hosts-together 100000 --hosts-twice 20000
--hosts-jobdir 20000``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .broad_configs import CONFIGS, MIB, settings_for
from .broad_jobdir import jobdir_table, run_jobdir
from .broad_judge import HOSTS_MARK, Traffic, rss_at, traffic
from .broad_run import ChildRun, run_child
from .broad_servers import BroadSpec, Dnsmasq, NginxCatchAll, binaries_missing
from .runner import progress

__all__ = ["SCENARIOS", "Row", "main", "run_scenario"]

# name -> (start list order, pages per host)
SCENARIOS: dict[str, tuple[str, int | None]] = {
    "once": ("host-major", 1), "together": ("host-major", None), "twice": ("page-major", 2)}


@dataclass(frozen=True)
class Row:
    scenario: str
    config: str
    run: ChildRun
    traffic: Traffic
    expected_pages: int

    def stat(self, name: str) -> Any:
        return self.run.result.get("stats", {}).get(name)

    def mark(self, name: str) -> float | None:
        value = self.run.result.get("marks", {}).get(name)
        return float(value) if value is not None else None

    def rss_mib(self, at: float | None) -> float | None:
        kb = rss_at(self.run.samples, at)
        return kb / MIB if kb is not None else None

    @property
    def first_delay(self) -> float | None:
        started = self.mark("engine_started")
        return self.traffic.first - started if started and self.traffic.requests else None

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.run.cpu / self.traffic.requests if self.traffic.requests else 0.0

    @property
    def open_files_errors(self) -> int:
        return self.run.log.count("Too many open files")

    @property
    def tracebacks(self) -> int:
        return self.run.log.count("Traceback")


def run_scenario(name: str, spec: BroadSpec, pages: int, *, nginx: NginxCatchAll,
                 dns: Dnsmasq, configs: tuple[str, ...], workdir: Path, idle: float,
                 stock_delay: float, timeline: bool = False,
                 stock_stop_after: float | None = None) -> list[Row]:
    order = SCENARIOS[name][0]
    rows = []
    for config in configs:
        nginx.reset_log()
        progress(f"broad {name}: {config}, {spec.hosts} hosts on {spec.ips} IPs, "
                 f"{pages} page(s) each, {order}")
        job = {"hosts": spec.hosts, "ips": spec.ips, "port": nginx.port, "order": order,
               "pages": pages, "idle": idle, "timeline": timeline,
               "settings": settings_for(config, dns, stock_delay)}
        where = workdir / f"{name}-{config}"
        stop_after = stock_stop_after if config == "stock" else None
        if stop_after is not None:
            # stop after the start list is in: the child creates this file then
            marker = where / "start_done"
            marker.unlink(missing_ok=True)
            job["start_done_file"] = str(marker)
            child = run_child(job, where, dns=dns.address, stop_after=stop_after,
                              crawling=marker.exists)
        else:
            child = run_child(job, where, dns=dns.address)
        shutil.copyfile(nginx.access_log, workdir / f"{name}-{config}" / "access.log")
        row = Row(name, config, child, traffic(nginx.log()), spec.hosts * pages)
        progress(f"  {_summary(row)}")
        rows.append(row)
    return rows


def _f(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def _summary(row: Row) -> str:
    t = row.traffic
    state = "ok" if row.run.ok else f"exit {row.run.exit_code}: {row.run.log[-300:]}"
    return (f"{state}; {t.requests} requests, {t.rate:.1f}/s, fifths {t.rate_first_fifth:.1f} -> "
            f"{t.rate_last_fifth:.1f}, CPU {row.run.cpu:.1f} s, peak RSS "
            f"{row.run.peak_rss_kb / MIB:.0f} MiB, violations {t.host_viol}/{t.ip_viol}")


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| scenario | crawler | requests | pages 200 | req/s | first -> last fifth (ratio) | "
        f"CPU s (ms/req) | peak RSS | RSS start list in | RSS {HOSTS_MARK:,} hosts in | "
        "RSS last request | RSS idle (after s) | "
        "first request (s) | host / IP viol. | latency back-offs | finish |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r.traffic
        closed = r.mark("closed")
        idle_after = closed - t.last if closed and t.requests else None
        lines.append(
            f"| {r.scenario} | {r.config} | {t.requests} | {t.pages}/{r.expected_pages} | "
            f"{t.rate:.1f} | {t.rate_first_fifth:.1f} -> {t.rate_last_fifth:.1f} "
            f"({t.fifth_ratio:.2f}) | {r.run.cpu:.1f} ({r.cpu_ms_per_request:.2f}) | "
            f"{r.run.peak_rss_kb / MIB:.0f} | {_f(r.rss_mib(r.mark('start_done')), '.0f')} | "
            f"{_f(r.rss_mib(t.hosts_mark_at), '.0f')} | {_f(r.rss_mib(t.last), '.0f')} | "
            f"{_f(r.rss_mib(closed), '.0f')} "
            f"({_f(idle_after, '.0f')}) | {_f(r.first_delay, '.2f')} | "
            f"{t.host_viol} / {t.ip_viol} | {r.stat('politeness/backoff/latency') or 0} | "
            f"{r.stat('finish_reason') or 'exit ' + str(r.run.exit_code)} |")
    return lines


def _growth(p: Row) -> str:
    """The plugin's RSS growth while the hosts are visited, the issue's judged figures."""
    start, mark, last = (p.rss_mib(p.mark("start_done")), p.rss_mib(p.traffic.hosts_mark_at),
                         p.rss_mib(p.traffic.last))
    parts = []
    if start is not None and last is not None:
        parts.append(f"RSS start list in -> last request {last - start:+.0f} MiB")
    if mark is not None and last is not None:
        parts.append(f"{HOSTS_MARK:,} hosts in -> last request {last - mark:+.0f} MiB")
    return f"- {p.scenario}: plugin {', '.join(parts)}" if parts else ""


def ratios(rows: list[Row]) -> list[str]:
    """plugin / stock in one run: what counts on a loaded machine."""
    by = {(r.scenario, r.config): r for r in rows}
    out = [line for r in rows if r.config == "plugin" and (line := _growth(r))]
    for (scenario, config), p in by.items():
        s = by.get((scenario, "stock"))
        if config != "plugin" or s is None:
            continue
        p_start, s_start = p.rss_mib(p.mark("start_done")), s.rss_mib(s.mark("start_done"))
        if p_start is not None and s_start is not None:
            out.append(f"- {scenario}: RSS start list in, plugin - stock "
                       f"{p_start - s_start:+.0f} MiB")
        if not s.traffic.rate:
            continue
    for (scenario, config), p in by.items():
        s = by.get((scenario, "stock"))
        if config != "plugin" or s is None or not s.traffic.rate:
            continue
        out.append(
            f"- {scenario}: plugin/stock requests/s {p.traffic.rate / s.traffic.rate:.2f}, "
            f"CPU per request {p.cpu_ms_per_request / (s.cpu_ms_per_request or 1):.2f}, "
            f"peak RSS {(p.run.peak_rss_kb - s.run.peak_rss_kb) / MIB:+.0f} MiB")
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.broad", description=__doc__.split(
        "\n")[0])
    parser.add_argument("--hosts", type=int, default=5000, help="hosts of every scenario")
    parser.add_argument("--hosts-once", type=int)
    parser.add_argument("--hosts-together", type=int)
    parser.add_argument("--hosts-twice", type=int)
    parser.add_argument("--hosts-jobdir", type=int)
    parser.add_argument("--ips", type=int, default=1000, help="loopback addresses (<= 64,000)")
    parser.add_argument("--pages", type=int, default=2, help="pages per host in 'together'")
    parser.add_argument("--only", default="once,together,twice,jobdir")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--idle", type=float, default=20.0,
                        help="seconds a crawl stays open after its last response")
    parser.add_argument("--stock-delay", type=float, default=1.0,
                        help="stock Scrapy's DOWNLOAD_DELAY (the plugin's start interval)")
    parser.add_argument("--timeline", action="store_true",
                        help="sample CPU, responses and garbage-collection time every second "
                             "in the crawl (result.json's 'timeline'; costs a little)")
    parser.add_argument("--stop-after", type=float, default=60.0,
                        help="jobdir: SIGINT this many seconds after the first request")
    parser.add_argument("--jobdir-stock-nofile", type=int,
                        help="jobdir: stock's open-file limit instead of 1,024, not resumed "
                             "(a like-for-like peak RSS: stock crawls until stopped too)")
    parser.add_argument("--jobdir-first-only", action="store_true",
                        help="jobdir: stop and count, resume nothing")
    parser.add_argument("--stock-stop-after", type=float,
                        help="once/together/twice: SIGINT stock's crawl this many seconds after "
                             "its start list is in (default: crawl to the end)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", type=Path,
                        help="keep every crawl's job, log and JOBDIR in this directory")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    missing = binaries_missing()
    if missing:
        print(f"not installed: {', '.join(missing)}", file=sys.stderr)
        return 2
    only = [s for s in args.only.split(",") if s]
    configs = tuple(c for c in args.configs.split(",") if c)
    sizes = {"once": args.hosts_once, "together": args.hosts_together,
             "twice": args.hosts_twice, "jobdir": args.hosts_jobdir}
    biggest = max(sizes[s] or args.hosts for s in only)
    servers = BroadSpec(biggest, args.ips)
    rows: list[Row] = []
    jobdir_lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-broad-") as tmp_dir, \
            NginxCatchAll(servers, Path(tmp_dir, "nginx")) as nginx, \
            Dnsmasq(servers, Path(tmp_dir, "dns")) as dns:
        tmp = str(args.keep or tmp_dir)
        for name in only:
            spec = BroadSpec(sizes[name] or args.hosts, args.ips)
            if name == "jobdir":
                jobdir_lines = jobdir_table(run_jobdir(
                    spec, nginx=nginx, dns=dns, configs=configs, workdir=Path(tmp),
                    stop_after=args.stop_after, stock_delay=args.stock_delay,
                    stock_nofile=args.jobdir_stock_nofile, resume=not args.jobdir_first_only))
                continue
            pages = SCENARIOS[name][1] or args.pages
            rows += run_scenario(name, spec, pages, nginx=nginx, dns=dns, configs=configs,
                                 workdir=Path(tmp), idle=args.idle,
                                 stock_delay=args.stock_delay, timeline=args.timeline,
                                 stock_stop_after=args.stock_stop_after)
    lines = [f"Command: `python -m bench.broad {' '.join(argv or sys.argv[1:])}`", ""]
    if rows:
        lines += [*table(rows), "", *ratios(rows), ""]
    lines += jobdir_lines
    print("\n".join(lines))
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
