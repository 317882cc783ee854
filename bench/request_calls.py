"""Python calls per request, the plugin's own and Scrapy's signal dispatch:
``python -m bench.request_calls``.

One crawl of 600 requests (20 hosts x 30 pages on 4 IPs, every interval 0, or
``--interval``) under
cProfile, stock Scrapy then the plugin, and from each profile: the calls made in
the plugin's own code per request, Scrapy's ``robustApply`` calls (one per
signal handler run) for the whole crawl, ``HostState.interval`` calls and
readiness builds per request. Counts, not times: they do not depend on the
machine's load, so two commits compare directly (docs/benchmark.md).
"""

from __future__ import annotations

import argparse
import os
import pstats
import tempfile
from pathlib import Path
from typing import Any

from scrapy_politeness._sitefarm import Farm

from .overhead import PROFILE_ENV
from .runner import ADDON, STATIC_RESOLVER, run_crawl

HOSTS, IPS, PAGES = 20, 4, 30
REQUESTS = HOSTS * PAGES
PACKAGE = os.sep + "scrapy_politeness" + os.sep
FARM = PACKAGE + "_sitefarm" + os.sep


def _spec() -> tuple[dict[str, Any], list[tuple[str, str]]]:
    ips = [f"127.0.0.{2 + i}" for i in range(IPS)]
    hosts = {f"c{i:02d}.farm.test": {"ip": ips[i % IPS], "kind": "normal", "pages": PAGES}
             for i in range(HOSTS)}
    return {"ips": ips, "hosts": hosts}, [(h, f"/p/{p}") for p in range(PAGES) for h in hosts]


def _settings(config: str, farm: Farm, interval: float = 0.0) -> dict[str, Any]:
    base: dict[str, Any] = {"CONCURRENT_REQUESTS": 16, "RETRY_ENABLED": False}
    if config == "stock":
        return {**base, "TWISTED_DNS_RESOLVER": STATIC_RESOLVER, "DOWNLOAD_DELAY": interval,
                "RANDOMIZE_DOWNLOAD_DELAY": False}
    return {**base, "ADDONS": ADDON, "POLITENESS_DEFAULT": interval,
            "POLITENESS_FLOOR": interval, "POLITENESS_IP_FLOOR": interval,
            **({} if interval else {"POLITENESS_SEND_MARGIN": 0}),
            "POLITENESS_DNS_NAMESERVERS": [farm.dns]}


def figures(path: str) -> dict[str, float]:
    """The counts of one profile (see the module doc)."""
    raw: dict[Any, Any] = pstats.Stats(path).stats  # type: ignore[attr-defined]
    own = robust = interval = readiness = 0
    for (filename, _line, name), (_prim, ncalls, *_rest) in raw.items():
        if name == "robustApply":
            robust += ncalls
        if PACKAGE in filename and FARM not in filename:
            own += ncalls
            if name == "interval" and filename.endswith("host_state.py"):
                interval += ncalls
            if name == "readiness_for":
                readiness += ncalls
    return {"plugin calls/request": own / REQUESTS, "robustApply (600 requests)": robust,
            "HostState.interval/request": interval / REQUESTS,
            "readiness builds/request": readiness / REQUESTS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.request_calls")
    parser.add_argument("--plugin-only", action="store_true")
    parser.add_argument("--interval", type=float, default=0.0,
                        help="seconds between two starts of a host and of an IP (default 0: "
                             "every host's queue runs empty between its pushes)")
    args = parser.parse_args(argv)
    spec, pairs = _spec()
    host_ip = {h: raw["ip"] for h, raw in spec["hosts"].items()}
    configs = ("plugin",) if args.plugin_only else ("stock", "plugin")
    with Farm(spec) as farm, tempfile.TemporaryDirectory(prefix="bench-calls-") as tmp:
        urls = [farm.url(h, p) for h, p in pairs]
        for config in configs:
            farm.reset()
            path = str(Path(tmp, f"{config}.prof"))
            os.environ[PROFILE_ENV] = path
            try:
                run = run_crawl(urls, _settings(config, farm, args.interval),
                                static_hosts=None if config == "plugin" else host_ip)
            finally:
                del os.environ[PROFILE_ENV]
            if not run.ok:
                print(f"{config}: crawl failed: {run.error[-800:]}")
                return 1
            done = run.result["stats"].get("downloader/response_count", 0)
            print(f"{config}: {done} responses")
            for name, value in figures(path).items():
                print(f"  {name:28} {value:10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
