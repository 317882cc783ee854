"""The loop's turns, counted at its selector (``turns.py``), on the crawl's real loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest_twisted

from scrapy_politeness import turns


def _run(scenario: Callable[[], Any]) -> Any:
    """Run an asyncio coroutine on the reactor's loop (as a task: ``asyncio.sleep`` works)."""
    from twisted.internet.defer import Deferred

    return Deferred.fromFuture(asyncio.ensure_future(scenario()))


@contextmanager
def _listening(listener: Callable[[float, float], bool]) -> Iterator[turns.TurnClock]:
    clock = turns.attach(asyncio.get_running_loop())
    assert clock is not None
    clock.listeners.append(listener)
    try:
        yield clock
    finally:
        clock.listeners.remove(listener)


@contextmanager
def _recording() -> Iterator[list[float | None]]:
    """The timeouts the loop's real selector is called with, meanwhile."""
    selector = asyncio.get_running_loop()._selector.inner  # type: ignore[attr-defined]
    real = selector.select
    timeouts: list[float | None] = []

    def select(timeout: float | None = None) -> Any:
        timeouts.append(timeout)
        return real(timeout)

    selector.select = select
    try:
        yield timeouts
    finally:
        del selector.select


@pytest_twisted.ensureDeferred
async def test_one_clock_a_loop_counting_every_turn() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        clock = turns.attach(loop)
        assert clock is not None
        assert turns.attach(loop) is clock  # a second crawler on the loop shares it
        start = clock.turn
        for _ in range(3):
            await asyncio.sleep(0)
        assert clock.turn - start >= 3

    await _run(scenario)


@pytest_twisted.ensureDeferred
async def test_a_turn_is_timed_without_the_wait_for_io() -> None:
    """What a listener is told a turn took excludes the time the loop slept."""
    lengths: list[float] = []

    def listener(began: float, now: float) -> bool:
        lengths.append(now - began)
        return False

    async def scenario() -> None:
        with _listening(listener):
            await asyncio.sleep(0.2)

    await _run(scenario)
    assert lengths
    assert max(lengths) < 0.1  # the 0.2 s went by in select(), not in a turn


@pytest_twisted.ensureDeferred
async def test_work_a_listener_schedules_does_not_wait_for_the_next_event() -> None:
    """The loop picked its wait before the turn ended; a listener that schedules
    a callback then (a shared backend's report) makes it only poll."""
    ran: list[int] = []
    armed = [False]
    timeouts: list[float | None] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        def listener(began: float, now: float) -> bool:
            if armed[0]:
                armed[0] = False
                loop.call_soon(ran.append, 1)
                return True
            return False

        with _listening(listener), _recording() as seen:
            loop.call_later(0.01, armed.__setitem__, 0, True)
            await asyncio.sleep(0.3)  # the loop would sleep 0.29 s after the arming turn
        timeouts.extend(seen)

    await _run(scenario)
    assert ran
    assert 0 in timeouts  # the turn after the arming one only polled
    # Then it slept out the 0.3 s: that poll was the listener's.
    rest = [*timeouts[timeouts.index(0) + 1:], None]
    assert rest[0] is not None
    assert rest[0] > 0.1


def test_a_loop_without_a_selector_has_no_clock() -> None:
    class Loop:
        pass

    assert turns.attach(Loop()) is None  # type: ignore[arg-type]
