"""A released request holds its buckets until the crawl sees it written, on a fake clock.

A broad crawl logged two hosts of one IP 0-200 ms apart (0.25 s asked): the
first request of the pair had been released, then waited more than the four
loop turns the stall correction counts (``policy/stalls.py``) before a long
turn, and was written only after it, when its IP's next host, released on
time, went out with it. Here the write is what the plugin's HTTP handler
reports (``WriteWatch``): until then the send leaves no sooner than any
instant it was found unwritten, so its IP's next host waits a spacing after
the write, however many turns passed. The gate, the driver, the sender and
the slip run for real; the loop is a fake one whose clock the test moves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fakeclock import Clock, run_at_once
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Release
from scrapy_politeness.policy.stalls import TURNS_TO_WIRE, Unwritten

SPACING = 0.25
IP = "127.0.0.2"


class _Handle:
    def __init__(self, loop: _Loop, at: float, fn: Callable[[], None]) -> None:
        self.at, self.fn, self.cancelled = at, fn, False
        loop.timers.append(self)

    def cancel(self) -> None:
        self.cancelled = True


class _Loop:
    """The calls the driver and the slip make of the event loop, on a moved clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.soon: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self.timers: list[_Handle] = []

    def time(self) -> float:
        return self.clock.now

    def call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        self.soon.append((fn, args))

    def call_at(self, at: float, fn: Callable[[], None]) -> _Handle:
        return _Handle(self, at, fn)

    def turn(self, took: float = 0.001) -> None:
        """One loop turn that ran ``took`` seconds: the callbacks queued before it."""
        self.clock.now += took
        ready, self.soon = self.soon, []
        for fn, args in ready:
            fn(*args)

    def run_until(self, end: float) -> None:
        """Run short turns and fire the timers due until ``end``, each on time."""
        while True:
            while self.soon:  # the turns queued: ticks run until nothing is recent
                self.turn(0.0001)
            due = [h for h in self.timers if not h.cancelled and h.at <= end]
            if not due:
                break
            handle = min(due, key=lambda h: h.at)
            self.timers.remove(handle)
            self.clock.now = max(self.clock.now, handle.at)
            handle.fn()
        self.clock.now = max(self.clock.now, end)


class _Token:
    """What the driver sets a release on (a future's two calls)."""

    def __init__(self) -> None:
        self.release: Release[Any] | None = None

    def done(self) -> bool:
        return self.release is not None

    def set_result(self, release: Release[Any]) -> None:
        self.release = release


def _crawl() -> tuple[PolitenessMiddleware, _Loop]:
    mw = PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_DNS_HOSTS_FILE": None, "POLITENESS_DEFAULT": SPACING,
        "POLITENESS_FLOOR": SPACING, "POLITENESS_IP_FLOOR": SPACING,
        "POLITENESS_SEND_MARGIN": 0.0, "POLITENESS_DNS_PIN": False}))
    loop = _Loop(Clock(100.0))
    mw.loop = loop  # type: ignore[assignment]
    mw.sender.writes.cover(["http"])  # what the plugin's HTTP handler does when it is built
    return mw, loop


def _ask(mw: PolitenessMiddleware, loop: _Loop, host: str) -> _Token:
    token = _Token()
    mw.gate.submit(host, IP, token, loop.time())
    mw.driver.pump()
    return token


def _send(mw: PolitenessMiddleware, loop: _Loop, token: _Token, host: str) -> Request:
    """The released request goes on its way, as the middleware sends it."""
    assert token.release is not None
    request = Request(f"http://{host}/")
    run_at_once(mw.sender.send(request, token.release, ip=IP, bucket=IP, hostname=host,
                               submitted=token.release.at, waited_in_gate=False,
                               loop=loop))  # type: ignore[arg-type]
    return request


def _released_at(mw: PolitenessMiddleware, loop: _Loop, token: _Token, end: float) -> float:
    loop.run_until(end)
    assert token.release is not None, "never released"
    return token.release.at


