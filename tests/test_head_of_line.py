"""Head-of-line blocking, and pause/resume under JOBDIR, with real crawls.

One big host's 40 URLs come first, then 12 small hosts (one IP each) with 3
URLs each; 8 concurrent requests, 0.5 s per host. A request waiting in the
gate holds a concurrency slot, so a queue blind to the gate lets the big
host's waiting requests take the slots while the small hosts idle. Judged by
the order of the farm's first-byte arrivals, not by durations.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from crawling import farm_settings, run_crawl

INTERVAL = 0.5
BIG_PAGES = 40
SMALL_HOSTS = 12
SMALL_PAGES = 3


def _spec() -> dict[str, Any]:
    small_ips = [f"127.0.0.{i}" for i in range(2, 2 + SMALL_HOSTS)]
    hosts: dict[str, Any] = {"big.farm.test": {"ip": "127.0.0.14", "kind": "normal",
                                               "pages": BIG_PAGES}}
    for n, ip in enumerate(small_ips):
        hosts[f"s{n:02d}.farm.test"] = {"ip": ip, "kind": "normal", "pages": SMALL_PAGES}
    return {"ips": [*small_ips, "127.0.0.14"], "hosts": hosts}


def _urls(farm: Any, spec: dict[str, Any]) -> list[str]:
    big = [farm.url("big.farm.test", f"/p/{i}") for i in range(BIG_PAGES)]
    small = [farm.url(h, f"/p/{i}") for h in spec["hosts"] if h != "big.farm.test"
             for i in range(SMALL_PAGES)]
    return big + small


def _crawl(farm_factory: Any) -> list[Any]:
    spec = _spec()
    farm = farm_factory(spec)
    result = run_crawl(_urls(farm, spec), farm_settings(
        farm, CONCURRENT_REQUESTS=8, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_LATENCY_RISE=100.0), follow=False)
    arrivals = sorted(farm.arrivals(), key=lambda a: a.t)
    assert len(arrivals) == BIG_PAGES + SMALL_HOSTS * SMALL_PAGES
    assert result.stat("politeness/dispatched") == len(arrivals)
    return arrivals


def _before_last(arrivals: list[Any], big: str) -> int:
    """How many of the big host's fetches the server saw before the others' last one.

    An order, not a duration: a loaded machine slows both alike. The wall-clock
    ratios against T* and Scrapy's DownloaderAwarePriorityQueue side by side are
    the benchmark's head-of-line and slow-head scenarios (``make bench``)."""
    last_small = max(i for i, a in enumerate(arrivals) if a.host != big)
    return sum(1 for a in arrivals[:last_small] if a.host == big)


def test_gate_aware_queue_keeps_the_small_hosts_from_waiting_behind_the_big_one(
        farm_factory: Any) -> None:
    """The add-on's queue hands the small hosts their slots at once: they are all
    done while the big host (40 URLs yielded first, 0.5 s apart) is in its first
    quarter. A queue blind to the gate lets the big host's waiters take the slots."""
    big_first = _before_last(_crawl(farm_factory), "big.farm.test")
    print(f"\nbig host fetches before the small hosts' last: {big_first} of {BIG_PAGES}")
    assert big_first <= BIG_PAGES // 4


def test_slow_host_does_not_hold_the_fast_hosts_back(farm_factory: Any) -> None:
    """Different paces: a slow host (1 s, 12 URLs yielded first) and 12 fast hosts
    (0.25 s, 6 URLs each; their own bound is 5 x 0.25 s). Round robin hands the slow
    host more than it can start and its waiters fill the slots; ours does not, so the
    fast hosts finish within the slow host's first few fetches."""
    small_ips = [f"127.0.0.{i}" for i in range(2, 2 + SMALL_HOSTS)]
    hosts: dict[str, Any] = {"slow.farm.test": {"ip": "127.0.0.14", "kind": "normal",
                                                "pages": 12}}
    for n, ip in enumerate(small_ips):
        hosts[f"s{n:02d}.farm.test"] = {"ip": ip, "kind": "normal", "pages": 6}
    farm = farm_factory({"ips": [*small_ips, "127.0.0.14"], "hosts": hosts})
    urls = [farm.url("slow.farm.test", f"/p/{i}") for i in range(12)] + [
        farm.url(h, f"/p/{i}") for h in hosts if h != "slow.farm.test" for i in range(6)]
    run_crawl(urls, farm_settings(
        farm, CONCURRENT_REQUESTS=8, POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25,
        POLITENESS_HOSTS={"slow.farm.test": {"floor": 1.0}},
        POLITENESS_LATENCY_RISE=100.0), follow=False)
    arrivals = sorted(farm.arrivals(), key=lambda a: a.t)
    assert len(arrivals) == 12 + SMALL_HOSTS * 6
    slow_first = _before_last(arrivals, "slow.farm.test")
    print(f"\nslow host fetches before the fast hosts' last: {slow_first} of 12")
    assert slow_first <= 3


def test_pause_and_resume_with_jobdir_fetches_everything_once(farm_factory: Any) -> None:
    hosts = {f"r{n}.farm.test": {"ip": f"127.0.0.{2 + n}", "kind": "normal", "pages": 8}
             for n in range(3)}
    farm = farm_factory({"ips": [h["ip"] for h in hosts.values()], "hosts": hosts})
    urls = [farm.url(h, f"/p/{i}") for h in hosts for i in range(8)]
    with tempfile.TemporaryDirectory(prefix="jobdir-") as jobdir:
        settings = farm_settings(farm, CONCURRENT_REQUESTS=8, POLITENESS_DEFAULT=0.2,
                                 POLITENESS_FLOOR=0.2, POLITENESS_LATENCY_RISE=100.0,
                                 JOBDIR=jobdir)
        first = run_crawl(urls, {**settings, "CLOSESPIDER_PAGECOUNT": 6}, follow=False)
        seen_first = len(farm.arrivals())
        assert first.stat("finish_reason") == "closespider_pagecount"
        assert seen_first < len(urls), "the first run was not stopped mid-way"
        assert Path(jobdir, "requests.queue", "active.json").exists()
        second = run_crawl([], settings, follow=False)  # start() yields nothing: all from disk
        assert "Resuming crawl" in second.log
        assert second.stat("finish_reason") == "finished"
    fetched = Counter(farm.url(a.host, a.path) for a in farm.arrivals())
    assert set(fetched) == set(urls)
    assert max(fetched.values()) == 1, [u for u, n in fetched.items() if n > 1]
    print(f"\npause/resume: {seen_first} fetched before the pause, "
          f"{len(fetched) - seen_first} after; taken back from the gate on close: "
          f"{first.stat('politeness/scheduler/rescued')}")

