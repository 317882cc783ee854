"""The robots.txt prefetch keeps netlocs, not requests, and a bounded memory of them.

The real prefetcher on a real Crawler; its robots middleware is a stand-in and
its fetch slots are full, so what is scheduled waits in it. No crawl, no clock.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_politeness.scheduler import robots_prefetch
from scrapy_politeness.scheduler.robots_prefetch import RobotsPrefetch


def _prefetch() -> RobotsPrefetch:
    crawler = get_crawler(settings_dict={"ROBOTSTXT_OBEY": True})
    prefetch = RobotsPrefetch(crawler, crawler.stats, limit=1)  # type: ignore[arg-type]
    prefetch._looked_up = True
    prefetch._robots = object()  # type: ignore[assignment]  # never asked: the slot is taken
    prefetch._tasks.add(object())  # type: ignore[arg-type]  # one fetch in flight: the limit
    return prefetch


def test_the_first_request_of_a_new_host_stays_with_the_scheduler() -> None:
    """What waits for a fetch slot is the netloc: the scheduled Request itself
    is not kept (it belongs to the scheduler: on disk under JOBDIR)."""
    prefetch = _prefetch()
    request = Request("https://a.test:8443/page?q=1")
    alive = weakref.ref(request)
    prefetch.scheduled(request)
    del request
    gc.collect()
    assert alive() is None
    assert list(prefetch._pending) == ["https://a.test:8443"]


def test_a_request_with_its_own_user_agent_is_kept_for_its_crawl_delay_rule() -> None:
    prefetch = _prefetch()
    request = Request("http://b.test/", headers={"User-Agent": "mybot"})
    prefetch.scheduled(request)
    assert list(prefetch._pending) == [request]


def test_the_seen_netlocs_are_bounded_and_forgotten_half_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(robots_prefetch, "SEEN_MAX", 10)
    prefetch = _prefetch()
    for i in range(25):
        prefetch.scheduled(Request(f"http://h{i}.test/"))
    assert len(prefetch._seen) + len(prefetch._older) <= 10
    waiting = len(prefetch._pending)
    for i in range(20, 25):  # the newest are still known: not queued again
        prefetch.scheduled(Request(f"http://h{i}.test/"))
    assert len(prefetch._pending) == waiting
    prefetch.scheduled(Request("http://h0.test/"))  # long forgotten: queued again
    assert len(prefetch._pending) == waiting + 1


def test_past_pending_max_a_host_fetches_robots_the_usual_way(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(robots_prefetch, "PENDING_MAX", 3)
    prefetch = _prefetch()
    for i in range(5):
        prefetch.scheduled(Request(f"http://p{i}.test/"))
    assert len(prefetch._pending) == 3
    stats: Any = prefetch.stats
    assert stats.get_value("politeness/robots/not_prefetched") == 2
