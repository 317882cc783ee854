"""The simulated-clock memory bench at small scale: memory follows the active hosts.

20,000 hosts through the gate, the tables, the bucket keys, the DNS cache and
the verdicts (``bench/active_hosts.py``), with a 30 s idle time so eviction
runs during the crawl. Bytes, not seconds: traced memory is deterministic
enough to assert on; the pass times are the bench's to report.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from bench.active_hosts import simulate
from scrapy_politeness.downloader.host_keys import TRIM_AT

MB = 1_000_000


@pytest.fixture(scope="module")
def run() -> dict[str, Any]:
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start(3)
    try:
        return simulate(20_000, idle_ttl=30.0)
    finally:
        if not tracing:
            tracemalloc.stop()


def test_after_the_hosts_went_idle_memory_is_back_below_the_first_10000(
        run: dict[str, Any]) -> None:
    assert run["requests"] > 39_000
    assert run["idle_minus_first_bytes"] <= 10 * MB
    assert run["after_idle_bytes"] < run["after_first_bytes"]


def test_nothing_per_host_outlives_the_idle_hosts(run: dict[str, Any]) -> None:
    # Crawl-delay records and suspensions included: each lasts while its host
    # matters, then goes (a Crawl-delay is read again from robots.txt if the host
    # comes back: tests/test_crawl_delay_relearn.py).
    assert run["suspensions_at_peak"] > 0
    left = run["left_after_idle"]
    assert left == {"host states": 0, "ips": 0, "dns names": 0, "dead records": 0,
                    "crawl-delay records": 0, "park records": 0, "suspensions": 0}
    idle = run["after_idle"]
    assert idle.get("host table", 0) <= 10_000  # no full state left, the table refitted
    assert idle.get("verdicts", 0) <= 10_000
    assert idle.get("suspensions", 0) <= 10_000
    assert idle.get("DNS answers and pins", 0) <= 10_000
    assert idle.get("IP table", 0) <= 10_000
    assert idle.get("host keys", 0) <= TRIM_AT * 500  # the memos trimmed to the hosts in use


def test_the_peak_follows_the_active_window_not_the_hosts_seen(run: dict[str, Any]) -> None:
    # 100 new hosts a second, idle after 30 s, a pass every 30 s: ~6,000 hosts
    # live at most, a third of the 20,000 seen.
    per_host = run["after_first_bytes"] / 10_000
    assert run["peak_bytes"] < per_host * 10_000
