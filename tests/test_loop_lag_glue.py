"""The crawl's own loop lag in the glue (downloader/loop_lag.py, slot_tickets.py,
send_lateness.py), driven with chosen instants: no event loop, no sleep."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from scrapy_politeness.downloader.loop_lag import LoopMonitor
from scrapy_politeness.downloader.send_lateness import Dispatch
from scrapy_politeness.middleware import PolitenessMiddleware

IP = "127.0.0.2"


def _mw(**settings: Any) -> PolitenessMiddleware:
    return PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_SEND_MARGIN": 0.0, "POLITENESS_DNS_HOSTS_FILE": None, **settings}))


def _at(mw: PolitenessMiddleware, now: float) -> None:
    mw.driver.loop = SimpleNamespace(time=lambda: now)  # type: ignore[assignment]


def _sent(mw: PolitenessMiddleware, at: float) -> tuple[Request, Dispatch]:
    request = Request("http://a.test/")
    dispatch = mw._dispatched[request] = Dispatch("a.test", at, IP)
    dispatch.cold = True
    dispatch.busy = mw.loop_lag.busy(at)
    return request, dispatch


def test_a_held_loop_is_no_set_up_of_the_ip_and_no_latency_of_the_server() -> None:
    mw = _mw(POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25)
    state = mw.hosts.get("a.test")
    state.latency = 0.002
    mw.loop_lag.lag.start(99.99)  # due at 100.0
    request, dispatch = _sent(mw, 100.0)
    # The loop was held from 100.0 to 100.2 (a heavy callback): the timer due at
    # 100.0 has not fired yet when the headers' callback runs at 100.205.
    _at(mw, 100.205)
    request.meta["download_latency"] = 0.204
    mw._headers_received(request)
    assert dispatch.loop_lag == pytest.approx(0.205 + 0.01)
    assert mw.slip.conns.setup_of(IP) == 0.0  # the hold explains the first byte's delay
    mw.process_response(request, Response("http://a.test/", status=200, request=request))
    assert state.latency == 0.002  # no sample: the loop explains it
    assert mw.stats.get_value("politeness/latency/loop_bound") == 1
    assert mw.stats.get_value("politeness/backoff/latency") is None


def test_an_idle_loop_leaves_the_latency_and_the_set_up_as_measured() -> None:
    mw = _mw(POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25)
    state = mw.hosts.get("a.test")
    state.latency = 0.002
    mw.loop_lag.lag.start(99.99)
    request, _ = _sent(mw, 99.995)
    mw.loop_lag.lag.fired(100.0)  # on time
    _at(mw, 100.005)
    request.meta["download_latency"] = 0.01  # 8 ms beyond the usual: a handshake
    mw._headers_received(request)
    assert mw.slip.conns.setup_of(IP) == pytest.approx(0.008)
    mw.process_response(request, Response("http://a.test/", status=200, request=request))
    assert state.latency == pytest.approx(0.3 * 0.01 + 0.7 * 0.002)


class _FakeLoop:
    """time() and call_at() on a clock the test moves."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.timers: list[tuple[float, Any]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, at: float, callback: Any) -> Any:
        self.timers.append((at, callback))
        return SimpleNamespace(cancel=lambda: None)


def test_the_monitor_sleeps_while_no_download_is_in_flight() -> None:
    held: dict[Any, Any] = {}
    monitor = LoopMonitor(lambda: held)
    loop = _FakeLoop(10.0)
    monitor.start(loop)  # type: ignore[arg-type]
    held["request"] = object()
    loop.now = loop.timers[-1][0]
    loop.timers[-1][1]()  # a download in flight: it fires again
    assert len(loop.timers) == 2
    held.clear()
    loop.now = loop.timers[-1][0]
    loop.timers[-1][1]()  # none: it sleeps
    assert len(loop.timers) == 2
    loop.now += 60.0
    before = monitor.busy(loop.now)
    monitor.wake()  # a send: measuring again, the idle minute not counted
    assert len(loop.timers) == 3
    assert monitor.busy(loop.now) == before == 0.0
    monitor.stop()
    monitor.wake()  # closed: stays asleep
    assert len(loop.timers) == 3
