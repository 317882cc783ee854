"""A failing name holds no download slot: its retries are re-resolved in the queue.

Real crawls against the farm and its DNS server; pace judged on the farm's
arrival times (server side).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

import pytest
from crawling import farm_settings, run_crawl

pytestmark = pytest.mark.integration

IPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
PAGES = 8
INTERVAL = 0.5
TOLERANCE = 0.015  # the farm log's timing tolerance


def test_names_that_never_answer_hold_no_slots(farm_factory: Any) -> None:
    """16 names that never answer (NXDOMAIN and SERVFAIL among them), scheduled
    first, then 24 healthy hosts, with DNS timeout 1 s and Scrapy's retries: every
    retry of a failing name waits for its lookup in the scheduler queue, so
    ``CONCURRENT_REQUESTS`` stay free and each healthy host keeps its pace
    (it held a slot for each 1 s lookup in the middleware: every IP stalled)."""
    modes = ["timeout"] * 12 + ["servfail"] * 2 + ["nxdomain"] * 2
    failing = {f"bad{i:02d}.farm.test": mode for i, mode in enumerate(modes)}
    healthy = [f"ok{i:02d}.farm.test" for i in range(24)]
    hosts: dict[str, Any] = {h: {"ip": IPS[0], "dns": {"mode": m}} for h, m in failing.items()}
    hosts.update({h: {"ip": IPS[i % len(IPS)], "pages": PAGES} for i, h in enumerate(healthy)})
    farm = farm_factory({"ips": IPS, "hosts": hosts})
    urls = [farm.url(h, f"/p/{p}") for h in failing for p in range(2)]
    urls += [farm.url(h, f"/p/{p}") for p in range(PAGES) for h in healthy]
    result = run_crawl(urls, farm_settings(
        farm, CONCURRENT_REQUESTS=16, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_IP_FLOOR=0.02, POLITENESS_DNS_TIMEOUT=1.0), follow=False, timeout=240)
    assert result.stat("downloader/response_status_count/200") == len(healthy) * PAGES
    assert result.stat("retry/max_reached") == 2 * len(failing)
    times: dict[str, list[float]] = defaultdict(list)
    by_ip: dict[str, list[float]] = defaultdict(list)
    for arrival in farm.arrivals():
        times[arrival.host].append(arrival.t)
        by_ip[arrival.ip].append(arrival.t)
    best = (PAGES - 1) * INTERVAL
    ratios = {h: (max(times[h]) - min(times[h])) / best for h in healthy}
    assert max(ratios.values()) <= 1.10, sorted(ratios.items(), key=lambda kv: -kv[1])[:5]
    for ip, seen in by_ip.items():
        seen.sort()
        gap = max(b - a for a, b in pairwise(seen))
        assert gap <= 1.0 + TOLERANCE, (ip, gap)
