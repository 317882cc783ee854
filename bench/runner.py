"""Running one benchmark crawl from the bench process, and its shared constants.

Apart from :mod:`bench.run` (the side-by-side tables) so that the sections it
runs (DNS faults, overhead, nginx limits...) import these without importing
the module that imports them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .static_resolver import ENV_VAR

__all__ = ["ADDON", "ROOT", "STATIC_RESOLVER", "STOCK_PER_IP", "T0", "CrawlRun", "progress",
           "run_crawl"]

ROOT = Path(__file__).resolve().parent.parent
ADDON = {"scrapy_politeness.Addon": 300}
STATIC_RESOLVER = "bench.static_resolver.StaticResolver"

# Stock Scrapy spacing IPs, not hosts: the deprecated (2.14) per-IP download slots, which
# Scrapy's default DownloaderAwarePriorityQueue refuses, and a warm DNS cache (see
# bench/static_resolver.py). The same pace the plugin keeps on an IP-bound crawl.
STOCK_PER_IP = {"CONCURRENT_REQUESTS_PER_IP": 1,
                "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"}
T0 = time.monotonic()


def progress(msg: str) -> None:
    print(f"[bench {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


# -- running one crawl -------------------------------------------------------

@dataclass
class CrawlRun:
    ok: bool
    result: dict[str, Any]
    cpu: float  # user + sys of the crawl process (os.wait4)
    error: str = ""
    log: str = ""  # what the crawl logged (stderr)


def run_crawl(urls: list[str], settings: dict[str, Any], *, static_hosts: dict[str, str]
              | None = None, timeout: float = 300.0) -> CrawlRun:
    """Run ``bench.crawl`` in a subprocess; its CPU time comes from ``os.wait4``."""
    with tempfile.TemporaryDirectory(prefix="bench-crawl-") as tmp:
        out = Path(tmp, "result.json")
        job = Path(tmp, "job.json")
        job.write_text(json.dumps({"urls": urls, "settings": settings, "out": str(out)}),
                       encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        if static_hosts is not None:
            env[ENV_VAR] = json.dumps(static_hosts)
        with open(Path(tmp, "stderr"), "w+b") as err:
            proc = subprocess.Popen([sys.executable, "-m", "bench.crawl", str(job)], cwd=ROOT,
                                    env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=err)
            killer = threading.Timer(timeout, proc.kill)
            killer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                killer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            log = err.read().decode("utf-8", "replace")
        cpu = usage.ru_utime + usage.ru_stime
        if proc.returncode != 0 or not out.exists():
            return CrawlRun(False, {}, cpu, f"exit {proc.returncode}: {log[-2000:]}")
        return CrawlRun(True, json.loads(out.read_text(encoding="utf-8")), cpu, log=log)


