"""Head-of-line blocking, and pause/resume under JOBDIR, with real crawls.

One big host's 40 URLs come first, then 12 small hosts (one IP each) with 3
URLs each; 8 concurrent requests, 0.5 s per host. A request waiting in the
gate holds a concurrency slot, so a queue blind to the gate lets the big
host's waiting requests take the slots while the small hosts idle. The
politeness bound is T* = 39 * 0.5 s (the big host's 40 starts); times are the
farm's first-byte arrivals.
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
T_STAR = (BIG_PAGES - 1) * INTERVAL
DAPQ = "scrapy.pqueues.DownloaderAwarePriorityQueue"


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


def _crawl(farm_factory: Any, **extra: Any) -> tuple[float, float]:
    spec = _spec()
    farm = farm_factory(spec)
    result = run_crawl(_urls(farm, spec), farm_settings(
        farm, CONCURRENT_REQUESTS=8, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_LATENCY_RISE=100.0, **extra), follow=False)
    arrivals = farm.arrivals()
    assert len(arrivals) == BIG_PAGES + SMALL_HOSTS * SMALL_PAGES
    assert result.stat("politeness/dispatched") == len(arrivals)
    start = min(a.t for a in arrivals)
    wall = max(a.t for a in arrivals) - start
    small_done = max(a.t for a in arrivals if a.host != "big.farm.test") - start
    return wall, small_done


def test_gate_aware_queue_keeps_the_crawl_at_the_politeness_bound(farm_factory: Any) -> None:
    """The add-on's queue: close to T*, the small hosts done in the first quarter.

    Scrapy's DownloaderAwarePriorityQueue is run too, for the numbers only: with
    every host at the same pace its round robin hands each host what it can
    start, so here it does as well (see the slow-host test for where it does not).
    """
    wall, small_done = _crawl(farm_factory)
    dapq_wall, dapq_small_done = _crawl(farm_factory, SCHEDULER_PRIORITY_QUEUE=DAPQ)
    for name, (w, done) in {"politeness queue": (wall, small_done),
                            "DownloaderAwarePriorityQueue": (dapq_wall, dapq_small_done)}.items():
        print(f"\n{name}: wall {w:.2f}s, T* {T_STAR:.2f}s, ratio {w / T_STAR:.3f}, "
              f"small hosts done at {done:.2f}s ({done / w:.0%} of the crawl)")
    assert wall < 1.25 * T_STAR
    assert small_done < 0.25 * wall
    assert dapq_wall >= T_STAR - 0.1  # the big host's bucket bounds any queue


def _slow_host_crawl(farm_factory: Any, **extra: Any) -> tuple[float, float]:
    """A slow host (1 s) whose 12 URLs come first, 12 fast hosts (0.25 s) x 6 URLs."""
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
        POLITENESS_LATENCY_RISE=100.0, **extra), follow=False)
    arrivals = farm.arrivals()
    assert len(arrivals) == 12 + SMALL_HOSTS * 6
    start = min(a.t for a in arrivals)
    return (max(a.t for a in arrivals) - start,
            max(a.t for a in arrivals if a.host != "slow.farm.test") - start)


def test_slow_host_does_not_hold_the_fast_hosts_back(farm_factory: Any) -> None:
    """Different paces: round robin hands the slow host more than it can start, and
    its waiting requests fill the slots. The fast hosts' own bound is 5 * 0.25 s."""
    ours = _slow_host_crawl(farm_factory)
    dapq = _slow_host_crawl(farm_factory, SCHEDULER_PRIORITY_QUEUE=DAPQ)
    print(f"\nslow host 12 x 1 s (T* 11 s) + 12 fast hosts 6 x 0.25 s (T* 1.25 s): "
          f"politeness queue wall {ours[0]:.2f}s, fast hosts done at {ours[1]:.2f}s; "
          f"DownloaderAwarePriorityQueue wall {dapq[0]:.2f}s, fast hosts done at "
          f"{dapq[1]:.2f}s")
    assert ours[1] < 1.5 * 1.25
    assert dapq[1] > 2 * ours[1]


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

