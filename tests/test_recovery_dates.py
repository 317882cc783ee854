"""An HTTP-date Retry-After's pause, taken as exactly as the Date headers allow.

Dates have whole seconds. Measured from the 429's own Date, a pause ran until
up to a second after the instant the server named (0.5 s on average per
pause; the bench's ``-d`` cells were 3-4% slower than their ``-s`` twins). The
first arrival of each Date value bounds the server's clock from below; the
tightest of a few recent ones is within ms of it, and never above it.
"""

from __future__ import annotations

import asyncio
import math
import time
from email.utils import formatdate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.http import Request, Response
from scrapy.utils.test import get_crawler

from scrapy_politeness.downloader.send_lateness import Dispatch
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import ServerDates, note_date, retry_after_of, server_now

SERVER = 1_800_000_000.0  # the server's unix time at our monotonic 0


def _date(server_time: float) -> bytes:
    return formatdate(math.floor(server_time), usegmt=True).encode()


def test_the_pause_ends_at_the_named_instant_not_up_to_a_second_later() -> None:
    dates = None
    # 200s at our 0-2.69 s, the server's clock at SERVER + 0.3 + ours: the one at
    # 0.71 s comes 0.01 s after the server's second turned (SERVER + 1).
    for at in (0.0, 0.45, 0.71, 1.74, 2.69):
        dates = note_date(dates, _date(SERVER + 0.3 + at), at)
    now = 2.9  # a 429 at server time SERVER + 3.2: Retry-After SERVER + 6 (3.2 + 2, rounded up)
    header = formatdate(math.ceil(SERVER + 3.2 + 2), usegmt=True)
    own = retry_after_of([header], server_now(None, now, _date(SERVER + 3.2), 0.0))
    tight = retry_after_of([header], server_now(dates, now, _date(SERVER + 3.2), 0.0))
    assert own == pytest.approx(3.0)  # from the 429's own Date (SERVER + 3): 0.2 s too long
    assert tight is not None
    assert 2.8 <= tight <= 2.8 + 0.011  # SERVER + 6 is 2.8 s away


def test_only_the_first_arrival_of_a_date_counts() -> None:
    dates = ServerDates()
    dates.note(_date(SERVER + 0.01), 0.0)  # just after the second turned: a tight bound
    dates.note(_date(SERVER + 0.9), 0.89)  # the same Date later: a looser one, ignored
    assert dates.seen == [(_date(SERVER), 0.0)]
    assert dates.bound(1.0) == pytest.approx(SERVER + 1.0, abs=0.02)


def test_a_few_recent_dates_are_kept() -> None:
    dates = ServerDates()
    for s in range(20):
        dates.note(_date(SERVER + s), float(s))
    assert len(dates.seen) == ServerDates.KEEP
    assert dates.seen[-1] == (_date(SERVER + 19), 19.0)


def test_without_date_headers_our_own_clock_is_used() -> None:
    assert server_now(None, 5.0, None, 1234.5) == 1234.5
    dates = note_date(None, _date(SERVER), 0.0)
    assert server_now(dates, 5.0, None, 1234.5) == pytest.approx(SERVER + 5.0, abs=1e-3)


@settings(max_examples=200, deadline=None)
@given(st.floats(-5e4, 5e4), st.lists(st.tuples(st.floats(0.0, 3.0), st.floats(0.0, 0.5)),
                                      min_size=1, max_size=30), st.floats(0.0, 0.5))
def test_the_bound_never_runs_ahead_of_the_server(offset: float, steps: list[tuple[float, float]],
                                                  later: float) -> None:
    """Whatever the clocks' offset, the spacing of responses and their transit time
    (the Date is stamped before we see it), the bound never passes the server's clock."""
    dates = ServerDates()
    now = 0.0
    for gap, transit in steps:
        now += gap
        dates.note(_date(SERVER + offset + now - transit), now)
    now += later
    bound = dates.bound(now)
    assert bound is not None
    assert bound <= SERVER + offset + now + 1e-6


def test_the_middleware_measures_a_date_from_the_tightest_date_seen() -> None:
    """A 429 whose Date lags one seen just before (another backend of the host,
    or a second that turned in between): its Retry-After date is measured from
    the newer one, never from the older alone. Dates are kept from the host's
    first Retry-After on."""
    mw = PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_DNS_HOSTS_FILE": "", "POLITENESS_DEFAULT": 30.0}))
    loop = mw.loop = asyncio.new_event_loop()
    try:
        base = math.floor(SERVER)

        def answer(status: int, headers: dict[str, str]) -> None:
            request = Request("http://a.example/")
            mw._dispatched[request] = Dispatch("a.example", loop.time(), None)
            mw.process_response(request, Response(request.url, status=status,
                                                  request=request, headers=headers))

        answer(200, {"Date": formatdate(base - 5, usegmt=True)})
        assert mw.hosts.get("a.example").dates is None  # no pause asked yet: nothing kept
        answer(429, {"Date": formatdate(base - 4, usegmt=True), "Retry-After": "0"})
        answer(200, {"Date": formatdate(base + 1, usegmt=True)})
        start = loop.time()
        answer(429, {"Date": formatdate(base, usegmt=True),
                     "Retry-After": formatdate(base + 3, usegmt=True)})
        wait = mw.hosts.get("a.example").not_before - start
        assert 1.9 <= wait <= 2.0 + 1e-3  # 2 s from base + 1, not 3 s from base
    finally:
        loop.close()


def test_an_unreadable_date_does_not_bring_our_own_clock_back() -> None:
    """A server whose clock runs 100 s behind ours: once its Dates are known, a
    429 with a garbled Date still pauses until the instant it names (our wall
    clock, 100 s ahead, would put that instant in the past: no pause at all)."""
    mw = PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_DNS_HOSTS_FILE": "", "POLITENESS_DEFAULT": 30.0}))
    loop = mw.loop = asyncio.new_event_loop()
    try:
        behind = time.time() - 100.0 - loop.time()  # the server's unix time at our monotonic 0

        def answer(status: int, headers: dict[str, str]) -> None:
            request = Request("http://a.example/")
            mw._dispatched[request] = Dispatch("a.example", loop.time(), None)
            mw.process_response(request, Response(request.url, status=status,
                                                  request=request, headers=headers))

        answer(429, {"Date": _date(behind + loop.time()).decode(), "Retry-After": "0"})
        start = loop.time()
        answer(429, {"Date": "garbage",
                     "Retry-After": formatdate(math.ceil(behind + start + 10), usegmt=True)})
        wait = mw.hosts.get("a.example").not_before - start
        assert 9.0 <= wait <= 11.1
    finally:
        loop.close()
