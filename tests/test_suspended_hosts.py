"""A host down for a while is suspended, probed and resumed: none of its pages is lost.

Real crawls against the farm, judged on the server side. ``flaky.farm.test``
fails every request (503s, or refused connections) for 20 s in the middle of
the crawl, then is healthy again; ``ok.farm.test`` keeps the crawl busy
meanwhile. With ``POLITENESS_ON_CEILING = "dead"`` (the former verdict) the
flaky host lost most of its pages.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from crawling import farm_settings, run_crawl

from scrapy_politeness._sitefarm import Arrival, violations

pytestmark = pytest.mark.integration

TOL = 0.015
COOLDOWN = 3.0
SETTINGS = {"POLITENESS_DEFAULT": 0.5, "POLITENESS_FLOOR": 0.5, "POLITENESS_CEILING": 2.0,
            "POLITENESS_IP_FLOOR": 0.5, "POLITENESS_DEAD_AFTER": 2,
            "POLITENESS_SUSPEND_COOLDOWN": COOLDOWN, "POLITENESS_SUSPEND_MAX_COOLDOWN": 4.0,
            "RETRY_TIMES": 50}
FLAKY_PAGES = 20
OK_PAGES = 80  # 40 s at 0.5 s: the crawl goes on well past the outage


def _spec(flaky: dict[str, Any], ok_pages: int = OK_PAGES) -> dict[str, Any]:
    return {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        "ok.farm.test": {"ip": "127.0.0.2", "pages": ok_pages},
        "flaky.farm.test": {"ip": "127.0.0.3", "pages": FLAKY_PAGES, **flaky}}}


def _crawl(farm_factory: Any, flaky: dict[str, Any], ok_pages: int = OK_PAGES,
           **settings: Any) -> tuple[Any, list[Arrival], Any]:
    spec = _spec(flaky, ok_pages)
    farm = farm_factory(spec)
    urls = [farm.url(h, f"/p/{n}") for h, host in spec["hosts"].items()
            for n in range(host["pages"])]
    result = run_crawl(urls, farm_settings(farm, **{**SETTINGS, **settings}), follow=False,
                       timeout=240)
    return result, sorted(farm.arrivals(), key=lambda a: a.t), farm


def _no_violations(arrivals: list[Arrival]) -> None:
    """No host and no IP fetched closer than its floor (0.5 s), 15 ms tolerance."""
    for host in ("ok.farm.test", "flaky.farm.test"):
        assert not violations([a.t for a in arrivals if a.host == host], 0.5, TOL), host


def test_a_host_answering_503_for_20s_loses_no_page(farm_factory: Any) -> None:
    result, arrivals, _ = _crawl(
        farm_factory, {"outage": {"after": 3.0, "for": 20.0, "mode": "503"}})
    assert result.stat("finish_reason") == "finished", result.log[-3000:]
    flaky = [a for a in arrivals if a.host == "flaky.farm.test"]
    fetched = {a.path for a in flaky if a.status == 200}
    assert fetched == {f"/p/{n}" for n in range(FLAKY_PAGES)}
    assert {a.path for a in arrivals if a.host == "ok.farm.test" and a.status == 200} == {
        f"/p/{n}" for n in range(OK_PAGES)}
    _no_violations(arrivals)
    # While suspended nothing but the probes went out: after the trip, the failed
    # requests are one cool-down (or more) apart.
    failed = [a.t for a in flaky if a.status == 503]
    gaps = [b - a for a, b in pairwise(failed)]
    ramp = next(i for i, g in enumerate(gaps) if g >= COOLDOWN - TOL)
    assert ramp <= 3, gaps  # 0.5 -> 1 -> 2 s (the ceiling), then the trip
    assert all(g >= COOLDOWN - TOL for g in gaps[ramp:]), gaps
    assert result.stat("politeness/suspended") == 1
    assert result.stat("politeness/probes/failed") == len(gaps) - ramp
    assert result.stat("politeness/probes/healthy") == 1
    assert result.stat("politeness/dead_hosts") == 0
    assert result.stat("politeness/dropped/dead") == 0


def test_the_dead_verdict_loses_the_pages_after_the_outage(farm_factory: Any) -> None:
    """The former behaviour, still selectable: what the suspension saves."""
    result, arrivals, _ = _crawl(
        farm_factory, {"outage": {"after": 3.0, "for": 20.0, "mode": "503"}},
        POLITENESS_ON_CEILING="dead")
    fetched = {a.path for a in arrivals if a.host == "flaky.farm.test" and a.status == 200}
    assert len(fetched) < FLAKY_PAGES / 2
    assert result.stat("politeness/dead_hosts") == 1


def test_a_host_refusing_connections_for_20s_loses_no_page(farm_factory: Any,
                                                          tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    result, arrivals, _ = _crawl(
        farm_factory, {"outage": {"after": 3.0, "for": 20.0, "mode": "refuse"}},
        POLITENESS_TRACE=str(trace))
    assert result.stat("finish_reason") == "finished", result.log[-3000:]
    fetched = {a.path for a in arrivals if a.host == "flaky.farm.test" and a.status == 200}
    assert fetched == {f"/p/{n}" for n in range(FLAKY_PAGES)}
    _no_violations(arrivals)
    # A refused connection never reaches the server: the plugin's own trace says
    # what it sent, and each failure's time.
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    failed = [x["t"] for x in lines if x.get("type") == "feedback"
              and x.get("host") == "flaky.farm.test" and x.get("status") == 0]
    assert failed, "no refused connection seen"
    gaps = [b - a for a, b in pairwise(failed)]
    ramp = next(i for i, g in enumerate(gaps) if g >= COOLDOWN - TOL)
    assert ramp <= 3, gaps
    assert all(g >= COOLDOWN - TOL for g in gaps[ramp:]), gaps
    assert result.stat("politeness/suspended") == 1
    assert result.stat("politeness/probes/healthy") == 1


def test_a_host_that_never_comes_back_does_not_hold_the_crawl_open(
        farm_factory: Any) -> None:
    """Its probes would come minutes apart: the crawl closes soon after the last
    healthy page, its requests dropped and counted (no JOBDIR)."""
    result, arrivals, _ = _crawl(
        farm_factory, {"kind": "always_503"}, ok_pages=10,
        POLITENESS_SUSPEND_COOLDOWN=120.0, CLOSESPIDER_TIMEOUT=60)
    assert result.stat("finish_reason") == "politeness_suspended_hosts", result.log[-3000:]
    last_ok = max(a.wall for a in arrivals if a.host == "ok.farm.test")
    finished = dt.datetime.fromisoformat(result.stat("finish_time")).timestamp()
    assert finished - last_ok < 3.0
    assert result.stat("politeness/dropped/suspended") >= 1
    assert "only suspended hosts have requests left: flaky.farm.test" in result.log


def test_with_jobdir_the_suspended_hosts_requests_wait_for_the_next_run(
        farm_factory: Any, tmp_path: Path) -> None:
    """The crawl closes with the flaky host suspended: its requests stay in the
    JOBDIR queue, and the resumed run (no start URLs of its own) fetches them."""
    spec = _spec({"outage": {"after": 0.0, "for": 7.0, "mode": "503"}}, ok_pages=8)
    farm = farm_factory(spec)
    settings = farm_settings(farm, **{**SETTINGS, "POLITENESS_CEILING": 1.0,
                                      "JOBDIR": str(tmp_path / "job")})
    urls = [farm.url(h, f"/p/{n}") for h, host in spec["hosts"].items()
            for n in range(host["pages"])]
    first = run_crawl(urls, settings, follow=False)
    assert first.stat("finish_reason") == "politeness_suspended_hosts", first.log[-3000:]
    assert first.stat("politeness/dropped/suspended") == 0
    assert "they stay in JOBDIR for the next run" in first.log
    before = {a.path for a in farm.arrivals() if a.host == "flaky.farm.test" and a.status == 200}
    assert len(before) < FLAKY_PAGES
    start = min(a.wall for a in farm.arrivals())
    time.sleep(max(0.0, start + 7.5 - time.time()))  # the 7 s outage is over
    second = run_crawl([], settings, follow=False)
    assert second.stat("finish_reason") == "finished", second.log[-3000:]
    fetched = {a.path for a in farm.arrivals() if a.host == "flaky.farm.test" and a.status == 200}
    assert fetched == {f"/p/{n}" for n in range(FLAKY_PAGES)}
    _no_violations(sorted(farm.arrivals(), key=lambda a: a.t))


def test_two_processes_on_redis_agree_on_a_suspension(farm_factory: Any,
                                                      redis_server: Any) -> None:
    """The suspension rides the host's shared pause: the other process holds the
    host's requests too, and no process declares it dead."""
    from test_multiprocess import crawl_together

    spec = _spec({"outage": {"after": 3.0, "for": 20.0, "mode": "503"}})
    farm = farm_factory(spec)
    lists: list[list[str]] = [[], []]
    for h, host in spec["hosts"].items():
        for n in range(host["pages"]):
            lists[n % 2].append(farm.url(h, f"/p/{n}"))
    settings = farm_settings(farm, **SETTINGS, POLITENESS_BACKEND=redis_server.url,
                             POLITENESS_NAMESPACE=f"susp:{uuid.uuid4().hex[:8]}")
    results = crawl_together(lists, settings)
    arrivals = sorted(farm.arrivals(), key=lambda a: a.t)
    flaky = [a for a in arrivals if a.host == "flaky.farm.test"]
    assert {a.path for a in flaky if a.status == 200} == {f"/p/{n}" for n in range(FLAKY_PAGES)}
    _no_violations(arrivals)
    failed = [a.t for a in flaky if a.status == 503]
    gaps = [b - a for a, b in pairwise(failed)]
    print("\nfailed gaps across both processes:", [round(g, 2) for g in gaps])
    for r in results:
        assert r.stat("politeness/dead_hosts") == 0
    assert sum(r.stat("politeness/suspended") for r in results) >= 1
    ramp = next(i for i, g in enumerate(gaps) if g >= COOLDOWN - TOL)
    assert ramp <= 3, gaps
    assert all(g >= COOLDOWN - TOL for g in gaps[ramp:]), gaps
