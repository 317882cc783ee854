"""A broad crawl under JOBDIR at the usual open-file limit: one store, stop, resume.

Real crawls against the farm, in a subprocess whose open-file limit is 1,024
(``resource.setrlimit``), as most systems start one: 20,000 hosts x 3 pages,
stopped with one Ctrl-C, then resumed. Every page must be fetched exactly once
over both runs (the farm's log), with at most 50 files in the JOBDIR. About 10
minutes on a loaded 2-core machine (60,000 requests).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from crawling import SCRIPT, farm_settings, open_files_limited

pytestmark = pytest.mark.integration

HOSTS = 20_000
PAGES = 3
IPS = [f"127.0.0.{n}" for n in range(2, 10)]
OPEN_FILES = 1024


LIMITED = open_files_limited(OPEN_FILES)  # the crawl script, in a child at that limit


def _crawl(farm: Any, job: Path, tmp: Path, urls: list[str], hosts_file: Path,
           *, stop_after: int | None) -> tuple[int, str, float | None]:
    """Run the crawl; with ``stop_after``, one SIGINT once the farm saw that many
    requests. The exit code, the log, and seconds from the signal to the exit."""
    spec = {"urls": urls, "follow": False, "spider_args": {"dont_filter": False},
            "settings": farm_settings(
                farm, JOBDIR=str(job), CONCURRENT_REQUESTS=64, POLITENESS_DEFAULT=0.2,
                POLITENESS_FLOOR=0.2, POLITENESS_IP_FLOOR=0.0, LOG_LEVEL="INFO",
                POLITENESS_DNS_HOSTS_FILE=str(hosts_file),
                # Scrapy's connection pool keeps an idle connection per host for 240 s:
                # at 1,024 open files that, not the queue, ends a crawl of 1,000 hosts
                DEFAULT_REQUEST_HEADERS={"Connection": "close"}),
            "stats_out": str(tmp / "stats.json"), "items_out": str(tmp / "items.jsonl")}
    (tmp / "job.json").write_text(json.dumps(spec))
    with (tmp / "log.txt").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", LIMITED, str(SCRIPT), str(tmp / "job.json")],
            stdout=subprocess.DEVNULL, stderr=log)
        closed_in = None
        try:
            if stop_after is not None:
                deadline = time.monotonic() + 300
                while len(farm.arrivals()) < stop_after and time.monotonic() < deadline \
                        and proc.poll() is None:
                    time.sleep(0.5)
                signalled = time.monotonic()
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=120)
                closed_in = time.monotonic() - signalled
            else:
                proc.wait(timeout=1800)
        finally:
            if proc.poll() is None:
                proc.kill()
    return proc.returncode, (tmp / "log.txt").read_text(), closed_in


def test_a_broad_crawl_at_1024_open_files_stops_and_resumes_exactly(
        farm_factory: Any, tmp_path: Path) -> None:
    names = [f"w{i:05d}.farm.test" for i in range(HOSTS)]
    farm = farm_factory({"ips": IPS, "hosts": {
        name: {"ip": IPS[i % len(IPS)], "pages": PAGES} for i, name in enumerate(names)}})
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("".join(f"{IPS[i % len(IPS)]} {n}\n" for i, n in enumerate(names)))
    urls = [farm.url(name, f"/p/{p}") for p in range(PAGES) for name in names]
    job = tmp_path / "job"
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()

    code, log, closed_in = _crawl(farm, job, first_dir, urls, hosts_file,
                                  stop_after=min(3_000, HOSTS))
    assert code == 0, log[-3000:]
    assert "Too many open files" not in log
    assert "Closing spider (shutdown)" in log
    files = [p for p in job.rglob("*") if p.is_file()]
    print(f"\nstopped: {len(farm.arrivals())} pages fetched, closed {closed_in:.1f} s after "
          f"the signal, {len(files)} files in the JOBDIR")
    assert len(files) <= 50, [str(p) for p in files]
    first = Counter((a.host, a.path) for a in farm.arrivals())
    assert 0 < sum(first.values()) < len(urls)

    farm.reset()
    code, log, _ = _crawl(farm, job, second_dir, urls, hosts_file, stop_after=None)
    assert code == 0, log[-3000:]
    assert "Too many open files" not in log
    second = Counter((a.host, a.path) for a in farm.arrivals())
    both = first + second
    assert set(both) == {(n, f"/p/{p}") for n in names for p in range(PAGES)}
    assert max(both.values()) == 1, [k for k, v in both.items() if v > 1][:10]
