"""Test helpers: run a crawl against a farm in a subprocess, read what it did."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("crawl_script.py")
ADDON = {"scrapy_politeness.Addon": 300}


@dataclass
class CrawlResult:
    stats: dict[str, Any]
    items: list[dict[str, Any]]
    log: str

    def stat(self, name: str, default: Any = 0) -> Any:
        return self.stats.get(name, default)


def run_crawl(urls: list[str], settings: dict[str, Any], *, follow: bool = True,
              timeout: float = 180.0, check: bool = True, errback: bool = False,
              meta: dict[str, Any] | None = None,
              spider_args: dict[str, Any] | None = None,
              env: dict[str, str] | None = None,
              spider_attrs: dict[str, Any] | None = None) -> CrawlResult:
    with tempfile.TemporaryDirectory(prefix="crawl-") as tmp:
        job = {
            "urls": urls,
            "settings": settings,
            "follow": follow,
            "errback": errback,
            "meta": meta,
            "spider_args": spider_args or {},  # e.g. allowed_domains, dont_filter
            "spider_attrs": spider_attrs or {},  # class attributes: custom_settings...
            "stats_out": str(Path(tmp, "stats.json")),
            "items_out": str(Path(tmp, "items.jsonl")),
        }
        job_path = Path(tmp, "job.json")
        job_path.write_text(json.dumps(job), encoding="utf-8")
        proc = _run_or_dump([sys.executable, str(SCRIPT), str(job_path)], timeout,
                            None if env is None else {**os.environ, **env})
        stats_path = Path(job["stats_out"])
        if check and (proc.returncode != 0 or not stats_path.exists()):
            raise AssertionError(f"crawl failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
        stats = json.loads(stats_path.read_text(encoding="utf-8")) if stats_path.exists() else {}
        items_path = Path(job["items_out"])
        items = [json.loads(line) for line in items_path.read_text().splitlines()
                 ] if items_path.exists() else []
        return CrawlResult(stats, items, proc.stderr)


def _run_or_dump(cmd: list[str], timeout: float,
                 env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    """Run the crawl; past ``timeout``, ask it where it waits (SIGUSR1:
    crawl_script.dump_waits), then kill it and fail with the end of its log."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            try:
                out, err = proc.communicate(timeout=5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            proc.kill()
            raise AssertionError(f"crawl still running after {timeout:g}s (killed); the end "
                                 f"of its log:\n{err[-8000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def farm_settings(farm: Any, **extra: Any) -> dict[str, Any]:
    """The settings every farm crawl needs: the add-on and the farm's DNS."""
    return {"ADDONS": ADDON, "POLITENESS_DNS_NAMESERVERS": [farm.dns],
            "ROBOTSTXT_OBEY": False, "CONCURRENT_REQUESTS": 16, **extra}


def open_files_limited(limit: int) -> str:
    """A ``python -c`` program that lowers its own open-file limit to ``limit``,
    then runs the script named by its first argument (with the rest as argv)."""
    return ("import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit})); "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
