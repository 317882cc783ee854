"""The example project (example_project/) and its demo, run end to end.

Both run real ``scrapy crawl farm`` subprocesses against a local site farm, so
they exercise exactly the configuration a user copies: the add-on enabled in
settings.py, Scrapy's default HTTP download handler, the farm's names only
resolvable through the farm's DNS server (given to the plugin via FARM_DNS).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scrapy_politeness._sitefarm import Farm, host_gaps, ip_gaps, starts_by

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "example_project"
FLOOR = 0.3  # POLITENESS_FLOOR / POLITENESS_IP_FLOOR in example_project's settings
TOLERANCE = 0.015

IP_A = "127.0.0.2"
IP_B = "127.0.0.3"
SPEC: dict[str, Any] = {
    "ips": [IP_A, IP_B],
    "port": 0,
    "dns_ttl": 300,
    "hosts": {
        "one.example-farm.test": {"ip": IP_A, "kind": "normal", "pages": 4},
        "two.example-farm.test": {"ip": IP_B, "kind": "normal", "pages": 3},
    },
}


def _env(farm: Farm, urls: list[str], stats_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env.update(FARM_DNS=farm.dns, FARM_URLS=",".join(urls), STATS_JSON_PATH=str(stats_path))
    return env


@pytest.mark.integration
def test_example_project_crawls_through_the_plugin(tmp_path: Path) -> None:
    stats_path = tmp_path / "stats.json"
    with Farm(SPEC) as farm:
        urls = [farm.url(host) for host in SPEC["hosts"]]
        proc = subprocess.run(
            [sys.executable, "-m", "scrapy", "crawl", "farm", "-s", "LOG_LEVEL=INFO",
             "-s", "POLITENESS_REPORT_STAT=True"],
            cwd=PROJECT, env=_env(farm, urls, stats_path),
            capture_output=True, text=True, timeout=120, check=False,
        )
        arrivals = farm.arrivals()
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]

    # The farm saw both hosts, each only on the IP of its spec: the download
    # connected to the address the plugin resolved through the farm DNS.
    by_host = starts_by(arrivals, lambda a: a.host)
    assert set(by_host) == set(SPEC["hosts"]), log[-6000:]
    for host, hspec in SPEC["hosts"].items():
        ips = {a.ip for a in arrivals if a.host == host}
        assert ips == {hspec["ip"]}, (host, ips)
        paths = {a.path for a in arrivals if a.host == host}
        assert {"/robots.txt", "/"} <= paths, (host, paths)
        assert len(paths) == 2 + hspec["pages"], (host, paths)  # every page, once

    stats = json.loads(stats_path.read_text(encoding="utf-8"))
    assert stats["politeness/dispatched"] > 0
    assert stats["politeness/dispatched"] == len(arrivals)
    assert {row["host"] for row in stats["politeness/report"]} == set(SPEC["hosts"])
    # The add-on switched Scrapy's own throttle off (Scrapy logs the enabled list).
    assert "farmcrawl.extensions.StatsToJson" in log
    assert "scrapy.extensions.throttle.AutoThrottle" not in log
    assert not any(k.startswith("autothrottle") for k in stats)

    for key, gap in {**host_gaps(arrivals), **ip_gaps(arrivals)}.items():
        assert gap >= FLOOR - TOLERANCE, (key, gap)


@pytest.mark.integration
def test_demo_runs_end_to_end() -> None:
    proc = subprocess.run(
        [sys.executable, str(PROJECT / "demo.py")], cwd=ROOT,
        capture_output=True, text=True, timeout=120, check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    for header in ("-- per host", "host / ip", "min gap", "-- politeness/* stats --"):
        assert header in out, out
    assert "OK: no host gap below its interval" in out, out
    assert "Politeness report" in out, out


@pytest.mark.integration
@pytest.mark.parametrize(("env", "said"), [
    ({"FARM_URLS": "http://one.example-farm.test:1/", "FARM_DNS": "127.0.0.1:{port}"},
     "The demo farm does not answer at FARM_DNS=127.0.0.1:{port}: is the farm running?"),
    ({"FARM_URLS": ""}, "no start URLs: pass -a urls=URL1,URL2 or set FARM_URLS"),
])
def test_example_project_refuses_to_start_with_one_error_line(
        env: dict[str, str], said: str) -> None:
    """A farm that is down (or no URL at all): exit status 1, one ERROR line, no traceback."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    full_env = {**os.environ, **{k: v.format(port=port) for k, v in env.items()}}
    full_env.pop("SCRAPY_SETTINGS_MODULE", None)
    proc = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "farm"], cwd=PROJECT,
                          env=full_env, capture_output=True, text=True, timeout=60, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log[-4000:]
    errors = [line for line in log.splitlines() if " ERROR: " in line or " CRITICAL: " in line]
    assert len(errors) == 1, log[-4000:]
    assert said.format(port=port) in errors[0]
    assert "Traceback" not in log
