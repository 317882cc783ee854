"""A crawl closes when its work is done: nothing it will drop holds it open.

Requests the middleware fails or drops at once (a dead host's, a name known
not to resolve) used to wait in the scheduler queue for their host's pace, so
a crawl stayed open after its last fetch for as long as that pace times their
number (the default ceiling is 60 s a request). Each crawl here has a
``CLOSESPIDER_TIMEOUT`` far shorter than that tail: a crawl held open ends
``closespider_timeout``, one that closes when its work is done ends
``finished``. Server side, every healthy page is fetched.
"""

from __future__ import annotations

from typing import Any

import pytest
from crawling import farm_settings, run_crawl

pytestmark = pytest.mark.integration

PAGES = 8
LIMIT = 25  # CLOSESPIDER_TIMEOUT, seconds: well below the tails of the old behaviour


def _crawl(farm_factory: Any, other: dict[str, Any], **settings: Any) -> tuple[Any, Any]:
    spec = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        "ok.farm.test": {"ip": "127.0.0.2", "pages": PAGES},
        "other.farm.test": {"ip": "127.0.0.3", "pages": PAGES, **other}}}
    farm = farm_factory(spec)
    urls = [farm.url(h, f"/p/{n}") for n in range(PAGES) for h in spec["hosts"]]
    result = run_crawl(urls, farm_settings(
        farm, POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3, CLOSESPIDER_TIMEOUT=LIMIT,
        **settings), follow=False)
    return result, farm.arrivals()


def test_a_dead_host_adds_no_tail_with_the_default_ceiling(farm_factory: Any) -> None:
    """Its first 503 sends it to the default 60 s ceiling, and dead there."""
    result, arrivals = _crawl(farm_factory, {"kind": "always_503"},
                              POLITENESS_BACKOFF=200.0, POLITENESS_DEAD_AFTER=1,
                              POLITENESS_ON_CEILING="dead")
    assert result.stat("finish_reason") == "finished", result.log[-3000:]
    assert result.stat("politeness/dead_hosts") == 1
    assert [a.host for a in arrivals].count("other.farm.test") == 1
    assert result.stat("politeness/dropped/dead") == PAGES  # 7 pages and the 503's retry
    assert [a.host for a in arrivals].count("ok.farm.test") == PAGES


def test_a_name_that_does_not_resolve_adds_no_tail(farm_factory: Any) -> None:
    """Its host would be spaced 30 s apart: its requests and their retries fail at once."""
    result, arrivals = _crawl(farm_factory, {"dns": {"mode": "nxdomain"}},
                              POLITENESS_HOSTS={"other.farm.test": {"floor": 30.0,
                                                                    "default": 30.0}})
    assert result.stat("finish_reason") == "finished", result.log[-3000:]
    assert result.stat("politeness/dns/nxdomain") == PAGES * 3  # with 2 retries each
    assert [a.host for a in arrivals] == ["ok.farm.test"] * PAGES
