"""Each request the gate let through frees its in-flight slot exactly once,
whatever ends it: the download's own signals, the plugin's hooks, a sweep of
Scrapy's downloader, a cancellation; and the watchdog frees a slot lost anyway.

No crawl: the middleware on the test reactor's loop, the gate on a fake clock.
The real crawls are in tests/test_slot_release.py.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_twisted
from scrapy import Request, signals
from scrapy.exceptions import DownloadTimeoutError, IgnoreRequest
from scrapy.http import Response
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from scrapy_politeness.distributed.booking import BOOKED_META
from scrapy_politeness.downloader.gate_driver import GateDriver
from scrapy_politeness.downloader.send_lateness import Dispatch
from scrapy_politeness.downloader.watchdog import Watchdog
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Config, Gate, HostTable, IPTable

HOST = "127.0.0.9"  # an IP literal: no DNS
URL = f"http://{HOST}/"


class _Stats:
    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] += count


def _middleware(**settings: Any) -> PolitenessMiddleware:
    base: dict[str, Any] = {"POLITENESS_DNS_HOSTS_FILE": "", "POLITENESS_DEFAULT": 0.5,
                            "POLITENESS_FLOOR": 0.5, "CONCURRENT_REQUESTS_PER_DOMAIN": 1}
    return PolitenessMiddleware.from_crawler(get_crawler(settings_dict={**base, **settings}))


def _count_done(mw: PolitenessMiddleware) -> Counter[str]:
    """Every slot freed (with or without feedback), by host key: a double release shows as 2."""
    frees: Counter[str] = Counter()
    real = mw.driver.done, mw.outcomes.feed

    def done(key: str) -> None:
        frees[key] += 1
        real[0](key)

    def feed(dispatch: Any, *args: Any) -> None:
        frees[dispatch.key] += 1
        real[1](dispatch, *args)

    mw.driver.done = done  # type: ignore[method-assign]
    mw.outcomes.feed = feed  # type: ignore[method-assign]
    return frees


async def _dispatch(mw: PolitenessMiddleware, url: str = URL) -> Request:
    request = Request(url)
    await mw.process_request(request)
    assert request in mw.tickets.held
    return request


def on_loop(test: Callable[[], Coroutine[Any, Any, None]],
            ) -> Callable[[], Coroutine[Any, Any, None]]:
    """Run an async test as a task of the reactor's asyncio loop (so it can sleep)."""

    @functools.wraps(test)
    async def run() -> None:
        await Deferred.fromFuture(asyncio.ensure_future(test()))

    return run


@pytest_twisted.ensureDeferred
@on_loop
async def test_a_booked_start_cancelled_mid_sleep_frees_its_slot() -> None:
    mw = _middleware()
    mw.loop = loop = asyncio.get_running_loop()
    bucket = mw.keys.ip_bucket(HOST)
    request = Request(URL, meta={BOOKED_META: {"ip": bucket, "at": loop.time() + 30.0}})
    task = asyncio.ensure_future(mw.process_request(request))
    for _ in range(20):  # to the booked start's sleep
        await asyncio.sleep(0)
    assert mw.gate.in_flight(HOST) == 1
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert mw.gate.in_flight(HOST) == 0
    assert mw.tickets.held == {}


@pytest_twisted.ensureDeferred
@on_loop
async def test_a_wait_cancelled_after_its_release_frees_the_slot() -> None:
    """The gate set the future's result, the task was cancelled before it resumed."""
    hosts = HostTable(Config(default=0.0, floor=0.0, ip_floor=0.0))
    gate: Gate[Any] = Gate(hosts, IPTable(0.0), max_in_flight=1)
    driver = GateDriver(gate, _Stats(), lambda expected, now: None)  # type: ignore[arg-type]
    driver.loop = loop = asyncio.get_running_loop()
    await driver.wait("h.test", None, loop.time())  # in flight at once
    second = asyncio.ensure_future(driver.wait("h.test", None, loop.time()))
    await asyncio.sleep(0)
    assert driver.waiters  # held by the cap
    driver.done("h.test")  # releases the second: its future has a result now
    assert gate.in_flight("h.test") == 1
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert gate.in_flight("h.test") == 0


@pytest_twisted.ensureDeferred
@on_loop
async def test_the_downloaded_signal_frees_once_and_feeds_back_once() -> None:
    mw = _middleware()
    mw.loop = asyncio.get_running_loop()
    done = _count_done(mw)
    request = await _dispatch(mw)
    response = Response(URL, status=503, request=request)
    mw.crawler.signals.send_catch_log(signals.response_downloaded, response=response,
                                      request=request, spider=None)
    mw.crawler.signals.send_catch_log(signals.request_left_downloader, request=request,
                                      spider=None)
    assert mw.process_response(request, response) is response
    assert done[HOST] == 1
    assert mw.stats.get_value("politeness/backoff/5xx") == 1
    assert mw.tickets.held == {}


@pytest_twisted.ensureDeferred
@on_loop
async def test_a_failed_download_is_fed_back_from_the_signal_once() -> None:
    """``request_left_downloader`` is sent from the ``finally`` of Scrapy's
    download: the exception on its way out is the outcome."""
    mw = _middleware()
    mw.loop = asyncio.get_running_loop()
    done = _count_done(mw)
    request = await _dispatch(mw)
    exc = DownloadTimeoutError("slow")
    with pytest.raises(DownloadTimeoutError):
        _download_failing(mw, request, exc)
    assert done[HOST] == 1
    mw.process_exception(request, exc)  # later, if no middleware above answered first
    assert done[HOST] == 1
    assert mw.stats.get_value("politeness/backoff/transport") == 1


