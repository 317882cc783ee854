"""Keeping the local buckets and a shared backend (Redis) in step.

One round trip books each start on the shared buckets (``reserve``) and one
folds each outcome in (``feedback``, in the background); every answer is
merged into the local tables (:func:`~scrapy_politeness.policy.merge_shared`),
so the local gate decides with what every process learnt.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import CloseSpider

from scrapy_politeness.distributed.base import LateStart
from scrapy_politeness.distributed.sleeps import Sleeps, SuspendedElsewhere
from scrapy_politeness.downloader.dispatch import STALL, Dispatch, late_allowance
from scrapy_politeness.policy import Release, Signal, merge_shared

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.distributed import SharedBackend, SharedHost
    from scrapy_politeness.downloader.send_lateness import SendSlip
    from scrapy_politeness.policy import HostState, HostTable

__all__ = ["SharedSync", "SuspendedElsewhere"]


@dataclass(slots=True)
class _WaitingLate:
    """A late start that waits to ride on its fetch's feedback, and the timer
    that reports it alone if the answer does not come in time."""

    dispatch: Dispatch
    arrived: float
    interval: float
    ip_spacing: float
    timer: asyncio.TimerHandle

logger = logging.getLogger("scrapy_politeness.middleware")


class SharedSync:
    """The shared backend seen from one crawler process.

    ``on_dead(key)`` is called when another process declared a host dead;
    ``on_change(key)`` when an answer changed a host's timing.
    """

    def __init__(self, backend: SharedBackend, hosts: HostTable, slip: SendSlip,
                 stats: StatsCollector, *, on_dead: Callable[[str], None],
                 on_change: Callable[[str], None]) -> None:
        self.backend = backend
        self.hosts = hosts
        self.slip = slip
        self.stats = stats
        self.loop: asyncio.AbstractEventLoop | None = None
        self.rtt = 0.0  # recent round trip (a decaying maximum)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._late: dict[int, _WaitingLate] = {}  # late starts waiting for their feedback
        self.sleeps = Sleeps()  # requests asleep towards their start: dropped at the close
        self._on_dead = on_dead
        self._on_change = on_change
        self.dead_after = hosts.dead_after  # the shared verdict; huge: never (suspend mode)
        # Suspend mode: (key, state, now) -> whether the merged state shows the host
        # suspended by another process (the suspension is then adopted here).
        self.suspended_elsewhere: Callable[[str, HostState, float], bool] | None = None
        slip.shared = self

    async def open(self) -> None:
        """Connect at spider open; a backend that cannot be used closes the spider."""
        try:
            await self.backend.open()
        except ConnectionError as exc:  # BackendUnavailable: unreachable or refused
            logger.error("politeness: the shared backend (POLITENESS_BACKEND) is "
                         "unreachable: %s", exc)
            raise CloseSpider("politeness_backend_unreachable") from exc
        except Exception as exc:  # it answered, with an error: say so
            logger.error("politeness: the shared backend (POLITENESS_BACKEND) failed "
                         "to start: %s", exc)
            raise CloseSpider("politeness_backend_error") from exc

    async def reserve(self, release: Release[Any], state: HostState,
                      loop: asyncio.AbstractEventLoop, *, resumed: float | None = None
                      ) -> tuple[Release[Any], float]:
        """Book the start on the shared buckets; sleep until it (``resumed``: when
        the request resumed after the gate released it, its local spend moved to
        the estimated send first; None: not moved).

        The booking is spent at start + slip: the reply reaches us up to one
        round trip after the server computed the start, and the send leaves
        about 2 x lag after we wake. Returns the release and how late a start
        (after ``release.at``) that booking allowed for. A host another process
        declared dead raises ``IgnoreRequest`` through ``on_dead``'s check.
        """
        if resumed is not None:
            self.slip.spend_at_send(release, resumed)
        ips = self.slip.ips  # ip_spacing: the decoupled IP model's own (None: coupled)
        while True:
            slip = 2.0 * self.slip.lag + self.rtt
            sent = loop.time()
            delay, shared = await self.backend.reserve(
                release.key, release.ip, state.config, crawl_delay=state.crawl_delay,
                slip=slip, ip_spacing=None if ips.coupled else ips.spacing(release.ip, 0.0))
            got = loop.time()
            rtt = got - sent
            if shared is None:  # the local fallback: the local buckets alone apply
                return release, math.inf
            if rtt < 1.0:  # a round trip, not a wait for a lost backend
                est = self.rtt * 0.95
                self.rtt = rtt if rtt > est else est
            if merge_shared(state, shared, got):  # declared dead by another crawler meanwhile
                self._on_dead(release.key)
            if (delay > STALL and self.suspended_elsewhere is not None
                    and self.suspended_elsewhere(release.key, state, got)):
                # Not asleep here until the probe: the request waits in the scheduler
                # queue, where a crawl left with suspended hosts only may close.
                raise SuspendedElsewhere(release.key)
            booked = got + delay
            # The booking counts locally at once: a request the local gate releases
            # meanwhile (a fallback after a loss) is spaced from it.
            self.slip.spend(state, release.ip, booked + slip)
            booking = Release(release.token, release.key, release.ip, state.interval(), booked)
            if delay > 0:
                self.stats.inc_value("politeness/shared/waits")
                await self.sleeps.sleep(loop, delay)
                if delay > STALL:  # booked ahead: a start reported late since may come first
                    rechecked = await self._wait_before_send(booking, state, loop, slip)
                    if rechecked is None:
                        # Redis was lost meanwhile (hold): a late start another process
                        # could not report may have overtaken the booking. Book again
                        # once Redis is back, behind whatever it knows then.
                        self.stats.inc_value("politeness/shared/rebooked_after_loss")
                        continue
                    booking = rechecked
                self.slip.spend_at_send(booking, loop.time())
            return booking, slip - rtt

    async def _wait_before_send(self, release: Release[Any], state: HostState,
                                loop: asyncio.AbstractEventLoop, slip: float
                                ) -> Release[Any] | None:
        """The release after the wait a late start or pause reported since its
        booking asks for; None when Redis cannot say (lost, in hold mode)."""
        extra = await self.backend.wait_before_send(release.key, release.ip, state.config,
                                                    slip=slip)
        if extra is None:
            return None
        if extra <= 0:
            return release
        now = loop.time()
        if extra > state.interval() and self.suspended_elsewhere is not None:
            # A pause reported since the booking, not a late start: a suspension? Judged on
            # the shared host now (merged at the booking, its ceiling streak may predate the trip).
            shared = await self.backend.peek(release.key, state.config)
            if shared is not None and merge_shared(state, shared, loop.time()):
                self._on_dead(release.key)
            if now + extra > state.not_before:
                state.not_before = now + extra
            if self.suspended_elsewhere(release.key, state, loop.time()):
                raise SuspendedElsewhere(release.key)
        self.stats.inc_value("politeness/shared/rechecked_waits")
        booked = now + extra
        state.gap += extra  # the fetch starts that much later than its booking said
        self.slip.spend(state, release.ip, booked + slip)
        # Its booking in Redis is now early: move it first, so a booking behind
        # it rechecks against its new start (the chain stops at the first
        # booking that was late enough already).
        self.late_start(Dispatch(release.key, booked, release.ip), state, -(extra + slip))
        await self.sleeps.sleep(loop, extra)
        return Release(release.token, release.key, release.ip, state.interval(), booked)

    def late_arrival(self, dispatch: Dispatch, state: HostState, arrived: float,
                     now: float) -> None:
        """The server read the request at ``arrived`` (its headers or a loop
        stall showed it), later than its booking allowed for. The correction rides on the fetch's
        own feedback (one round trip a request, not two) when the answer comes
        while the report can still land before the next start on these buckets
        can be booked (half the spacing, as a late booked send); else it goes
        alone then, or now."""
        waiting = self._late.get(id(dispatch))
        if waiting is not None:  # already waiting (a stall moved it): the later start
            if arrived > waiting.arrived:
                waiting.arrived = arrived
            return
        ips = self.slip.ips
        ip_spacing = None if dispatch.ip is None else ips.spacing(dispatch.ip, state.ip_interval())
        due = dispatch.at + late_allowance(state, ip_spacing) - self.rtt
        if self.loop is None or due <= now:
            self.late_start(dispatch, state, now - arrived)
            return
        timer = self.loop.call_later(due - now, self._late_due, dispatch)
        self._late[id(dispatch)] = _WaitingLate(dispatch, arrived, state.interval(),
                                                ips.spacing(dispatch.ip, state.ip_interval()),
                                                timer)

    def _late_due(self, dispatch: Dispatch) -> None:
        late = self._take_late(dispatch)
        if late is not None:
            self.stats.inc_value("politeness/shared/late_starts")
            self._spawn(self.backend.correct_start(dispatch.key, *late))

    def _take_late(self, dispatch: Dispatch) -> LateStart | None:
        """The late start ``dispatch`` still has to report, now (None: none)."""
        waiting = self._late.pop(id(dispatch), None)
        if waiting is None or self.loop is None:
            return None
        waiting.timer.cancel()
        return LateStart(dispatch.ip, self.loop.time() - waiting.arrived, waiting.interval,
                         waiting.ip_spacing)

    def late_start(self, dispatch: Dispatch, state: HostState, ago: float) -> None:
        """The shared booking allowed for less slip than this start took: move the
        shared buckets too, so other processes space from the real start."""
        self.stats.inc_value("politeness/shared/late_starts")
        self._spawn(self.backend.correct_start(
            dispatch.key, dispatch.ip, ago, state.interval(),
            self.slip.ips.spacing(dispatch.ip, state.ip_interval())))

    async def go_late(self, dispatch: Dispatch, state: HostState, server_at: float,
                      booked_slip: float, starts_in: float) -> float | None:
        """A start booked for ``dispatch.at`` (``server_at`` on the Redis server's
        clock) goes only now, its bytes ``starts_in`` s after the script runs: put it
        in force on the shared buckets before the send (the start in force, the
        server's clock), or None when another process booked behind it meanwhile
        or Redis cannot say: book it afresh. Reported after the send instead, the
        news raced the other processes' next bookings and lost on a busy loop."""
        spacing = self.slip.ips.spacing(dispatch.ip, state.ip_interval())
        try:
            return await self.backend.go_late(
                dispatch.key, dispatch.ip, server_at,
                booked_slip=booked_slip if booked_slip < 1.0 else 0.0,
                starts_in=starts_in, interval=state.interval(), ip_spacing=spacing)
        except ConnectionError:  # BackendUnavailable: the outage is logged once
            return None

    def set_crawl_delay(self, key: str, delay: float) -> None:
        self._spawn(self.backend.set_crawl_delay(key, delay))

    def feedback(self, dispatch: Dispatch, signal: Signal) -> None:
        """Fold the outcome into the shared host without holding the response
        (with the fetch's late start, if it still has one to report, else the
        sooner start its answer bounds: ``Dispatch.answer``)."""
        key = dispatch.key
        state = self.hosts.get(key)
        late = self._take_late(dispatch) if self._late else None
        if late is not None:
            self.stats.inc_value("politeness/shared/late_starts")
            self.stats.inc_value("politeness/shared/late_starts_with_feedback")
        task = self._spawn(self.backend.feedback(key, signal, state.config,
                                                 self.dead_after, gap=state.gap,
                                                 late=late, backlog=state.backlog,
                                                 early=None if late else dispatch.answer))
        task.add_done_callback(lambda t: self._feedback_done(key, t))

    def _feedback_done(self, key: str, task: asyncio.Task[SharedHost]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, ConnectionError):  # the backend logs an outage once
            logger.debug("politeness: shared feedback for %s lost: %r", key, exc)
            return
        if exc is not None:
            logger.warning("politeness: shared feedback for %s failed: %r", key, exc)
            return
        assert self.loop is not None
        state = self.hosts.get(key)
        now = self.loop.time()
        if merge_shared(state, task.result(), now):
            self._on_dead(key)
        if self.suspended_elsewhere is not None:
            self.suspended_elsewhere(key, state, now)
        self._on_change(key)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        assert self.loop is not None
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def abort_waiting(self, reason: str) -> None:
        """Closing: the requests waiting for the backend or asleep towards their start fail."""
        self.backend.abort_waiting()
        if dropped := self.sleeps.drop(reason):
            self.stats.inc_value("politeness/dropped/closing", dropped)

    async def close(self) -> None:
        """Report the late starts still waiting for an answer, let the last
        feedback land (2 s at most), then disconnect."""
        for waiting in list(self._late.values()):
            self._late_due(waiting.dispatch)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2.0)
        await self.backend.close()
