"""Request.meta control (docs/reference/meta.md), in real crawls judged by the farm."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from crawling import farm_settings, run_crawl

from scrapy_politeness._sitefarm import violations
from scrapy_politeness.meta import bucket_of

TOL = 0.015


def test_meta_bucket_puts_two_hosts_in_one_bucket(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        "a.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 4},
        "b.farm.test": {"ip": "127.0.0.3", "kind": "normal", "pages": 4},
    }}
    farm = farm_factory(spec)
    urls = [farm.url(h, f"/p/{i}") for h in spec["hosts"] for i in range(4)]
    result = run_crawl(urls, farm_settings(farm, POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3),
                       follow=False, meta={"politeness_bucket": "Shared.Site."})
    starts = sorted(a.t for a in farm.arrivals())
    assert len(starts) == 8
    # Two hosts on two IPs, yet one bucket: every start 0.3 s after the previous one.
    assert not violations(starts, 0.3, TOL), [round(b - a, 3) for a, b in pairwise(starts)]
    assert result.stat("politeness/bucket_from_meta") == 8
    assert {i["ip"] for i in result.items} == {"127.0.0.2", "127.0.0.3"}  # IPs still real


def test_meta_bypass_lets_requests_through_ungated(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "a.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 6},
    }}
    farm = farm_factory(spec)
    urls = [farm.url("a.farm.test", f"/p/{i}") for i in range(6)]
    result = run_crawl(urls, farm_settings(farm, POLITENESS_DEFAULT=2.0, POLITENESS_FLOOR=2.0),
                       follow=False, meta={"politeness_bypass": True})
    starts = sorted(a.t for a in farm.arrivals())
    assert len(starts) == 6
    # At 2 s per start the gate would need 10 s; bypassed, nothing spaced them.
    assert violations(starts, 2.0, TOL)
    assert result.stat("politeness/bypassed") == 6
    assert result.stat("politeness/dispatched") == 0


@pytest.mark.parametrize("bad", ["", "  ", 7, ["a"]])
def test_a_bad_bucket_value_fails_naming_the_key(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"Request.meta\['politeness_bucket'\] must be"):
        bucket_of({"politeness_bucket": bad})
    assert bucket_of({"politeness_bucket": bad}, strict=False) is None
