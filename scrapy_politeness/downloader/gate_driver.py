"""Runs the pure gate on the event loop: a future per waiting request, one timer.

The gate (:mod:`scrapy_politeness.policy.gate`) owns no clock; this driver
passes it the loop's time, arms a single timer at its next event, and turns
each release into the result of the waiting request's future.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest

from scrapy_politeness.policy import Gate, Release

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

__all__ = ["GateDriver", "Waiter"]

Waiter = asyncio.Future[Release[Any]]


class GateDriver:
    """The gate on the event loop, with listeners told when a host is re-timed.

    ``on_timer(expected, now)`` is called whenever the timer fires, so a late
    one can reveal a stalled loop, ``before_poll(now)`` before every look
    for releases, so a turn running long is seen before it releases anything,
    and ``on_release(release, now)`` with each release handed to a waiter, which
    sends it only once it resumes (see
    :class:`~scrapy_politeness.downloader.send_lateness.SendSlip`).
    """

    def __init__(self, gate: Gate[Waiter], stats: StatsCollector,
                 on_timer: Callable[[float, float], None],
                 before_poll: Callable[[float], None] | None = None,
                 on_release: Callable[[Release[Any], float], None] | None = None) -> None:
        self.gate = gate
        self.stats = stats
        self.loop: asyncio.AbstractEventLoop | None = None
        self.waiters: dict[Waiter, float] = {}  # oldest first
        self.closing = False
        self._on_timer_cb = on_timer
        self._before_poll = before_poll
        self._on_release = on_release  # a release handed to a waiter that resumes later
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._listeners: list[Callable[[str], None]] = []

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(key)`` whenever a host key is re-timed (the scheduler queue)."""
        self._listeners.append(listener)

    def retime(self, key: str) -> None:
        """``key``'s interval changed (feedback, Crawl-delay): re-time it everywhere."""
        self.gate.touch(key)
        for listener in self._listeners:
            listener(key)

    async def wait(self, key: str, ip: str | None, now: float) -> tuple[Release[Any], bool]:
        """Queue a request for ``key`` on ``ip``; its release, and whether it waited."""
        assert self.loop is not None
        fut: Waiter = self.loop.create_future()
        self.gate.submit(key, ip, fut, now)
        self.pump(now)
        if fut.done():
            return fut.result(), False
        self.waiters[fut] = now
        try:
            return await fut, True
        except BaseException:
            # Cancelled after the gate released it (the future holds a result the
            # task never resumed to take): that release's slot is freed here.
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                fut.result().unwritten = False  # never sent: it holds its buckets no longer
                self.done(key)
            raise
        finally:
            del self.waiters[fut]

    def done(self, key: str) -> None:
        """A released request of ``key`` finished; let the next one through."""
        self.gate.done(key)
        self.pump()

    def pump(self, now: float | None = None) -> None:
        assert self.loop is not None
        if now is None:
            now = self.loop.time()
        if self._before_poll is not None:
            self._before_poll(now)
        for release in self.gate.poll(now):
            fut = release.token
            if fut.done():  # its download was cancelled while it waited
                self.gate.done(release.key)
            else:
                release.token = None  # type: ignore[assignment]  # no future <-> release cycle
                fut.set_result(release)
                if self._on_release is not None:
                    self._on_release(release, now)
        self._arm()

    def _arm(self) -> None:
        at = self.gate.next_event()
        if at is None:
            return
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        assert self.loop is not None
        self._timer = self.loop.call_at(at, self._on_timer)
        self._timer_at = at

    def _on_timer(self) -> None:
        assert self.loop is not None
        now = self.loop.time()
        self._on_timer_cb(self._timer_at, now)
        self._timer = None
        self._timer_at = math.inf
        self.pump(now)

    def drop_host(self, key: str, reason: str, stat: str) -> None:
        """Fail every request of ``key`` waiting in the gate with ``IgnoreRequest``."""
        for fut in self.gate.drop_host(key):
            if not fut.done():
                self.stats.inc_value(stat)
                fut.set_exception(IgnoreRequest(reason))

    def close(self, reason: str) -> None:
        """Fail every waiting request; later arrivals are dropped at once."""
        self.closing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fut in self.gate.drain():
            if not fut.done():
                self.stats.inc_value("politeness/dropped/closing")
                fut.set_exception(IgnoreRequest(reason))
