"""A host that fails every request for 90 s in the middle of a crawl loses nothing.

The judged outage of the breaker (``POLITENESS_ON_CEILING = "suspend"``), on
real crawls against the farm: ``flaky.farm.test`` answers 503 (one test) or
refuses connections (the other) for 90 s from 3 s into the crawl, then is
healthy again, while ``ok.farm.test`` keeps the crawl busy. All its pages are
fetched, no host or IP is fetched closer than its floor (server side), and
while it is suspended nothing but its probes goes out, each one cool-down
after the last (3 s, then doubling, capped at 4 s). Each test takes about
two minutes of wall time: the outage itself is 90 s.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from crawling import farm_settings
from test_suspended_hosts import (
    COOLDOWN,
    FLAKY_PAGES,
    SETTINGS,
    TOL,
    _crawl,
    _no_violations,
    _spec,
)

pytestmark = pytest.mark.integration

OUTAGE = 90.0
MAX_COOLDOWN = 4.0  # test_suspended_hosts.SETTINGS' POLITENESS_SUSPEND_MAX_COOLDOWN
NEVER_PROBED = {"POLITENESS_SUSPEND_COOLDOWN": 120.0, "POLITENESS_SUSPEND_MAX_COOLDOWN": 240.0}
OK_PAGES = 230  # 115 s at 0.5 s: the healthy host outlasts the outage and the recovery


def _judge_probes(failed: list[float], healthy: list[float], sent: list[float],
                  result: Any) -> None:
    """``failed``: the flaky host's failure times; ``healthy``: its successes;
    ``sent``: every request of it that went out (all sorted, one clock).

    The breaker trips at the first failure followed by a cool-down's silence;
    from then until the first healthy answer, every request that went out is a
    probe (``politeness/probes/sent``), each one cool-down after the previous:
    3 s after the trip, then 4 s (twice 3 s, capped)."""
    gaps = [b - a for a, b in pairwise(failed)]
    trip = next(i for i, g in enumerate(gaps) if g >= COOLDOWN - TOL)
    assert trip <= 3, gaps  # 0.5 -> 1 -> 2 s (the ceiling), then the trip
    tripped_at = failed[trip]
    back_at = next(t for t in healthy if t > tripped_at)
    probes = [t for t in sent if tripped_at < t <= back_at]
    schedule = [b - a for a, b in pairwise([tripped_at, *probes])]
    print(f"\n{len(probes)} probes, gaps:", [round(g, 2) for g in schedule])
    assert schedule[0] >= COOLDOWN - TOL, schedule
    assert all(g >= MAX_COOLDOWN - TOL for g in schedule[1:]), schedule
    # 90 s of outage at one probe per 4 s: about 22 probes, all but the last failed.
    assert len(probes) >= (OUTAGE - 10.0) / MAX_COOLDOWN, schedule
    assert result.stat("politeness/probes/sent") == len(probes)
    assert result.stat("politeness/probes/failed") == len(probes) - 1
    assert result.stat("politeness/probes/healthy") == 1
    assert result.stat("politeness/suspended") == 1
    assert result.stat("politeness/dead_hosts") == 0
    assert result.stat("politeness/dropped/dead") == 0
    assert result.stat("politeness/dropped/suspended") == 0


def _all_pages_and_no_violations(result: Any, arrivals: list[Any]) -> None:
    assert result.stat("finish_reason") == "finished", result.log[-3000:]
    for host, pages in (("flaky.farm.test", FLAKY_PAGES), ("ok.farm.test", OK_PAGES)):
        fetched = {a.path for a in arrivals if a.host == host and a.status == 200}
        assert fetched == {f"/p/{n}" for n in range(pages)}, host
    _no_violations(arrivals)


def test_a_host_answering_503_for_90s_loses_no_page(farm_factory: Any) -> None:
    result, arrivals, _ = _crawl(
        farm_factory, {"outage": {"after": 3.0, "for": OUTAGE, "mode": "503"}},
        ok_pages=OK_PAGES)
    _all_pages_and_no_violations(result, arrivals)
    flaky = [a for a in arrivals if a.host == "flaky.farm.test"]
    # Judged on the farm's log: every request that reached the host.
    _judge_probes([a.t for a in flaky if a.status == 503],
                  [a.t for a in flaky if a.status == 200], [a.t for a in flaky], result)


def test_a_host_refusing_connections_for_90s_loses_no_page(farm_factory: Any,
                                                          tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    result, arrivals, _ = _crawl(
        farm_factory, {"outage": {"after": 3.0, "for": OUTAGE, "mode": "refuse"}},
        ok_pages=OK_PAGES, POLITENESS_TRACE=str(trace))
    _all_pages_and_no_violations(result, arrivals)
    # A refused connection never reaches the farm: the plugin's own trace says
    # what it sent (dispatch) and when each answer or failure came (feedback).
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    flaky = [x for x in lines if x.get("host") == "flaky.farm.test"]
    _judge_probes([x["t"] for x in flaky if x["type"] == "feedback" and x["status"] == 0],
                  [x["t"] for x in flaky if x["type"] == "feedback" and x["status"] == 200],
                  [x["t"] for x in flaky if x["type"] == "dispatch"], result)


@pytest.mark.parametrize("flaky", [{"kind": "always_503"},
                                   {"outage": {"after": 0.0, "for": 600.0, "mode": "refuse"}}],
                         ids=["503", "refuse"])
def test_a_host_that_never_comes_back_closes_the_crawl_soon(farm_factory: Any,
                                                           flaky: dict[str, Any]) -> None:
    """Answering 503s, or refusing connections, for good: its probes would come
    minutes apart, so the crawl closes soon after the last healthy page."""
    result, arrivals, _ = _crawl(farm_factory, flaky, ok_pages=10,
                                 **NEVER_PROBED, CLOSESPIDER_TIMEOUT=60)
    assert result.stat("finish_reason") == "politeness_suspended_hosts", result.log[-3000:]
    last_ok = max(a.wall for a in arrivals if a.host == "ok.farm.test")
    finished = dt.datetime.fromisoformat(result.stat("finish_time")).timestamp()
    assert finished - last_ok < 3.0
    assert result.stat("politeness/dropped/suspended") >= 1
    assert result.stat("politeness/probes/sent") == 0


def test_on_redis_both_processes_close_when_only_a_suspended_host_is_left(
        farm_factory: Any, redis_server: Any) -> None:
    """Two processes share the crawl on Redis and the flaky host never comes
    back: whichever process suspended it, both hold its requests (nothing but the
    ramp to the ceiling reaches it) and both close soon after their last healthy
    page, not minutes later at the probe."""
    from test_multiprocess import crawl_together

    spec = _spec({"kind": "always_503"}, ok_pages=16)
    farm = farm_factory(spec)
    lists: list[list[str]] = [[], []]
    for h, host in spec["hosts"].items():
        for n in range(host["pages"]):
            lists[n % 2].append(farm.url(h, f"/p/{n}"))
    settings = farm_settings(farm, **{**SETTINGS, **NEVER_PROBED},
                             POLITENESS_BACKEND=redis_server.url, CLOSESPIDER_TIMEOUT=60,
                             POLITENESS_NAMESPACE=f"gone:{uuid.uuid4().hex[:8]}")
    results = crawl_together(lists, settings)
    arrivals = sorted(farm.arrivals(), key=lambda a: a.t)
    _no_violations(arrivals)
    failed = [a.t for a in arrivals if a.host == "flaky.farm.test"]
    print("\nflaky requests, gaps:", [round(b - a, 2) for a, b in pairwise(failed)])
    assert len(failed) <= 4  # 0.5 -> 1 -> 2 s (the ceiling), then the trip
    last_ok = max(a.wall for a in arrivals if a.host == "ok.farm.test")
    for r in results:
        assert r.stat("finish_reason") == "politeness_suspended_hosts", r.log[-3000:]
        finished = dt.datetime.fromisoformat(r.stat("finish_time")).timestamp()
        assert finished - last_ok < 3.0, r.log[-3000:]
        assert r.stat("politeness/dead_hosts") == 0
        assert r.stat("politeness/probes/sent") == 0


def test_the_live_line_and_the_report_say_the_host_is_suspended(farm_factory: Any) -> None:
    """Read from the crawl's own log: the live line counts the suspended host
    and names it as what holds the end, "suspended at its ceiling" (not paused by
    a Retry-After it never sent); so does the closing report."""
    result, _, _ = _crawl(farm_factory, {"kind": "always_503"}, ok_pages=30,
                          **NEVER_PROBED, POLITENESS_LOG_INTERVAL=1.0, CLOSESPIDER_TIMEOUT=60)
    assert result.stat("finish_reason") == "politeness_suspended_hosts", result.log[-3000:]
    lines = [line for line in result.log.splitlines() if "Politeness: " in line]
    assert any(re.search(r", 1 suspended \(0 probed\); 1 host suspended at its ceiling holds "
                         r"the end: flaky\.farm\.test \(2s interval, \d+ left, ~", line)
               for line in lines), "\n".join(lines)
    assert re.search(r"\n  flaky\.farm\.test: .*; interval 2s, suspended at its ceiling; "
                     r"backoffs 5xx:", result.log), result.log[-3000:]
