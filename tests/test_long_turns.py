"""A long event-loop turn holds the requests released just before it.

A request's bytes are written a few loop turns after the gate released it
(``policy/stalls.py``). A turn that runs long (a full garbage collection, a
slow callback: 50-200 ms on a busy crawl) holds them, while the next request on
the same IP, released after the pause, leaves at once: the server saw both
together (the many-hosts benchmark, found with ``bench/wire_gaps.py``). These
tests make such a turn with ``time.sleep`` on a real event loop, with our own
callbacks running inside it (they used to hide the pause), and check that the
next request on the IP waits a full spacing after the turn's end.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

import pytest_twisted
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy.stalls import TURNS_TO_WIRE

SPACING = 0.1
PAUSE = 0.15
IP, OTHER_IP = "127.0.0.2", "127.0.0.3"


def _mw() -> PolitenessMiddleware:
    mw = PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_DNS_HOSTS_FILE": None, "POLITENESS_DEFAULT": SPACING,
        "POLITENESS_FLOOR": SPACING, "POLITENESS_IP_FLOOR": SPACING,
        "POLITENESS_SEND_MARGIN": 0.0}))
    for host, ip in (("a.test", IP), ("b.test", IP), ("c.test", OTHER_IP), ("w.test", IP),
                     ("x.test", OTHER_IP)):
        mw.dns._cache[host] = (ip, math.inf)
    return mw


def _finish(coro: Any) -> None:
    """Run a request through the middleware to its release, at once (it must not wait)."""
    try:
        coro.send(None)
    except StopIteration:
        return
    raise AssertionError("the request waited")


async def _b_after_a_long_turn(mw: PolitenessMiddleware, turns_after: int,
                               turns_before: int = 0) -> tuple[float, float]:
    """``a.test`` is released; ``1 + turns_before`` turns later a turn runs ``PAUSE``
    long with one of our callbacks before the pause (another IP's request);
    ``b.test`` (A's IP) asks ``turns_after`` turns after that one's start (0:
    inside it, after the pause). When the long turn ended, and when B was released."""
    loop = mw.loop = asyncio.get_running_loop()
    await mw.process_request(Request("http://a.test/"))
    for _ in range(turns_before):
        await asyncio.sleep(0)
    ended: list[float] = []

    def long_turn() -> None:
        _finish(mw.process_request(Request("http://c.test/")))
        time.sleep(PAUSE)  # a full collection, a slow callback
        ended.append(loop.time())

    loop.call_soon(long_turn)
    for _ in range(1 + turns_after):
        await asyncio.sleep(0)
    assert ended, "B asked before the long turn"
    await mw.process_request(Request("http://b.test/"))
    return ended[0], loop.time()


def _run(scenario: Callable[[], Any]) -> Any:
    from twisted.internet.defer import Deferred

    return Deferred.fromFuture(asyncio.ensure_future(scenario()))


@pytest_twisted.ensureDeferred
async def test_a_request_asking_inside_the_long_turn_waits_a_spacing_after_it() -> None:
    mw = _mw()
    ended, released = await _run(lambda: _b_after_a_long_turn(mw, 0))
    assert released >= ended + SPACING


@pytest_twisted.ensureDeferred
async def test_a_request_asking_in_the_turn_after_waits_a_spacing_after_it() -> None:
    mw = _mw()
    ended, released = await _run(lambda: _b_after_a_long_turn(mw, 1))
    assert released >= ended + SPACING


@pytest_twisted.ensureDeferred
async def test_the_last_turn_a_send_may_be_written_in_still_holds_it() -> None:
    mw = _mw()
    ended, released = await _run(lambda: _b_after_a_long_turn(mw, 0, TURNS_TO_WIRE - 1))
    assert released >= ended + SPACING


@pytest_twisted.ensureDeferred
async def test_a_waiter_released_with_the_first_send_of_a_chain_is_held_as_long() -> None:
    """One pump releases a waiting request W (it resumes next turn) and a request X
    that goes at once (its send starts the ticks). W resumes, and sends, before
    the first tick: its send must count from that turn, so a long turn
    ``TURNS_TO_WIRE`` turns later still holds it, and B (W's IP) waits after it."""
    mw = _mw()

    async def scenario() -> tuple[float, float]:
        loop = mw.loop = asyncio.get_running_loop()
        mw.ips.spend(IP, loop.time(), SPACING)  # W's IP is busy: W waits in the gate
        w = asyncio.ensure_future(mw.process_request(Request("http://w.test/")))
        await asyncio.sleep(0)
        assert not w.done()
        ended: list[float] = []
        asked: list[asyncio.Future[None]] = []

        def long_turn() -> None:
            time.sleep(PAUSE)
            ended.append(loop.time())
            asked.append(asyncio.ensure_future(mw.process_request(Request("http://b.test/"))))

        def later(turns: int) -> None:
            if turns:
                loop.call_soon(later, turns - 1)
            else:
                long_turn()

        def first_turn() -> None:
            time.sleep(SPACING + 0.02)  # W is due now, but its timer has not run yet
            _finish(mw.process_request(Request("http://x.test/")))  # this pump releases W too
            # W sends in the next turn; the long turn comes TURNS_TO_WIRE turns after that.
            loop.call_soon(later, TURNS_TO_WIRE)

        loop.call_soon(first_turn)
        await w
        while not asked:
            await asyncio.sleep(0)
        await asked[0]
        return ended[0], loop.time()

    ended, released = await _run(scenario)
    assert released >= ended + SPACING


@pytest_twisted.ensureDeferred
async def test_a_send_already_written_is_not_moved_by_a_later_long_turn() -> None:
    """A request's bytes are out ``TURNS_TO_WIRE`` turns after its release (one more
    for the turn that started the ticks): a long turn then holds nothing, and B,
    due a spacing after A, goes at once."""
    mw = _mw()

    async def scenario() -> None:
        loop = mw.loop = asyncio.get_running_loop()
        await mw.process_request(Request("http://a.test/"))
        a_at = mw.hosts.get("a.test").last_start
        for _ in range(TURNS_TO_WIRE + 2):
            await asyncio.sleep(0)
        time.sleep(PAUSE)
        assert loop.time() > a_at + SPACING
        _finish(mw.process_request(Request("http://b.test/")))

    await _run(scenario)
