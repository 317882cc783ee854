"""Per-request signals reach the plugin through one receiver each (downloader/signal_hub.py),
and a HostState's clamped intervals follow their inputs (policy/host_state.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydispatch.dispatcher import getAllReceivers
from scrapy import signals
from scrapy.signalmanager import SignalManager
from scrapy.utils.test import get_crawler

from scrapy_politeness.downloader.signal_hub import SignalHub
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Config, HostState
from scrapy_politeness.scheduler.handed_out import handed_out_for

PER_REQUEST = (signals.request_reached_downloader, signals.response_received,
               signals.headers_received, signals.response_downloaded,
               signals.request_left_downloader, signals.request_dropped)


def _receivers(manager: SignalManager, signal: object) -> list[Any]:
    return list(getAllReceivers(manager.sender, signal))


def test_handlers_of_one_signal_share_one_receiver_and_run_in_order() -> None:
    crawler = get_crawler()
    before = len(_receivers(crawler.signals, signals.response_received))
    hub = SignalHub.of(crawler)
    seen: list[tuple[str, Any]] = []
    hub.on(signals.response_received, lambda request, **kw: seen.append(("a", request)))
    hub.on(signals.response_received, lambda request, **kw: seen.append(("b", request)))
    assert SignalHub.of(crawler) is hub
    assert len(_receivers(crawler.signals, signals.response_received)) == before + 1
    crawler.signals.send_catch_log(signals.response_received, request=1, response=2, spider=3)
    assert seen == [("a", 1), ("b", 1)]


def test_an_error_in_one_handler_is_logged_and_the_others_still_run(
        caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler()
    hub = SignalHub.of(crawler)
    ran: list[int] = []

    def broken(**kw: Any) -> None:
        raise RuntimeError("boom")

    hub.on(signals.request_dropped, broken)
    hub.on(signals.request_dropped, lambda **kw: ran.append(1))
    with caplog.at_level(logging.ERROR):
        crawler.signals.send_catch_log(signals.request_dropped, request=1, spider=2)
    assert ran == [1]
    assert "boom" in caplog.text


def test_the_plugin_adds_at_most_one_receiver_to_each_per_request_signal() -> None:
    crawler = get_crawler(settings_dict={"POLITENESS_DNS_HOSTS_FILE": None})
    stock = {signal: len(_receivers(crawler.signals, signal)) for signal in PER_REQUEST}
    mw = PolitenessMiddleware.from_crawler(crawler)
    handed_out_for(crawler)  # the scheduler queues' counts of requests handed out
    assert mw.tickets.held == {}
    for signal in PER_REQUEST:
        assert len(_receivers(crawler.signals, signal)) - stock[signal] <= 1, signal


def test_the_clamped_interval_follows_its_inputs() -> None:
    state = HostState(Config(floor=0.5, default=1.0, ceiling=10.0), adaptive=1.0)
    assert (state.interval(), state.ip_interval()) == (1.0, 1.0)
    state.adaptive = 0.1
    assert (state.clamped, state.ip_clamped) == (0.5, 0.5)  # the floor
    state.crawl_delay = 3.0
    assert (state.clamped, state.ip_clamped) == (3.0, 0.5)  # a Crawl-delay is the host's alone
    state.adaptive = 20.0
    assert (state.clamped, state.ip_clamped) == (10.0, 10.0)  # the ceiling
    state.crawl_delay = 0.0
    assert state.interval() == 10.0
