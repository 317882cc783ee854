"""A request waiting on the shared backend never holds the crawl's close (fast tier).

The CI hang (two processes on Redis, a host suspended by one of them): the
other process's request, booked a moment before the trip, learnt the
suspension's 120 s pause just before its send (``wait_before_send``). Judged
on the state merged at its booking (the ceiling streak one short of the
trip) it was not seen as a suspension and slept out the pause inside
``process_request``: its engine slot held, the crawl could neither close for
"only suspended hosts left" nor at ``CLOSESPIDER_TIMEOUT``. A fake backend
plays Redis' answers here, on the reactor's loop.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_twisted
from redis_server import aio
from scrapy.exceptions import IgnoreRequest

from scrapy_politeness.distributed.sync import SharedSync, SuspendedElsewhere
from scrapy_politeness.downloader.send_lateness import SendSlip
from scrapy_politeness.downloader.suspended_hosts import SuspendedHosts
from scrapy_politeness.policy import HostTable, IPTable, Release
from scrapy_politeness.policy.shared import SharedHost
from scrapy_politeness.settings import PolitenessSettings

SETTINGS = PolitenessSettings.from_settings({
    "POLITENESS_DEFAULT": 0.5, "POLITENESS_FLOOR": 0.5, "POLITENESS_CEILING": 2.0,
    "POLITENESS_IP_FLOOR": 0.5, "POLITENESS_DEAD_AFTER": 2,
    "POLITENESS_SUSPEND_COOLDOWN": 120.0, "POLITENESS_SUSPEND_MAX_COOLDOWN": 240.0})
PAUSE = 118.0  # what is left of the suspension's 120 s when the booked start comes
HANG = 5.0  # seconds: far beyond the few milliseconds each case takes, far below the pause


class _Stats:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] = self.values.get(key, start) + count

    def set_value(self, key: str, value: Any) -> None:
        self.values[key] = value

    def get_value(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


class _Backend:
    """Redis' answers in the race: booked at one fetch at the ceiling (streak 1),
    then the other process's second failure trips the breaker (streak 2) and
    shares a pause, which the booked request learns just before its send."""

    def __init__(self, delay: float, pause: float, streak_now: int) -> None:
        self.delay, self.pause, self.streak_now = delay, pause, streak_now
        self.peeks = self.rechecks = 0
        self.aborted = False

    async def reserve(self, key: str, ip: str | None, config: Any, **_: Any
                      ) -> tuple[float, SharedHost]:
        return self.delay, SharedHost(2.0, 0.0, 0.0, 0.0, 1, False)

    async def wait_before_send(self, key: str, ip: str | None, config: Any, *,
                               slip: float = 0.0) -> float:
        self.rechecks += 1
        return self.pause

    async def peek(self, key: str, config: Any) -> SharedHost:
        self.peeks += 1
        return SharedHost(2.0, 0.0, self.pause, 0.0, self.streak_now, False)

    async def correct_start(self, *args: Any) -> None:
        return None

    def abort_waiting(self) -> None:
        self.aborted = True


def _sync(backend: _Backend, *, suspend: bool = True
          ) -> tuple[SharedSync, HostTable, SuspendedHosts | None, _Stats]:
    stats = _Stats()
    hosts = HostTable(SETTINGS.config, dead_after=2)
    ips = IPTable(SETTINGS.config.ip_floor)
    sync = SharedSync(backend, hosts, SendSlip(hosts, ips), stats,  # type: ignore[arg-type]
                      on_dead=lambda key: None, on_change=lambda key: None)
    suspended = None
    if suspend:
        crawler = SimpleNamespace(stats=stats, settings={})
        driver = SimpleNamespace(retime=lambda key: None)
        suspended = SuspendedHosts(crawler, SETTINGS, driver, SimpleNamespace(),  # type: ignore[arg-type]
                                   sync)
    return sync, hosts, suspended, stats


async def _reserve(sync: SharedSync, hosts: HostTable) -> tuple[Release[Any], float]:
    loop = asyncio.get_running_loop()
    sync.loop = loop
    state = hosts.get("flaky.test")
    release: Release[Any] = Release(None, "flaky.test", None, 2.0, loop.time())
    return await asyncio.wait_for(sync.reserve(release, state, loop), HANG)


async def _asleep(sync: SharedSync, backend: _Backend) -> None:
    """Until a request is asleep in the long wait (the pause, once rechecked)."""
    async def poll() -> None:
        while not (len(sync.sleeps) and (backend.rechecks or backend.delay == PAUSE)):
            await asyncio.sleep(0.005)
    try:
        await asyncio.wait_for(poll(), HANG)
    except TimeoutError:
        raise AssertionError("no request asleep in a wait the close can end") from None


@pytest_twisted.ensureDeferred
async def test_a_suspension_learnt_before_the_send_sends_the_request_back_to_the_scheduler(
        ) -> None:
    """The pause is judged on the shared host as it is at the send (the trip's
    streak), so the suspension is adopted and the request leaves at once
    (``SuspendedElsewhere``: back to the scheduler, where a crawl left with
    suspended hosts only closes). Judged on the streak merged at the booking,
    it slept the 118 s out: ``wait_for`` times out."""
    backend = _Backend(delay=0.01, pause=PAUSE, streak_now=2)
    sync, hosts, suspended, stats = _sync(backend)
    with pytest.raises(SuspendedElsewhere):
        await aio(_reserve(sync, hosts))
    assert backend.peeks == 1
    assert suspended is not None
    assert "flaky.test" in suspended.breaker
    assert stats.get_value("politeness/suspended_elsewhere") == 1


@pytest_twisted.ensureDeferred
async def test_a_pause_that_is_no_suspension_is_still_waited_for() -> None:
    """A Retry-After pause another process learnt (the streak short of the trip)
    is not a suspension: the request waits for it, as before (here: until the
    crawl closes, which drops it)."""
    backend = _Backend(delay=0.01, pause=PAUSE, streak_now=1)
    sync, hosts, suspended, stats = _sync(backend)

    async def scenario() -> None:
        waiting = asyncio.ensure_future(_reserve(sync, hosts))
        await _asleep(sync, backend)  # towards the pause's end
        sync.abort_waiting("politeness: spider closing")
        with pytest.raises(IgnoreRequest):
            await waiting

    await aio(scenario())
    assert suspended is not None
    assert "flaky.test" not in suspended.breaker
    assert stats.get_value("politeness/shared/rechecked_waits") == 1


@pytest.mark.parametrize("where", ["booked start", "pause learnt since"])
@pytest_twisted.ensureDeferred
async def test_the_close_drops_a_request_asleep_in_a_shared_wait(where: str) -> None:
    """Scrapy's close waits for every request in progress, one asleep towards
    its shared start included: the close drops it at once (``IgnoreRequest``,
    counted with the gate's under ``dropped/closing``), and a request that
    reaches a shared wait after the close is dropped before it sleeps."""
    backend = (_Backend(delay=PAUSE, pause=0.0, streak_now=0) if where == "booked start"
               else _Backend(delay=0.01, pause=PAUSE, streak_now=0))
    sync, hosts, _, stats = _sync(backend, suspend=False)

    async def scenario() -> None:
        waiting = asyncio.ensure_future(_reserve(sync, hosts))
        await _asleep(sync, backend)
        sync.abort_waiting("politeness: spider closing")
        assert backend.aborted
        with pytest.raises(IgnoreRequest, match="spider closing"):
            await waiting
        assert not len(sync.sleeps)
        with pytest.raises(IgnoreRequest):
            await _reserve(sync, hosts)

    await aio(scenario())
    assert stats.get_value("politeness/dropped/closing") == 1
