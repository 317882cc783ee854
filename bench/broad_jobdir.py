"""The broad bench's JOBDIR variant: a crawl that lasts days, at the usual open-file limit.

Each configuration crawls robots.txt + 2 pages per host (page-major) with
``JOBDIR`` and ``RLIMIT_NOFILE`` 1,024 (``ulimit -n 1024``, set in the crawl
process), is stopped with SIGINT ``stop_after`` seconds after nginx saw its
first request, as a user stops it, then resumed from the same JOBDIR until it
finishes. Reported: "Too many open files" in either run, how the first run
ended, its peak RSS, the files and directories in the JOBDIR after the stop,
the seconds from the signal to the exit, and from nginx's log of both runs:
pages never fetched and pages fetched more than once.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .broad_configs import MIB, settings_for
from .broad_judge import traffic
from .broad_run import ChildRun, run_child
from .broad_servers import BroadSpec, Dnsmasq, NginxCatchAll
from .runner import progress

__all__ = ["NOFILE", "PAGES", "JobdirRow", "close_steps", "jobdir_table", "run_jobdir"]

NOFILE = 1024
PAGES = 2


@dataclass(frozen=True)
class JobdirRow:
    config: str
    first: ChildRun
    resumed: ChildRun
    pages_first: int  # pages fetched by the stopped run
    files: int  # in the JOBDIR after the stop
    dirs: int
    missing: int  # pages never fetched after the resume
    repeated: int  # page fetches beyond the first of their URL
    expected: int
    violations: tuple[int, int]  # host / IP, over both runs
    nofile: int = NOFILE  # the crawl's open-file limit
    was_resumed: bool = True  # whether ``resumed`` ran


def _count(root: Path) -> tuple[int, int]:
    files = dirs = 0
    for _, dirnames, filenames in os.walk(root):
        files += len(filenames)
        dirs += len(dirnames)
    return files, dirs


def run_jobdir(spec: BroadSpec, *, nginx: NginxCatchAll, dns: Dnsmasq, configs: tuple[str, ...],
               workdir: Path, stop_after: float, stock_delay: float,
               stock_nofile: int | None = None, resume: bool = True) -> list[JobdirRow]:
    """``stock_nofile``: stock's open-file limit instead of 1,024 (so that it crawls until
    stopped, like the plugin: a like-for-like peak RSS); stock is then not resumed.
    ``resume`` False: no crawl is resumed (the first runs only)."""
    rows = []
    for config in configs:
        nginx.reset_log()
        jobdir = workdir / f"jobdir-{config}" / "state"
        nofile = stock_nofile if config == "stock" and stock_nofile else NOFILE
        job = {"hosts": spec.hosts, "ips": spec.ips, "port": nginx.port, "order": "page-major",
               "pages": PAGES, "idle": 0.0, "nofile": nofile,
               "settings": {**settings_for(config, dns, stock_delay), "JOBDIR": str(jobdir)}}
        progress(f"broad jobdir: {config}, {spec.hosts} hosts x (robots.txt + {PAGES} pages), "
                 f"ulimit -n {nofile}, SIGINT after {stop_after:.0f} s")
        first = run_child(job, workdir / f"jobdir-{config}" / "first", dns=dns.address,
                          stop_after=stop_after, crawling=nginx.crawled)
        pages_first = traffic(nginx.log()).pages
        files, dirs = _count(jobdir)
        progress(f"  stopped: {pages_first} pages, {files} files in {dirs} directories, "
                 f"closed {first.close_seconds or 0:.1f} s after the signal "
                 f"({close_steps(first)}); resuming")
        if nofile != NOFILE or not resume:  # the first run is what is compared
            rows.append(JobdirRow(config, first, ChildRun(False, {}, 0.0, 0), pages_first,
                                  files, dirs, -1, -1, spec.hosts * PAGES,
                                  _violations(nginx), nofile, was_resumed=False))
            continue
        resumed = run_child(job, workdir / f"jobdir-{config}" / "resumed", dns=dns.address)
        shutil.copyfile(nginx.access_log, workdir / f"jobdir-{config}" / "access.log")
        log = nginx.log()
        fetched = {(line.host, line.uri) for line in log
                   if line.uri != "/robots.txt" and line.status == 200}
        both = traffic(log)
        rows.append(JobdirRow(config, first, resumed, pages_first, files, dirs,
                              spec.hosts * PAGES - len(fetched), both.repeated,
                              spec.hosts * PAGES, (both.host_viol, both.ip_viol)))
    return rows


def _violations(nginx: NginxCatchAll) -> tuple[int, int]:
    seen = traffic(nginx.log())
    return seen.host_viol, seen.ip_viol


def close_steps(run: ChildRun) -> str:
    """``signal 0.12 + spider 0.40 + ...``: the close's steps (:meth:`ChildRun.close_steps`)."""
    return " + ".join(f"{name} {sec:.2f}" for name, sec in run.close_steps().items())


def _end(run: ChildRun) -> str:
    reason = run.result.get("stats", {}).get("finish_reason")
    return str(reason) if reason else f"exit {run.exit_code}"


def jobdir_table(rows: list[JobdirRow]) -> list[str]:
    lines = ["| crawler | hosts x pages | first run: end | pages fetched | peak RSS MiB | "
             "files / dirs in JOBDIR | close after SIGINT (s) | \"Too many open files\" | "
             "resumed: end | pages missing | pages fetched twice | host / IP viol. |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        close = r.first.close_seconds
        errors = r.first.log.count("Too many open files") + r.resumed.log.count(
            "Too many open files")
        resumed = r.was_resumed
        lines.append(
            f"| {r.config}{'' if r.nofile == NOFILE else f' (ulimit -n {r.nofile})'} | "
            f"{r.expected // PAGES} x {PAGES} | {_end(r.first)} | "
            f"{r.pages_first} | {r.first.peak_rss_kb / MIB:.0f} | {r.files} / {r.dirs} | "
            f"{'-' if close is None else format(close, '.1f')} | {errors} | "
            f"{_end(r.resumed) if resumed else '-'} | {r.missing if resumed else '-'} | "
            f"{r.repeated if resumed else '-'} | {r.violations[0]} / {r.violations[1]} |")
    return lines
