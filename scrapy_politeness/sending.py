"""Send this request now: everything between the gate's release and the download.

One object owns a released request's way to the wire, so the way goes down
only, each part asked once and in turn: the start the scrapy-redis frontier
booked (:mod:`~scrapy_politeness.distributed.booking`), the shared buckets
(:class:`~scrapy_politeness.distributed.sync.SharedSync`: booked here, or a
booked start that went late put in force first), the local send lateness
(:class:`~scrapy_politeness.downloader.send_lateness.SendSlip`), the
observer, and the address the download is pinned to. It also opens the
request's slot ticket (a :class:`Dispatch` in ``held``) before anything can
wait, so a cancellation frees it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from scrapy_politeness.distributed.booking import (
    booked_start,
    put_late_in_force,
    start_as_booked,
)
from scrapy_politeness.downloader.dispatch import Dispatch, late_allowance
from scrapy_politeness.downloader.proxies import is_proxied
from scrapy_politeness.downloader.write_watch import WriteWatch

if TYPE_CHECKING:
    import asyncio

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.distributed.sync import SharedSync
    from scrapy_politeness.dns.cache import DnsCache
    from scrapy_politeness.downloader.dropped_hosts import DroppedHosts
    from scrapy_politeness.downloader.loop_lag import LoopMonitor
    from scrapy_politeness.downloader.send_lateness import SendSlip
    from scrapy_politeness.downloader.suspended_hosts import SuspendedHosts
    from scrapy_politeness.observe.observer import Observer
    from scrapy_politeness.policy import HostTable, IPTable, Release

__all__ = ["Sender"]

RESUME_LAG = 0.0005
"""A loop whose recent resume lag is above this (seconds) moves even a request
that did not wait in the gate to its estimated send."""


class Sender:
    """Sends each request the gate released (see the module doc)."""

    def __init__(self, *, hosts: HostTable, ips: IPTable, slip: SendSlip,
                 shared: SharedSync | None, dns: DnsCache, dns_pin: bool,
                 dropped: DroppedHosts, suspended: SuspendedHosts, observer: Observer,
                 loop_lag: LoopMonitor,
                 held: dict[Request, Dispatch], stats: StatsCollector, margin: float,
                 crawler: Crawler | None = None) -> None:
        self.hosts = hosts
        self.ips = ips
        self.slip = slip
        self.shared = shared
        self.dns = dns
        self.dns_pin = dns_pin
        self.dropped = dropped
        self.suspended = suspended
        self.observer = observer
        self.loop_lag = loop_lag
        self.held = held  # the slot tickets: request -> its dispatch
        self.stats = stats
        self.margin = margin
        # Where the plugin's HTTP handler tells each request's write (none: no crawler).
        self.writes = WriteWatch() if crawler is None else WriteWatch.of(crawler)
        self.writes.on_written = self.written

    async def send(self, request: Request, release: Release[Any], *, ip: str | None,
                   bucket: str | None, hostname: str, submitted: float,
                   waited_in_gate: bool, loop: asyncio.AbstractEventLoop) -> None:
        """Send ``request``, released by the gate (``release``) after it came at
        ``submitted``; ``ip`` its address, ``bucket`` its IP bucket (None: none)."""
        key = release.key
        release.unwritten = False  # resumed: its dispatch holds the buckets from here
        dispatch = self.held[request] = Dispatch(  # holds a slot
            key, release.at, ip, proxied=is_proxied(request))
        state = self.hosts.get(key)
        shared = self.shared
        booking = booked_start(request, bucket)  # by the scrapy-redis frontier's pop
        at_booked = None
        if booking is not None:  # that booking is the shared spend; a late send moves it first
            at_booked = await start_as_booked(
                booking, release, loop, shared=shared is not None, margin=self.margin,
                stats=self.stats, sleeps=None if shared is None else shared.sleeps,
                late_ok=late_allowance(
                    state, None if bucket is None else self.ips.spacing(bucket, state.ip_clamped)))
        # When the waiter resumed: its spend moves to the estimated send (SendSlip).
        resumed = (loop.time() if waited_in_gate else submitted
                   if self.slip.lag > RESUME_LAG else None)
        booked_slip = math.inf
        if at_booked is not None and shared is not None:
            assert booking is not None
            if at_booked.at > booking.at:  # late: in force on the shared buckets before it goes
                at_booked = await put_late_in_force(booking, at_booked, state, shared=shared,
                                                    stats=self.stats, loop=loop)
        if at_booked is not None:
            assert booking is not None
            release, booked_slip = at_booked, booking.booked_slip
            if at_booked.at == booking.at:  # as booked: a sooner answer may move the spend back
                dispatch.server_spent = booking.server_spent
            self.slip.spend_at_send(at_booked, loop.time())  # the local buckets: the real send
        elif shared is not None:
            release, booked_slip = await shared.reserve(
                release, state, loop, resumed=None if booking is not None else resumed)
            if state.dead:  # declared dead by another crawler while this one waited
                self.dropped.check(key, loop.time())  # raises: the caller frees its slot
        elif resumed is not None:
            self.slip.spend_at_send(release, resumed)
        dispatch.at, dispatch.booked_slip = release.at, booked_slip
        self.suspended.sent(key, state, release.at)  # a suspended host's probe holds the next
        now = loop.time()
        self.loop_lag.wake()
        dispatch.busy = self.loop_lag.busy(now)
        self.slip.sent(dispatch, now, state, watched=self.writes.watches(request))
        waited = release.at - submitted
        request.meta["politeness"] = {  # rounded: people read these (items, logs)
            "ip": ip, "key": key, "waited": round(waited, 6),
            "interval": round(release.interval, 6),
        }
        self.observer.dispatched(now, key, state, ip=ip, url=request.url, waited=waited,
                                 interval=release.interval)
        if self.dns_pin and ip is not None:
            self.dns.pin(hostname, ip)

    def written(self, request: Request) -> None:
        """The handler writes ``request`` to its connection now (:mod:`.write_watch`)."""
        dispatch = self.held.get(request)
        loop = self.slip.loop
        if dispatch is not None and loop is not None:
            self.slip.written(dispatch, loop.time())
