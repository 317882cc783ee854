"""A frontier-booked request that goes late is put in force before it goes (fake clock).

``put_late_in_force`` trusts a start in force only if its bytes leave within
what the script was told (``starts_in``): a reply that reaches a busy loop
later (a fleet starting: 200-300 ms) puts it in force again from there, and
after ``GO_LATE_TRIES`` slow replies the request is booked afresh. A request
whose sleep until its booked start resumes late is late the same way.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import pytest_twisted
from fakeclock import run_at_once
from twisted.internet.defer import Deferred

from scrapy_politeness.distributed import booking as booking_module
from scrapy_politeness.distributed.booking import (
    GO_LATE_TRIES,
    Booking,
    put_late_in_force,
    start_as_booked,
)
from scrapy_politeness.policy import Config, HostState, Release

LAG, RTT, MARGIN = 0.001, 0.002, 0.01


class Clock:
    """The event loop's clock, moved by hand."""

    def __init__(self) -> None:
        self.t = 100.0

    def time(self) -> float:
        return self.t


class Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count


class Slip:
    lag, margin = LAG, MARGIN


class Shared:
    """``SharedSync.go_late`` whose replies take ``trips`` seconds each."""

    def __init__(self, clock: Clock, trips: list[float]) -> None:
        self.clock, self.trips = clock, trips
        self.slip, self.rtt = Slip(), RTT
        self.calls: list[tuple[float, float, float]] = []

    async def go_late(self, dispatch: Any, state: Any, server_at: float, booked_slip: float,
                      starts_in: float) -> float | None:
        self.calls.append((server_at, booked_slip, starts_in))
        ran = self.clock.t  # the script runs at once; its reply reaches the loop later
        self.clock.t += self.trips.pop(0)
        return 5000.0 + ran + starts_in  # the start in force, the server's clock


def _late(trips: list[float]) -> tuple[Release[Any] | None, Shared, Stats]:
    clock, stats = Clock(), Stats()
    shared = Shared(clock, trips)
    booking = Booking(at=clock.t - 0.03, booked_slip=0.005, server_at=5000.0 + clock.t - 0.03)
    at_booked = Release(None, "a.test", "127.0.0.2", 0.3, clock.t)
    out = run_at_once(put_late_in_force(booking, at_booked, HostState(Config(), 0.3),
                                shared=shared, stats=stats,  # type: ignore[arg-type]
                                loop=clock))  # type: ignore[arg-type]
    return out, shared, stats


def test_a_prompt_reply_sends_at_once() -> None:
    out, shared, stats = _late([0.001])
    assert out is not None
    assert out.at == 100.001
    assert len(shared.calls) == 1
    assert stats.values == {"politeness/shared/late_starts": 1, "politeness/frontier/sent_late": 1}


def test_a_reply_later_than_the_start_in_force_puts_it_in_force_again() -> None:
    out, shared, stats = _late([0.2, 0.001])
    assert out is not None
    assert out.at == pytest.approx(100.201)
    (_, slip0, in0), (again_at, slip1, in1) = shared.calls
    assert (slip0, in0) == (0.005, 2 * LAG + RTT)
    # From the start the first call put in force, with the delay it just saw.
    assert again_at == 5000.0 + 100.0 + in0
    assert slip1 == 0.0
    assert in1 >= 0.2
    assert stats.values["politeness/frontier/late_again"] == 1
    assert stats.values["politeness/frontier/sent_late"] == 1
    # A loop that stays as slow: the second call allowed for it, so it goes.
    out, shared, stats = _late([0.2, 0.2])
    assert out is not None
    assert len(shared.calls) == 2


def test_replies_later_every_time_book_it_afresh() -> None:
    out, shared, stats = _late([0.2 * 2 ** i for i in range(GO_LATE_TRIES)])
    assert out is None
    assert len(shared.calls) == GO_LATE_TRIES
    assert stats.values["politeness/frontier/rebooked"] == 1
    assert "politeness/frontier/sent_late" not in stats.values


def _on_time(monkeypatch: pytest.MonkeyPatch, late: float) -> tuple[Release[Any] | None, Stats]:
    """A request handed out 1 ms before its booked start; its sleep resumes ``late``."""
    loop, stats = Clock(), Stats()

    async def sleep(delay: float) -> None:
        loop.t += delay + late

    monkeypatch.setattr(booking_module.asyncio, "sleep", sleep)
    booking = Booking(at=loop.t + 0.001, booked_slip=0.005, server_at=5000.0)
    release = Release(None, "a.test", "127.0.0.2", 0.3, loop.t)
    out = run_at_once(start_as_booked(booking, release, loop,  # type: ignore[arg-type]
                              shared=True, margin=MARGIN, late_ok=0.125,
                              stats=stats))  # type: ignore[arg-type]
    return out, stats


def test_a_sleep_that_resumes_late_goes_as_a_late_start(monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = _on_time(monkeypatch, 0.0)
    assert out is not None
    assert out.at == 100.001  # on time: at its booked start
    out, _ = _on_time(monkeypatch, 0.05)  # 50 ms late: its real start (the caller's go_late)
    assert out is not None
    assert out.at == pytest.approx(100.051)
    out, stats = _on_time(monkeypatch, 0.6)  # 600 ms late (seen as a fleet starts): afresh
    assert out is None
    assert stats.values == {"politeness/frontier/rebooked": 1}


@pytest_twisted.ensureDeferred
async def test_the_close_ends_a_sleep_towards_a_booked_start() -> None:
    """With the shared backend's sleeps, a request asleep towards its booked start
    (10 s away) leaves with IgnoreRequest as soon as the crawl's close drops them."""
    from scrapy.exceptions import IgnoreRequest

    from scrapy_politeness.distributed.sleeps import Sleeps

    loop = asyncio.get_running_loop()
    sleeps = Sleeps()
    booking = Booking(at=loop.time() + 10.0, booked_slip=0.005, server_at=5000.0)
    release = Release(None, "a.test", "127.0.0.2", 0.3, loop.time())
    loop.call_soon(sleeps.drop, "shutdown")
    asleep = asyncio.ensure_future(asyncio.wait_for(start_as_booked(
        booking, release, loop, shared=True, margin=MARGIN, late_ok=0.125,
        stats=Stats(), sleeps=sleeps), 5.0))  # type: ignore[arg-type]
    with pytest.raises(IgnoreRequest):
        await Deferred.fromFuture(asleep)
    assert len(sleeps) == 0
