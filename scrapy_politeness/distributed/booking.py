"""The meta marker by which the scrapy-redis frontier tells the middleware a
request's start is already booked on the shared buckets.

The frontier's pop books the host and IP buckets in the same Redis script that
picks the request (:mod:`scrapy_politeness.distributed.frontier`); booking again in the
middleware would spend the budget twice. The local gate still enforces.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any, NamedTuple

from scrapy_politeness.downloader.dispatch import LEAD, Dispatch, late_allowance
from scrapy_politeness.policy import Release

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.distributed.sleeps import Sleeps
    from scrapy_politeness.distributed.sync import SharedSync
    from scrapy_politeness.policy import HostState


__all__ = ["BOOKED_META", "LEAD", "Booking", "booked_start", "late_allowance", "put_late_in_force",
           "start_as_booked"]

BOOKED_META = "politeness_booked"
GO_LATE_TRIES = 3  # late starts put in force before the send, before booking afresh


class Booking(NamedTuple):
    """A start the frontier booked: ``at`` (event-loop clock) and how late a
    send after it the booking already spent for (``booked_slip``): a later send is
    reported to the shared buckets (``SendSlip``), as after a ``reserve``."""

    at: float
    booked_slip: float
    server_at: float | None = None  # the same start on the Redis server's clock
    # Where the pop spent the host and IP buckets (server's clock: server_at + the
    # slip it booked for); an answer sooner than that moves them back (SharedSync)
    server_spent: float = math.nan


def booked_start(request: Request, ip: str | None) -> Booking | None:
    """The start the frontier booked for this request, or None.

    None unless it booked the host and exactly the IP bucket ``ip`` (None: no
    IP bucket) the gate uses: a name that resolved differently since is
    booked by the middleware as usual. The value is
    ``{"ip": ..., "at": ..., "booked_slip": ..., "server_at": ..., "slip": ...}``.
    """
    booked = request.meta.get(BOOKED_META)
    if not isinstance(booked, dict) or booked.get("ip") != ip:
        return None
    at = booked.get("at")
    if not isinstance(at, (int, float)):
        return None
    booked_slip = booked.get("booked_slip")
    slip = float(booked_slip) if isinstance(booked_slip, (int, float)) else math.inf
    server_at = booked.get("server_at")
    if not isinstance(server_at, (int, float)):
        return Booking(float(at), slip)
    spent = booked.get("slip")
    return Booking(float(at), slip, float(server_at),
                   float(server_at) + spent if isinstance(spent, (int, float)) else math.nan)


async def start_as_booked(booking: Booking, release: Release[Any],
                          loop: asyncio.AbstractEventLoop, *, shared: bool, margin: float,
                          late_ok: float, stats: StatsCollector,
                          sleeps: Sleeps | None = None) -> Release[Any] | None:
    """Sleep until the start the frontier booked; the release at that start (at
    now when it is up to ``late_ok`` late: the caller puts the real start in
    force first), or None when it must be booked afresh. With ``sleeps`` (the
    shared backend's) the crawl's close ends the sleep (``IgnoreRequest``).

    A request that reached the middleware well after its booked start (DNS, a
    busy loop) would crowd the next booking if sent now: with a shared backend
    it is booked again (conservative), which spends one more slot.
    """
    now = loop.time()
    if booking.at > now:
        await (asyncio.sleep(booking.at - now) if sleeps is None
               else sleeps.sleep(loop, booking.at - now))
        now = loop.time()  # a busy loop resumes it late: as late as one that came late
    if shared and now > booking.at + margin:
        if now - booking.at > late_ok:
            stats.inc_value("politeness/frontier/rebooked")
            return None
        return Release(release.token, release.key, release.ip, release.interval, now)
    return Release(release.token, release.key, release.ip, release.interval, booking.at)


async def put_late_in_force(booking: Booking, at_booked: Release[Any], state: HostState, *,
                            shared: SharedSync, stats: StatsCollector,
                            loop: asyncio.AbstractEventLoop) -> Release[Any] | None:
    """A booked start that goes later than booked: the shared buckets move to the
    real start before the send (``SharedSync.go_late``: one round trip), so the
    news cannot race the other processes' next bookings (a fleet's first
    requests, on a busy loop); None when another process booked behind it
    meanwhile or Redis cannot say: the caller books it afresh.

    The script puts in force its own now + the expected slip; a reply that
    reaches a busy loop later than that (a fleet starting: 200-300 ms) would
    send the bytes after the start in force, as unannounced as before. So the
    start is put in force again from there, spaced by the delay just seen, up
    to ``GO_LATE_TRIES`` times; then it is booked afresh.
    """
    server_at, booked_slip = booking.server_at, booking.booked_slip
    if server_at is not None:
        stats.inc_value("politeness/shared/late_starts")
        dispatch = Dispatch(at_booked.key, booking.at, at_booked.ip)
        starts_in = 2.0 * shared.slip.lag + shared.rtt
        for _ in range(GO_LATE_TRIES):
            asked = loop.time()
            started = await shared.go_late(dispatch, state, server_at, booked_slip, starts_in)
            if started is None:
                break
            trip = loop.time() - asked  # a round trip: the next starts_in counts it
            if trip < 1.0:
                shared.rtt = max(trip, shared.rtt * 0.95)
            # In force from the script's now + starts_in: no sooner than asked +
            # starts_in here; the bytes leave about two loop lags after now.
            leaves = loop.time() + 2.0 * shared.slip.lag - asked
            if leaves <= starts_in + shared.slip.margin / 2:
                stats.inc_value("politeness/frontier/sent_late")
                return Release(at_booked.token, at_booked.key, at_booked.ip, at_booked.interval,
                               loop.time())
            stats.inc_value("politeness/frontier/late_again")
            server_at, booked_slip, starts_in = started, 0.0, leaves
    stats.inc_value("politeness/frontier/rebooked")
    return None