@pytest.mark.parametrize("turns", [TURNS_TO_WIRE + 1, 40])
def test_a_send_held_past_the_turn_count_spaces_its_ip_from_its_write(turns: int) -> None:
    mw, loop = _crawl()
    a = _ask(mw, loop, "a.test")
    request = _send(mw, loop, a, "a.test")
    for _ in range(turns):  # short turns: nothing is written yet (a queue, a connection)
        loop.turn(0.002)
        mw.driver.pump()
    loop.turn(1.5)  # then a long turn (a slow callback, a full collection)
    b = _ask(mw, loop, "b.test")  # A's IP was due 0.25 s after A's release
    assert b.release is None, "released while the request before it had not left"
    loop.turn(0.003)
    written = loop.time()
    mw.sender.written(request)  # the handler hands it its connection: written now
    assert _released_at(mw, loop, b, written + 2.0) >= written + SPACING


def test_a_release_whose_waiter_resumes_after_a_long_turn_holds_its_ip_until_then() -> None:
    """The gate released A to its waiting request, then a turn ran long before
    the request resumed to send it (the broad crawl: robots.txt released, sent
    a second later): B, on A's IP, is held until A has gone."""
    mw, loop = _crawl()
    a = _ask(mw, loop, "a.test")  # released; its waiter resumes in a later turn
    loop.turn(1.5)
    b = _ask(mw, loop, "b.test")
    assert b.release is None, "released while the request before it had not resumed"
    request = _send(mw, loop, a, "a.test")
    loop.turn(0.002)
    written = loop.time()
    mw.sender.written(request)
    assert _released_at(mw, loop, b, written + 2.0) >= written + SPACING


def test_a_send_written_at_once_keeps_the_usual_spacing() -> None:
    mw, loop = _crawl()
    a = _ask(mw, loop, "a.test")
    mw.sender.written(_send(mw, loop, a, "a.test"))
    loop.turn(0.001)
    b = _ask(mw, loop, "b.test")
    assert _released_at(mw, loop, b, 101.0) == pytest.approx(100.0 + SPACING, abs=0.005)


def test_a_send_that_failed_unwritten_holds_its_ip_no_longer() -> None:
    """A connection refused: nothing was written, and the ticket's end frees the IP."""
    mw, loop = _crawl()
    a = _ask(mw, loop, "a.test")
    request = _send(mw, loop, a, "a.test")
    loop.turn(0.4)
    mw.tickets.exception(request, ConnectionRefusedError())
    ended = loop.time()
    b = _ask(mw, loop, "b.test")
    # Spent at most up to the last instant it was found unwritten, not since.
    assert _released_at(mw, loop, b, 102.0) <= ended + SPACING + 0.01


def test_a_send_of_a_scheme_the_handler_does_not_download_is_not_held() -> None:
    mw, loop = _crawl()
    mw.sender.writes.schemes = frozenset()  # another handler: its writes are never seen
    a = _ask(mw, loop, "a.test")
    _send(mw, loop, a, "a.test")
    for _ in range(150):  # 0.3 s of short turns: written long ago, as far as the count knows
        loop.turn(0.002)
    b = _ask(mw, loop, "b.test")
    assert b.release is not None  # the turn count alone (as before): no write awaited


class _Send:
    def __init__(self) -> None:
        self.until = 0.0
        self.unwritten = False


def test_unwritten_moves_only_the_sends_still_unwritten_and_keeps_their_order() -> None:
    sends: Unwritten[_Send] = Unwritten()
    a, b, c = _Send(), _Send(), _Send()
    sends.add(a, 1.0)
    sends.add(b, 1.1)
    sends.add(c, 1.2)
    b.unwritten = False  # written
    assert not sends.due(1.0)  # nothing spent before 1.0
    assert sends.due(1.15)
    assert sends.overdue(1.15, 1.16) == [a]  # b forgotten, c not due yet
    assert a.until == 1.2  # kept behind c: spent as late (the caller spends at a.until)
    assert len(sends) == 2
    assert sends.overdue(2.0, 2.01) == [c, a]  # c was before a in the instants' order
    assert (c.until, a.until) == (2.01, 2.01)
    c.unwritten = a.unwritten = False
    assert not sends.due(3.0)
    assert len(sends) == 0


def test_unwritten_never_keeps_a_send_before_one_moved_later() -> None:
    sends: Unwritten[_Send] = Unwritten()
    a, b = _Send(), _Send()
    sends.add(a, 1.0)
    sends.overdue(1.5, 1.6)
    sends.add(b, 1.55)  # released after a was moved to 1.6: kept (and spent) at 1.6
    assert b.until == 1.6
