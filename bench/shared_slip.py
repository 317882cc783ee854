"""Send slip under sharing and under load, judged by the farm (issue 9 item 10).

    .venv/bin/python -m bench.shared_slip [--runs 3] [--quick] [--only three-processes,busy]

``three-processes``: three crawler processes on one Redis crawl one URL list
dealt round-robin between them (24 hosts on 4 IPs, 6 vhosts per IP, 7 URLs
each: 168 requests, 0.25 s host interval and IP floor), ``--runs`` times;
then once each with the memory backend and with stock Scrapy's
``DOWNLOAD_DELAY`` in three processes, where nothing is shared.
``busy``: ONE process at 100+ requests/s (64 hosts on 32 IPs, two vhosts per
IP, 0.25 s, ``CONCURRENT_REQUESTS=32``), plugin and stock ``DOWNLOAD_DELAY``
side by side. Violations: consecutive starts of a host or an IP closer than
0.25 s - 15 ms, on the farm's clock.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from scrapy_politeness._sitefarm import Farm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from redis_server import RedisServer, free_port

from .metrics import Judgement, judge
from .runner import ADDON, STATIC_RESOLVER, CrawlRun, progress, run_crawl
from .scenarios import DOMAIN, Scenario

INTERVAL = 0.25


def _scenario(name: str, n_hosts: int, n_ips: int, per_host: int,
              concurrent: int) -> Scenario:
    ips = [f"127.0.0.{2 + i}" for i in range(n_ips)]
    hosts = {f"{name[0]}{i:02d}.{DOMAIN}": {"ip": ips[i % n_ips], "kind": "normal",
                                             "pages": per_host} for i in range(n_hosts)}
    urls = [(h, f"/p/{n}") for n in range(per_host) for h in hosts]  # round-robin over hosts
    return Scenario(name, "", {"ips": ips, "hosts": hosts}, urls, INTERVAL, INTERVAL,
                    concurrent_requests=concurrent)


def _settings(config: str, scenario: Scenario, farm: Farm, redis_url: str | None,
              namespace: str) -> dict[str, Any]:
    settings: dict[str, Any] = {"CONCURRENT_REQUESTS": scenario.concurrent_requests}
    if config == "stock delay":
        return {**settings, "TWISTED_DNS_RESOLVER": STATIC_RESOLVER,
                "DOWNLOAD_DELAY": INTERVAL, "DOWNLOAD_DELAY_JITTER": 0}
    settings.update(ADDONS=ADDON, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
                    POLITENESS_IP_FLOOR=INTERVAL, POLITENESS_DNS_NAMESERVERS=[farm.dns],
                    POLITENESS_LATENCY_RISE=100.0, POLITENESS_NAMESPACE=namespace)
    if config == "plugin, redis":
        assert redis_url is not None
        settings["POLITENESS_BACKEND"] = redis_url
    return settings


def _crawl_together(url_lists: list[list[str]], settings: dict[str, Any],
                    static_hosts: dict[str, str] | None) -> list[CrawlRun]:
    runs: list[CrawlRun | None] = [None] * len(url_lists)

    def one(i: int) -> None:
        runs[i] = run_crawl(url_lists[i], settings, static_hosts=static_hosts, timeout=300)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(url_lists))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in runs if r is not None]


def _run(scenario: Scenario, config: str, processes: int,
         redis_url: str | None) -> tuple[Judgement | None, str]:
    with Farm(scenario.spec) as farm:
        urls = [farm.url(h, p) for h, p in scenario.urls]
        lists = [urls[i::processes] for i in range(processes)]
        stock = config.startswith("stock")
        settings = _settings(config, scenario, farm, redis_url, f"slip:{uuid.uuid4().hex[:8]}")
        runs = _crawl_together(lists, settings, scenario.host_ip() if stock else None)
        failed = [r.error for r in runs if not r.ok]
        if failed:
            return None, failed[0][-300:]
        return judge(scenario, farm.arrivals()), ""


def _row(what: str, j: Judgement | None, error: str) -> str:
    if j is None:
        return f"| {what} | FAILED: {error} | | | | | | |"
    rate = j.requests / j.wall if j.wall > 0 else 0.0
    return (f"| {what} | {j.requests} | {j.urls_ok}/{j.urls} | {j.host_viol} | {j.ip_viol} | "
            f"{j.min_host_gap or 0:.3f} | {j.min_ip_gap or 0:.3f} | {j.wall:.2f} ({rate:.0f}/s) |")


HEAD = ["| config | requests | URLs 200 | host viol. | IP viol. | min host gap | min IP gap "
        "| wall (requests/s) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]


def three_processes(runs: int, quick: bool) -> list[str]:
    scenario = _scenario("shared", 12 if quick else 24, 2 if quick else 4,
                         4 if quick else 7, 16)
    lines = [f"### Three processes on one Redis ({len(scenario.urls)} requests, "
             f"{len(scenario.spec['hosts'])} hosts on {len(scenario.spec['ips'])} IPs, "
             f"{INTERVAL} s)", "", *HEAD]
    binary = shutil.which("redis-server")
    assert binary is not None
    server = RedisServer(binary, free_port()).start()
    url = server.url
    try:
        for i in range(runs):
            progress(f"three-processes: plugin, redis, run {i + 1}/{runs}")
            lines.append(_row(f"plugin, redis, run {i + 1}", *_run(scenario, "plugin, redis",
                                                                   3, url)))
    finally:
        server.stop()
    for config in ("plugin, memory", "stock delay"):
        progress(f"three-processes: {config}")
        lines.append(_row(f"{config} (nothing shared)", *_run(scenario, config, 3, None)))
    return [*lines, ""]


def busy(runs: int, quick: bool) -> list[str]:
    scenario = _scenario("busy", 32 if quick else 64, 16 if quick else 32,
                         8 if quick else 12, 32)
    lines = [f"### One process at 100+ requests/s ({len(scenario.urls)} requests, "
             f"{len(scenario.spec['hosts'])} hosts on {len(scenario.spec['ips'])} IPs, "
             f"CONCURRENT_REQUESTS=32, {INTERVAL} s)", "", *HEAD]
    for i in range(runs):
        for config in ("plugin", "stock delay"):
            progress(f"busy: {config}, run {i + 1}/{runs}")
            lines.append(_row(f"{config}, run {i + 1}", *_run(scenario, config, 1, None)))
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shared_slip",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="three-processes,busy")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    out = ["## Send slip: several processes on Redis, one process under load", ""]
    if "three-processes" in only:
        if shutil.which("redis-server") is None:
            out += ["Three processes: skipped (no redis-server).", ""]
        else:
            out += three_processes(args.runs, args.quick)
    if "busy" in only:
        out += busy(args.runs, args.quick)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
