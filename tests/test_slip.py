"""The send-slip correction of the middleware, on a fake clock.

``SendSlip.spend_at_send`` and ``SendSlip.headers_received`` are driven directly with
chosen instants: no event loop, no sleep.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_politeness.downloader.send_lateness import Dispatch as _Dispatch
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Release

IP = "127.0.0.2"


def _mw(**settings: Any) -> PolitenessMiddleware:
    return PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_SEND_MARGIN": 0.0, "POLITENESS_DNS_HOSTS_FILE": None, **settings}))


def test_slip_spends_the_ip_floor_when_the_host_interval_is_zero() -> None:
    mw = _mw(POLITENESS_DEFAULT=0.0, POLITENESS_FLOOR=0.0, POLITENESS_IP_FLOOR=0.5)
    state = mw.hosts.get("a.test")
    assert state.interval() == 0
    mw.slip.lag = 0.04  # a busy loop: the waiter resumed late
    mw.slip.spend_at_send(Release(object(), "a.test", IP, 0.0, 100.0), 100.05)
    # The real send is estimated at 100.05 + 2 x 0.05: the IP's next start is
    # the IP floor after it, not after the gate's release at 100.0.
    assert mw.ips.eligible_at(IP) >= 100.05 + 0.5
    assert state.last_start <= 100.0  # a 0 host interval spaces nothing: no wait added


def test_late_start_seen_at_headers_spends_the_ip_floor_when_the_host_interval_is_zero(
        ) -> None:
    mw = _mw(POLITENESS_DEFAULT=0.0, POLITENESS_FLOOR=0.0, POLITENESS_IP_FLOOR=0.5)
    mw.hosts.get("a.test")
    request = Request("http://a.test/")
    mw._dispatched[request] = _Dispatch("a.test", 100.0, IP)
    mw.ips.spend(IP, 100.0, 0.0)
    _loop_at(mw, 100.3)
    request.meta["download_latency"] = 0.2  # the handler started at 100.1, 0.1 s late
    mw._headers_received(request)
    assert mw.ips.eligible_at(IP) >= 100.1 + 0.5 - 1e-9


def _loop_at(mw: PolitenessMiddleware, now: float) -> None:
    mw.driver.loop = SimpleNamespace(time=lambda: now)  # type: ignore[assignment]


def test_a_first_byte_later_than_usual_counts_as_a_late_arrival() -> None:
    # The handler started at 100.086, but the host answers in 2 ms and the
    # headers came at 100.2: the bytes most likely reached the server at
    # about 100.198 (held by a busy machine after the handler started).
    mw = _mw(POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25)
    state = mw.hosts.get("a.test")
    state.latency = 0.002
    request = Request("http://a.test/")
    mw._dispatched[request] = _Dispatch("a.test", 100.0, IP)
    _loop_at(mw, 100.2)
    request.meta["download_latency"] = 0.114
    mw._headers_received(request)
    assert mw.ips.eligible_at(IP) >= 100.198 + 0.25 - 1e-9
    assert state.eligible_at() >= 100.198 + 0.25 - 1e-9


def test_a_loop_stall_moves_the_sends_it_held() -> None:
    mw = _mw(POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25)
    state = mw.hosts.get("a.test")
    state.last_start = 100.001
    mw.ips.spend(IP, 100.001, 0.25)
    dispatch = _Dispatch("a.test", 100.0, IP)
    mw.slip.recent.add(dispatch, mw.slip.turn)  # released at 100.0, in this turn
    mw.driver._timer_at = 100.008  # a gate timer was due here ...
    _loop_at(mw, 100.060)  # ... and fired 52 ms late: the loop stood still meanwhile
    mw.driver._on_timer()
    # The send it held left at 100.06 at the earliest: the next start on the IP
    # and of the host is spaced from there, not from the estimate.
    assert mw.ips.eligible_at(IP) >= 100.060 + 0.25
    assert state.eligible_at() >= 100.060 + 0.25


def test_a_timer_on_time_moves_nothing() -> None:
    mw = _mw(POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25)
    mw.hosts.get("a.test").last_start = 100.001
    mw.ips.spend(IP, 100.001, 0.25)
    mw.slip.recent.add(_Dispatch("a.test", 100.0, IP), mw.slip.turn)
    mw.driver._timer_at = 100.008
    _loop_at(mw, 100.009)
    mw.driver._on_timer()
    assert mw.ips.eligible_at(IP) == 100.001 + 0.25


def _sent(mw: PolitenessMiddleware, key: str) -> tuple[Request, Any]:
    """A request released at 100.0 whose waiter resumed at 100.001 on a loop lagging 3 ms."""
    state = mw.hosts.get(key)
    state.last_start = 100.0
    mw.ips.spend(IP, 100.0, state.ip_interval())
    mw.slip.lag = 0.003
    mw.slip.spend_at_send(Release(object(), key, IP, state.interval(), 100.0), 100.001)
    request = Request(f"http://{key}/")
    dispatch = mw._dispatched[request] = _Dispatch(key, 100.0, IP)
    mw.slip.sent(dispatch, 100.001, state)
    return request, state


def test_an_answer_within_the_margin_spaces_the_next_start_from_the_answer() -> None:
    # Spent at the estimate (about 100.007: the resume plus twice the lag); the
    # gate adds the 10 ms margin. The answer came at 100.006: the server read
    # the request before that, so 100.006 + 0.25 is already a full interval
    # after the start it saw, and sooner.
    mw = _mw(POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25,
             POLITENESS_SEND_MARGIN=0.01)
    request, state = _sent(mw, "a.test")
    retimed = _retimes(mw)
    assert state.last_start > 100.006
    state.latency = 0.004
    _loop_at(mw, 100.006)
    request.meta["download_latency"] = 0.004
    mw._headers_received(request)
    assert state.eligible_at() + 0.01 == pytest.approx(100.006 + 0.25)  # the gate adds 0.01
    assert mw.ips.eligible_at(IP) + 0.01 == pytest.approx(100.006 + 0.25)
    # The scheduler queue's estimates of this host were lower bounds no longer.
    assert retimed == ["a.test"]


def _retimes(mw: PolitenessMiddleware) -> list[str]:
    """The host keys re-timed from now on (what the scheduler queue hears)."""
    keys: list[str] = []
    mw.add_listener(keys.append)
    return keys


def test_a_bucket_spent_since_the_send_is_not_moved_back() -> None:
    mw = _mw(POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25,
             POLITENESS_SEND_MARGIN=0.01)
    request, state = _sent(mw, "a.test")
    mw.ips.spend(IP, 100.010, 0.25)  # another host on the IP started meanwhile
    state.last_start = 100.012  # and a stall moved this host's spend
    _loop_at(mw, 100.006)
    request.meta["download_latency"] = 0.004
    mw._headers_received(request)
    assert mw.ips.eligible_at(IP) == 100.010 + 0.25
    assert state.last_start == 100.012


def test_a_slow_answer_moves_nothing_back() -> None:
    """Headers 80 ms after the send: spacing from them would be later than the estimate."""
    mw = _mw(POLITENESS_DEFAULT=0.25, POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25,
             POLITENESS_SEND_MARGIN=0.01)
    request, state = _sent(mw, "a.test")
    retimed = _retimes(mw)
    spent, ip_next = state.last_start, mw.ips.eligible_at(IP)
    state.latency = 0.08
    _loop_at(mw, 100.081)
    request.meta["download_latency"] = 0.08
    mw._headers_received(request)
    assert state.last_start == spent
    assert mw.ips.eligible_at(IP) == ip_next
    assert retimed == []  # nothing moved back: nothing to re-time


def test_a_stall_does_not_inflate_the_slip_of_the_sends_after_it() -> None:
    """A waiter that resumed 150 ms late met a stall (a full collection), not a
    slow turn: the turn count moves what the stall held. The requests after it
    are spent at their resume plus twice a turn's lag (at most ``STALL``), not
    300 ms later: that held every IP's next start back after every collection."""
    from scrapy_politeness.downloader.send_lateness import STALL

    mw = _mw(POLITENESS_DEFAULT=0.1, POLITENESS_FLOOR=0.1, POLITENESS_IP_FLOOR=0.1)
    mw.hosts.get("a.test")
    mw.hosts.get("b.test")
    mw.slip.spend_at_send(Release(object(), "a.test", IP, 0.1, 100.0), 100.150)
    mw.slip.spend_at_send(Release(object(), "b.test", "127.0.0.3", 0.1, 100.4), 100.4)
    assert mw.slip.lag <= STALL
    assert mw.ips.eligible_at("127.0.0.3") <= 100.4 + 2 * STALL + 0.1


def test_a_proxied_answer_spaces_the_next_start_from_the_answer() -> None:
    """Behind a proxy the way there varies request by request: this one took
    70 ms to reach the site, its answer 20 ms to come back, while the host's
    usual latency is 50 ms. Counting the usual latency as the way back puts
    the read at 100.051, 19 ms before the site saw it; the answer bounds it."""
    mw = _mw(POLITENESS_DEFAULT=0.4, POLITENESS_FLOOR=0.4, POLITENESS_SEND_MARGIN=0.01)
    state = mw.hosts.get("a.test")
    state.latency = 0.05
    request = Request("http://a.test/", meta={"proxy": "http://127.0.0.9:8888"})
    dispatch = mw._dispatched[request] = _Dispatch("a.test", 100.0, None, proxied=True)
    mw.slip.sent(dispatch, 100.001, state)
    _loop_at(mw, 100.101)  # the site read it at 100.071; the headers came at 100.101
    request.meta["download_latency"] = 0.1
    mw._headers_received(request)
    assert state.eligible_at() + 0.01 >= 100.071 + 0.4  # the gate adds the 0.01 margin
    assert state.eligible_at() + 0.01 == pytest.approx(100.101 + 0.4)
