"""A crawl held by one host at its ceiling: the live line and the report say so.

A real crawl of the farm: ``fast.farm.test`` answers at once, ``slow.farm.test``
answers 503 to everything, so its first answer sends it to a 2 s ceiling and the
crawl runs for it alone after the fast host is done. What the log says is
judged against what the farm saw (server side): the requests the live line
says are left, and the time the report says the slow host held the crawl
alone (measured on the 0.25 s tick: two ticks of tolerance).
"""

from __future__ import annotations

import ast
import re
import time
from typing import Any

import pytest
from crawling import farm_settings, run_crawl

pytestmark = pytest.mark.integration

FAST, SLOW = 12, 8  # pages
CEILING = 2.0
TICK = 0.25  # the periodic tick the observer counts on

LINE = re.compile(
    r"^(\S+ \S+) \[scrapy_politeness\.middleware\] INFO: Politeness: (\d+) waiting in the "
    r"scheduler.*; 1 host at its ceiling holds the end: slow\.farm\.test "
    r"\(2s interval, (\d+) left, ~([\dms.]+)\)$", re.M)
REPORT_ROW = re.compile(r"^  slow\.farm\.test: the only host with requests waiting for "
                        r"([\d.]+)s; 8 requests waited .*; interval 2s, at its ceiling; "
                        r"backoffs 5xx:8$", re.M)


def _seconds(text: str) -> float:
    minutes, _, seconds = text.rpartition("m")
    return float(minutes or 0) * 60 + float(seconds.rstrip("s"))


def test_the_host_at_its_ceiling_is_named_with_the_time_it_holds_the_crawl(
        farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        "fast.farm.test": {"ip": "127.0.0.2", "pages": FAST},
        "slow.farm.test": {"ip": "127.0.0.3", "pages": SLOW, "kind": "always_503"}}}
    farm = farm_factory(spec)
    urls = [farm.url(h, f"/p/{n}") for h, pages in (("fast.farm.test", FAST),
                                                     ("slow.farm.test", SLOW))
            for n in range(pages)]
    result = run_crawl(urls, farm_settings(
        farm, POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3, POLITENESS_CEILING=CEILING,
        POLITENESS_BACKOFF=100.0, POLITENESS_DEAD_AFTER=50, POLITENESS_LOG_INTERVAL=1.0,
        POLITENESS_REPORT_STAT=True, RETRY_ENABLED=False), follow=False)
    arrivals = farm.arrivals()
    slow = [a for a in arrivals if a.host == "slow.farm.test"]
    fast = [a for a in arrivals if a.host == "fast.farm.test"]
    assert (len(slow), len(fast)) == (SLOW, FAST)

    # The live line: the slow host holds the end; what it says is left, the farm then saw.
    lines = LINE.findall(result.log)
    assert len(lines) >= 5, result.log[-4000:]
    for stamp, _queued, left, tail in lines:
        second = time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))  # log: local time
        # released before the line (logged before second + 1), it arrives within 0.5 s
        after = [a for a in slow if a.wall >= second + 1.5]
        from_then = [a for a in slow if a.wall >= second]
        assert len(after) <= int(left) <= len(from_then), (stamp, left)
        # its next turn within one interval, then one interval per request after it
        assert (int(left) - 1) * CEILING - 0.05 <= _seconds(tail) <= int(left) * CEILING + 0.05

    # The report: first, with the time the crawl ran for it alone, as the farm saw it.
    row = ast.literal_eval(result.stat("politeness/report"))[0]
    assert (row["host"], row["state"], row["requests"]) == ("slow.farm.test", "ceiling", SLOW)
    alone_server = slow[-1].t - fast[-1].t  # from the fast host's last start to the slow one's
    assert alone_server > 5 * CEILING - 0.1
    assert abs(row["alone"] - alone_server) <= 2 * TICK, (row, alone_server)
    (said,) = REPORT_ROW.findall(result.log)
    assert float(said) == pytest.approx(row["alone"], abs=0.05)
    # Its requests waited in the scheduler, not the gate: 0 + 2 + 4 + ... + 14 s.
    waits_server = sum(a.t - slow[0].t for a in slow)
    assert row["scheduler_wait"] + row["waited"] == pytest.approx(waits_server, abs=1.0)
    assert row["scheduler_wait"] > 10 * row["waited"]
    assert result.stat("politeness/scheduler_wait_seconds") >= row["scheduler_wait"]
