"""The real robots.txt prefetcher, paced by a queue: fake clock, stand-in robots middleware.

Each fetch is a Deferred the test fires; the queue is a stand-in that holds
hosts and says when their first page is due. What is judged: the fetches
started, never more ahead of the pages handed out than the pacing allows.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.utils.test import get_crawler
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from scrapy_politeness.scheduler import robots_prefetch
from scrapy_politeness.scheduler.heap_entries import HostEntry
from scrapy_politeness.scheduler.robots_prefetch import RobotsPrefetch


class _Robots:
    """Scrapy's robots middleware, as far as the prefetch asks it."""

    def __init__(self) -> None:
        self.fetches: dict[str, Deferred[Any]] = {}

    def robot_parser(self, request: Request) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        self.fetches[request.url] = d
        return d


def _setup(monkeypatch: pytest.MonkeyPatch, clock: list[float]) -> tuple[
        RobotsPrefetch, _Robots, list[str]]:
    monkeypatch.setattr(robots_prefetch, "PACE_FLOOR", 4)
    monkeypatch.setattr(robots_prefetch, "_now", lambda: clock[0])
    crawler = get_crawler(settings_dict={"ROBOTSTXT_OBEY": True, "CONCURRENT_REQUESTS": 2})
    prefetch = RobotsPrefetch(crawler, crawler.stats, limit=100)  # type: ignore[arg-type]
    robots = _Robots()
    prefetch._looked_up = True
    prefetch._robots = robots  # type: ignore[assignment]
    back: list[str] = []

    def on_done(key: str) -> float:  # the queue: the host is back, its page due in 1 s
        back.append(key)
        return clock[0] + 1.0

    prefetch.pace(on_done)
    return prefetch, robots, back


async def _turn() -> None:
    """A few turns of the event loop: the fetches' futures call back."""
    for _ in range(3):
        await deferLater(reactor, 0, lambda: None)  # type: ignore[arg-type]

def _schedule_held(prefetch: Any, n: int) -> bool:
    """Schedule hosts h0..h{n-1}, each held for its robots.txt; whether all were."""
    held = True
    for i in range(n):
        prefetch.scheduled(Request(f"http://h{i}.test/p"))
        host = HostEntry(f"h{i}.test", None)  # type: ignore[arg-type]
        host.hostname = f"h{i}.test"
        held = prefetch.hold(host) and held
    return held



@pytest_twisted.ensureDeferred
async def test_fetches_start_as_the_queue_hands_out_first_pages(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    prefetch, robots, back = _setup(monkeypatch, clock)
    hosts = {}
    for i in range(20):  # 20 new hosts scheduled at once: each held from its first request
        prefetch.scheduled(Request(f"http://h{i}.test/p"))
        host = hosts[f"h{i}.test"] = HostEntry(f"h{i}.test", None)  # type: ignore[arg-type]
        host.hostname = f"h{i}.test"
        assert prefetch.hold(host)
    assert len(robots.fetches) == 4  # the floor
    for d in list(robots.fetches.values()):
        d.callback(None)
    await _turn()
    assert back == [f"h{i}.test" for i in range(4)]
    assert len(robots.fetches) == 4  # 4 ahead, none of their pages handed out yet
    clock[0] += 1.0
    for i in range(3):  # the queue hands out three first pages
        assert not prefetch.hold(hosts[f"h{i}.test"], serving=True)
    # the target is now ceil(1.5 x 3 handed out) = 5 ahead, one is still: four more
    assert len(robots.fetches) == 4 + 4
    assert not prefetch.hold(hosts["h0.test"], serving=True)  # a second page: no more room
    assert len(robots.fetches) == 8
    assert prefetch.busy("h19.test")
    assert not prefetch.busy("h0.test")
    prefetch.close()


@pytest_twisted.ensureDeferred
async def test_a_host_never_served_does_not_stop_the_prefetch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    prefetch, robots, _ = _setup(monkeypatch, clock)
    _schedule_held(prefetch, 10)
    for d in list(robots.fetches.values()):
        d.callback(None)
    await _turn()
    assert len(robots.fetches) == 4
    clock[0] += 60.0  # their pages never handed out (the queue dropped them)
    prefetch.scheduled(Request("http://late.test/p"))  # anything that starts the prefetch
    assert len(robots.fetches) == 8
    prefetch.close()


@pytest_twisted.ensureDeferred
async def test_an_ask_the_queue_could_not_answer_starts_one_more_fetch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The downloader has room and no host is ready: the hosts waiting for their
    robots.txt are what it waits for, so one more fetch starts at each such ask."""
    clock = [100.0]
    prefetch, robots, _ = _setup(monkeypatch, clock)
    assert _schedule_held(prefetch, 10)
    assert len(robots.fetches) == 4  # the floor, all in flight
    prefetch.starved()
    prefetch.starved()
    assert len(robots.fetches) == 6
    for _ in range(10):  # never more than twice the pace's (the floor here)
        prefetch.starved()
    assert len(robots.fetches) == 8
    prefetch.close()
    prefetch.starved()  # closed: nothing starts
    assert len(robots.fetches) == 8
