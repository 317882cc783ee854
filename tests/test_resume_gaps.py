"""Pause and resume with JOBDIR keep every host AND IP gap, judged by the farm.

A backed-off host shares its IP with a healthy neighbour vhost. The first run
ends right after the sick host's last fetch, which pushed the shared IP's next
start 4 s away; the resumed run must honour that wait (the IP rule), the sick
host's own backed-off interval (the host rule) and the neighbour's interval,
counting the pause, on the server's clock. The IP rule judged is the coupled
model's (``POLITENESS_IP_MODEL = "coupled"``: a start spaces its IP by its
host's interval), the one under which a sick vhost pushes its IP at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crawling import farm_settings, run_crawl

from scrapy_politeness._sitefarm.gaps import starts_by, violations
from scrapy_politeness.jobdir import persistence

TOL = 0.015
IP = "127.0.0.2"
SICK, CALM = "sick.farm.test", "calm.farm.test"
SPEC = {"ips": [IP], "hosts": {
    SICK: {"ip": IP, "kind": "always_503", "pages": 4},
    CALM: {"ip": IP, "kind": "normal", "pages": 4},
}}


def _spacing(arrivals: list[Any]) -> list[tuple[float, float]]:
    """(start, spacing it imposed on the IP) per fetch of the first run.

    The interval is 1 s; every 503 of the sick host doubles its interval, and
    a start spaces the IP by the host's interval at that start: 1, 2, 4 s.
    """
    out, sick_seen = [], 0
    for a in sorted(arrivals, key=lambda a: a.t):
        if a.host == SICK:
            out.append((a.t, 2.0 ** sick_seen))
            sick_seen += 1
        else:
            out.append((a.t, 1.0))
    return out


def test_resume_keeps_host_and_ip_gaps_across_the_pause(farm_factory: Any,
                                                        tmp_path: Path) -> None:
    farm = farm_factory(SPEC)
    jobdir = tmp_path / "job"
    settings = farm_settings(farm, JOBDIR=str(jobdir), RETRY_ENABLED=False,
                             POLITENESS_DEFAULT=1.0, POLITENESS_FLOOR=1.0,
                             POLITENESS_IP_FLOOR=0.0, POLITENESS_IP_MODEL="coupled")
    first_urls = ([farm.url(SICK, f"/p/{i}") for i in range(3)]
                  + [farm.url(CALM, f"/p/{i}") for i in range(2)])
    run_crawl(first_urls, settings, follow=False)
    first = farm.arrivals()
    assert len(first) == 5
    saved = json.loads((jobdir / persistence.STATE_FILE).read_text())
    assert saved["hosts"][SICK]["adaptive"] == 8.0

    second_urls = [farm.url(CALM, "/p/2"), farm.url(CALM, "/p/3"), farm.url(SICK, "/p/3")]
    resumed = run_crawl(second_urls, settings, follow=False)
    both = farm.arrivals()
    second = both[len(first):]
    assert len(second) == 3

    # IP: the first start of the resumed run waits for every spacing the first run imposed.
    ip_free_at = max(t + gap for t, gap in _spacing(first))
    ip_first = min(a.t for a in second)
    sick_last = max(a.t for a in first if a.host == SICK)
    # Host: the sick host resumes at its backed-off 8 s; the neighbour at its 1 s.
    sick_gap = min(a.t for a in second if a.host == SICK) - sick_last
    calm_gap = (min(a.t for a in second if a.host == CALM)
                - max(a.t for a in first if a.host == CALM))
    print(f"\nacross the pause: IP {ip_first - sick_last:.3f}s after the sick "
          f"host's last fetch (needs 4.0), sick host {sick_gap:.3f}s (needs 8.0), "
          f"neighbour {calm_gap:.3f}s (needs 1.0)")
    assert ip_first >= ip_free_at - TOL, (ip_first, ip_free_at)
    assert sick_gap >= 8.0 - TOL
    assert calm_gap >= 1.0 - TOL
    # And no gap anywhere in the combined timeline is below the 1 s interval.
    for key, times in {**starts_by(both, lambda a: a.host),
                       **starts_by(both, lambda a: a.ip)}.items():
        assert not violations(times, required=1.0, tolerance=TOL), key
    assert resumed.stat("politeness/state/restored_ips") == 1