@pytest_twisted.ensureDeferred
@on_loop
async def test_a_download_cancelled_frees_its_slot_with_no_outcome() -> None:
    mw = _middleware()
    mw.loop = asyncio.get_running_loop()
    done = _count_done(mw)
    request = await _dispatch(mw)
    with pytest.raises(asyncio.CancelledError):
        _download_failing(mw, request, asyncio.CancelledError())
    assert done[HOST] == 1
    assert mw.tickets.held == {}
    assert not [k for k in mw.stats.get_stats() if k.startswith("politeness/local")]


def _download_failing(mw: PolitenessMiddleware, request: Request,
                      exc: BaseException) -> None:
    """What Scrapy's ``Downloader._download`` does when its handler raises."""
    try:
        raise exc
    finally:
        mw.crawler.signals.send_catch_log(signals.request_left_downloader, request=request,
                                          spider=None)


@pytest_twisted.ensureDeferred
@on_loop
async def test_an_answer_from_above_frees_through_the_plugins_hooks() -> None:
    """No download happened (a middleware above answered in process_request)."""
    mw = _middleware()
    mw.loop = asyncio.get_running_loop()
    done = _count_done(mw)
    first, second = Request(URL), Request(f"{URL}2")
    mw.hosts.get(HOST)
    mw.tickets.hold(first, Dispatch(HOST, 0.0, HOST))
    mw.tickets.hold(second, Dispatch(HOST, 0.0, HOST))
    mw.process_exception(first, IgnoreRequest("above"))
    mw.process_response(second, Response(second.url, request=second))
    mw.process_exception(first, IgnoreRequest("again"))
    assert done[HOST] == 2


@pytest_twisted.ensureDeferred
@on_loop
async def test_the_sweep_frees_what_left_the_downloader_unreported() -> None:
    mw = _middleware()
    mw.loop = asyncio.get_running_loop()
    done = _count_done(mw)
    request = await _dispatch(mw)
    active = {request}  # Scrapy's downloader: Downloader.active
    mw.crawler.engine = SimpleNamespace(downloader=SimpleNamespace(active=active))  # type: ignore[assignment]
    assert mw.tickets.sweep() == 0
    active.clear()  # fetch ended: e.g. a middleware above returned a Request instead
    assert mw.tickets.sweep() == 1
    assert mw.tickets.sweep() == 0
    assert done[HOST] == 1
    assert mw.stats.get_value("politeness/released_unreported") == 1


# -- the watchdog, on a fake clock ---------------------------------------------------


def _wedged(live: Counter[str]) -> tuple[Watchdog, GateDriver, _Stats, Any]:
    """A host whose one slot was taken and never given back, one request behind it."""
    hosts = HostTable(Config(default=1.0, floor=1.0, ip_floor=0.0))
    gate: Gate[Any] = Gate(hosts, IPTable(0.0), max_in_flight=1)
    stats = _Stats()
    driver = GateDriver(gate, stats, lambda expected, now: None)  # type: ignore[arg-type]
    driver.loop = asyncio.new_event_loop()  # for futures and timers: never run
    first, second = driver.loop.create_future(), driver.loop.create_future()
    gate.submit("h.test", None, first, 0.0)
    driver.pump(0.0)
    assert first.done()  # released and never done: the lost slot
    gate.submit("h.test", None, second, 0.0)
    driver.waiters[second] = 0.0
    dog = Watchdog(gate, driver, hosts, stats, timeout=10.0,  # type: ignore[arg-type]
                   live=lambda: live)
    return dog, driver, stats, second


def test_the_watchdog_frees_a_lost_slot_once_with_a_warning(caplog: Any) -> None:
    dog, driver, stats, second = _wedged(Counter())
    try:
        assert dog.check(5.0) == []
        assert dog.check(10.9) == []  # interval 1 + timeout 10 not yet over
        with caplog.at_level("WARNING"):
            assert dog.check(12.0) == []  # a suspect: freed if still so at the next look
            assert not second.done()
            assert dog.check(12.5) == []  # once a second at most
            assert dog.check(13.0) == ["h.test"]
        assert second.done()  # the request behind it went
        assert stats.values["politeness/watchdog_released"] == 1
        assert [r.getMessage() for r in caplog.records if "h.test" in r.getMessage()]
        driver.waiters.pop(second)
        assert dog.check(20.0) == []
    finally:
        assert driver.loop is not None
        driver.loop.close()


def test_the_watchdog_leaves_a_host_whose_request_is_still_downloading() -> None:
    dog, driver, stats, second = _wedged(Counter({"h.test": 1}))
    try:
        assert dog.check(500.0) == []
        assert not second.done()
        assert stats.values["politeness/watchdog_released"] == 0
    finally:
        assert driver.loop is not None
        driver.loop.close()


def test_the_watchdog_ignores_a_slot_missing_at_one_look_only() -> None:
    """A release on its way to its request (one loop turn) is not a lost slot."""
    live: Counter[str] = Counter()
    dog, driver, stats, second = _wedged(live)
    try:
        assert dog.check(12.0) == []  # missing now...
        live["h.test"] = 1  # ...its request took it by the next look
        assert dog.check(13.0) == []
        live.clear()
        assert dog.check(14.0) == []  # a new suspect: two looks again
        assert stats.values["politeness/watchdog_released"] == 0
        assert not second.done()
    finally:
        assert driver.loop is not None
        driver.loop.close()
