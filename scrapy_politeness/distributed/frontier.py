"""A politeness-aware scrapy-redis queue: one frontier shared by N processes.

scrapy-redis's scheduler never reads ``SCHEDULER_PRIORITY_QUEUE``, so with it
requests would wait in the middleware's gate holding ``CONCURRENT_REQUESTS``,
and its priority queue pops equal-priority requests grouped by host
(head-of-line blocking across every process). :class:`PolitenessFrontierQueue`
(``SCHEDULER_QUEUE_CLASS``; the add-on sets it) keeps requests per host key in
Redis plus a shared index of when each host key becomes eligible. Its pop is
ONE Lua script that picks a request whose host and IP buckets are both
eligible now on the server's clock, and books both on the very keys the Redis
backend's ``reserve`` books, so no two processes hand out starts the budget
cannot take and no process idles while a host is ready. The request carries
:data:`~scrapy_politeness.distributed.booking.BOOKED_META`; the middleware then skips its
own booking and still enforces locally.

The IP: a push is synchronous and may come before the name is resolved. The
pushing process resolves it in the background and writes the host's IP
bucket to Redis (``<queue key>:ip:<host key>``, TTL ``_IP_TTL``) with its next
pop (:mod:`~scrapy_politeness.distributed.frontier_routes`); until then
the host is held up to ``_RESOLVE_HOLD``, after which it is handed out with
its host bucket booked only and the middleware books host and IP as usual.

Delivery is at-least-once: a popped request is leased to its process until
it ends, whatever ends it (:mod:`~scrapy_politeness.distributed.frontier_leases`;
acknowledged on the process's next pop or heartbeat).
A process whose heartbeat (on a pop or a timer, every ``_BEAT`` s) stops for
``_LEASE`` seconds has its leases put back by the next beat anywhere, so a
killed process loses nothing; a request it had sent but not finished may be
fetched a second time.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy_redis.queue import Base

from scrapy_politeness.distributed.booking import BOOKED_META, LEAD
from scrapy_politeness.distributed.frontier_feed import StartFeed
from scrapy_politeness.distributed.frontier_leases import LEASE_META, Leases
from scrapy_politeness.distributed.frontier_pushes import PendingPushes
from scrapy_politeness.distributed.frontier_routes import HostRoutes
from scrapy_politeness.distributed.lua_source import lua_source
from scrapy_politeness.scheduler.handed_out import gate_of
from scrapy_politeness.scheduler.queue import clock
from scrapy_politeness.scrapy_internals import wake_engine
from scrapy_politeness.settings import PolitenessSettings

if TYPE_CHECKING:
    from scrapy import Spider

    from scrapy_politeness.middleware import PolitenessMiddleware

__all__ = ["FRONTIER_SCRIPTS", "PolitenessFrontierQueue", "frontier_script"]

logger = logging.getLogger(__name__)

_LEASE = 10.0  # seconds without a heartbeat before a process's leases go back
_IP_TTL = 600.0  # how long a host's shared IP bucket is trusted
_RESOLVE_HOLD = 2.0  # how long a host waits for someone to write its IP
_LOOKS = 16  # hosts re-filed per pop before answering "wait"
_BEAT = _LEASE / 5  # a pop beats (and looks for dead processes) this long after our last beat
_MAX_QUIET = 0.5  # the longest a process goes without asking (work pushed elsewhere)
# A process told to wait for a bucket (or handed a request from it) claims the
# bucket's next instant; the others pass over its hosts until this long after
# that instant (the claimant is late, busy or dead): one pop per start, not N.
_CLAIM = 0.2
_MAX_IDLE = 2.0  # the longest a process waits to ask again while hosts are queued
_IDLE_MARGIN = 60.0  # the Redis backend's default: booked keys outlive their wait by this
_STATS = "politeness/frontier/"


FRONTIER_SCRIPTS = ("push", "pop", "ip", "release", "clear")


def frontier_script(name: str) -> str:
    """``frontier_<name>.lua`` after the shared fragments and the frontier's own."""
    return lua_source(f"frontier_{name}.lua", "_frontier.lua")


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


class PolitenessFrontierQueue(Base):  # type: ignore[misc]
    """``SCHEDULER_QUEUE_CLASS`` for scrapy-redis's scheduler (see the module doc).

    Within one host key, higher priority first, then first in first out;
    across host keys, the one eligible soonest. ``POLITENESS_BACKEND`` should
    name the same Redis as ``REDIS_URL``: the pop books the namespace's keys
    on the scrapy-redis server.
    """

    def __init__(self, server: Any, spider: Spider, key: str, serializer: Any = None) -> None:
        super().__init__(server, spider, key, serializer)
        crawler = spider.crawler
        self.crawler = crawler
        self.stats = crawler.stats
        self._mw: PolitenessMiddleware | None = gate_of(crawler)
        settings = (self._mw.settings if self._mw is not None
                    else PolitenessSettings.from_settings(crawler.settings))
        bot = crawler.settings.get("BOT_NAME") or "scrapy"
        self.namespace = settings.namespace or f"politeness:{bot}"
        self._settings = settings
        backend = self._mw.backend if self._mw is not None else None
        if backend is None:
            logger.warning("politeness: the frontier queue shares the buckets, but with "
                           "POLITENESS_BACKEND = 'memory' each process adapts its intervals "
                           "alone; set POLITENESS_BACKEND to the REDIS_URL")
        idle = getattr(backend, "idle_margin", _IDLE_MARGIN)
        config = settings.config
        self._config_args = [config.default, config.floor, config.ceiling, config.ip_floor,
                             settings.send_margin, idle]
        self.pid = uuid.uuid4().hex
        self._scripts = {
            name: server.register_script(frontier_script(name)) for name in FRONTIER_SCRIPTS}
        self._leases = Leases(crawler)
        self._feed = StartFeed(spider, self.stats)
        self._routes = HostRoutes(self._mw, send=self._share_ip, resolved=self._resolved)
        self._quiet_until = 0.0
        self._pending_until = 0.0
        self._wake: asyncio.TimerHandle | None = None
        self._beat: asyncio.TimerHandle | None = None
        self._closed = False
        self._pushes = PendingPushes(lambda: self._run_pop(0))
        self._rtt = 0.0  # recent pop round trip (a decaying maximum)
        self._idle = 0.0  # the current wait while every queued host is claimed elsewhere
        self._last_beat = -_LEASE  # the first pop beats
        logger.info("politeness: frontier queue %s on Redis, process id %s", self.key, self.pid)
        crawler.signals.connect(self._closing, signal=signals.spider_closed)

    # -- scrapy-redis's queue interface ------------------------------------

    def __len__(self) -> int:
        """Queued plus handed out and unfinished (in any process): a process
        stays open while another may still push, or die and give work back."""
        if clock() < self._pending_until or self._pushes:  # no round trip needed
            return 1
        self._leases.sweep()  # asked when the engine has nothing running: end what ended
        if self._leases.acks:
            self._run_pop(0)
        # P:len counts both (P:leased: what a process of an older version leased)
        total, leased = self.server.mget(self.key + ":len", self.key + ":leased")
        return max(0, int(total or 0) + int(leased or 0))

    def push(self, request: Request) -> None:
        request.meta.pop(BOOKED_META, None)  # a retry or redirect is booked afresh
        request.meta.pop(LEASE_META, None)
        key, ip = self._routes.route(request)
        cfg = ""
        if self._settings.hosts and key:
            c = self._settings.config_for(key)
            if c is not self._settings.config:
                cfg = f"{c.default!r} {c.floor!r} {c.ceiling!r}"
        self._pushes.add(self._encode_request(request), request.priority, key, ip,
                         _RESOLVE_HOLD, cfg)  # rides on the next pop (frontier_pushes.py)
        self._quiet_until = 0.0  # the pushed host may be eligible now
        self._feed.pushed += 1  # (a pop due to steal still steals: see pop)
        self._start_heartbeat()

    def pop(self, timeout: float = 0) -> Request | None:
        """One request whose buckets are booked, or None (never blocks: the
        engine is woken when the soonest host becomes eligible)."""
        now = clock()
        if now < self._quiet_until or self._closed:
            return None
        slip = self._slip()
        # Told last time that other processes claimed every queued host: this pop takes
        # over the claim of any process handed more requests (frontier_pop.lua).
        reply = self._run_pop(1, slip, -_CLAIM if self._idle > 0 else _CLAIM)
        sent, now = now, clock()  # after the reply: a delay read against it can only start late
        rtt = now - sent
        if rtt < 1.0:
            self._rtt = max(rtt, self._rtt * 0.95)
        kind = _text(reply[0])
        if kind != "claimed":
            self._idle = 0.0
        if kind == "req":
            request: Request = self._decode_request(reply[1])
            self._leases.hold(request, _text(reply[2]))
            booked = int(reply[4])
            if booked != 2:
                request.meta[BOOKED_META] = {"ip": _text(reply[3]) if booked else None,
                                             "at": now + float(_text(reply[5])),
                                             "booked_slip": slip - rtt,
                                             "server_at": float(_text(reply[7])), "slip": slip}
            self.stats.inc_value(_STATS + "popped")
            self._start_heartbeat()
            next_in = float(_text(reply[6]))
            if next_in != 0:  # nothing else due now: the engine's next pull stays local
                # next_in > 0: an instant this process claimed (or free); capped like
                # a wait (work pushed elsewhere meanwhile)
                self._quiet(now, next_in if next_in > 0 else _MAX_QUIET, cap=_MAX_IDLE)
                if next_in > 0:
                    self._pending_until = self._quiet_until
            return request
        self.stats.inc_value(_STATS + "empty_pops")
        if kind == "claimed":  # others come for every queued host: told when to take over
            self._idle = min(max(float(_text(reply[1])), 0.05), _MAX_IDLE)
            self._quiet(now, self._idle, cap=_MAX_IDLE)
            self.stats.inc_value(_STATS + "claimed_elsewhere")
        else:
            self._quiet(now, float(_text(reply[1])) if kind == "wait" else _MAX_QUIET,
                        cap=_MAX_IDLE if kind == "wait" else _MAX_QUIET)  # claimed: see above
        if kind != "empty":  # something is queued (here or elsewhere) until then at least
            self._pending_until = self._quiet_until
        self._feed.starved()  # its pushes wake the engine, which pops again
        return None

    def clear(self) -> None:
        self._pushes.clear()
        self._scripts["clear"](args=[self.key])

    # -- internals ---------------------------------------------------------

    def _slip(self) -> float:
        """How late after its booked start a send of ours is expected to leave:
        the middleware's loop lag (twice: resume, then send) and the reply's trip,
        as the backend's ``reserve`` books it."""
        lag = self._mw.slip.lag if self._mw is not None else 0.0
        return 2.0 * lag + self._rtt

    def _run_pop(self, picks: int, slip: float = 0.0, claim: float = _CLAIM) -> list[Any]:
        self._leases.sweep()  # what finished its callback since: acknowledged on this trip
        acks = self._leases.take_acks()
        ips = self._routes.take_news()
        pushes = self._pushes.take()
        now = clock()
        beat = _LEASE if now - self._last_beat >= _BEAT else 0.0
        try:
            reply: list[Any] = self._scripts["pop"](args=[
                self.key, self.namespace, self.pid, beat, picks, *self._config_args, _LOOKS,
                LEAD, slip, claim, _IP_TTL, len(acks), *acks, len(ips) // 2, *ips,
                *pushes, self._settings.ip_model])
        except Exception:  # Redis away: the next pop carries them again
            self._leases.give_back(acks)
            self._routes.give_back(ips)
            self._pushes.give_back(pushes)
            raise
        if beat:
            self._last_beat = now
        return reply

    def _share_ip(self, key: str, ip: str) -> None:
        self._scripts["ip"](args=[self.key, key, ip, _IP_TTL])

    def _resolved(self) -> None:
        """A name resolved here: ask Redis now, with its IP on the pop."""
        self._quiet_until = 0.0
        wake_engine(self.crawler)

    def _quiet(self, now: float, wait: float, cap: float = _MAX_QUIET) -> None:
        """Ask Redis again (and wake the engine) when the soonest host is due."""
        delay = min(max(wait, 0.001), cap)
        self._quiet_until = now + delay
        if self._wake is not None:
            self._wake.cancel()
        self._wake = asyncio.get_running_loop().call_later(delay, self._on_wake)

    def _on_wake(self) -> None:
        self._wake = None
        wake_engine(self.crawler)

    def _start_heartbeat(self) -> None:
        if self._beat is None and not self._closed:
            self._beat = asyncio.get_running_loop().call_later(_LEASE / 4, self._heartbeat)

    def _heartbeat(self) -> None:
        """Keep our leases between pops; none held: stop (a pop that hands one
        out starts beating again)."""
        self._beat = None
        self._leases.sweep()
        if not self._leases:
            return
        try:
            if self._leases.acks or clock() - self._last_beat >= _BEAT:
                self._run_pop(0)
        except Exception:  # Redis away: the next pop reports it; keep beating
            logger.debug("politeness: frontier heartbeat failed", exc_info=True)
        self._start_heartbeat()

    def _closing(self, **kwargs: Any) -> None:
        """End our finished leases and give back what we still hold."""
        self._closed = True
        self._routes.close()
        self._pushes.close()
        for handle in (self._wake, self._beat):
            if handle is not None:
                handle.cancel()
        self._leases.end_all()  # the engine finished all it had in progress
        if self._pushes:  # queued for the others before this process lets go
            self._run_pop(0)
        acks = self._leases.take_acks()
        returned = self._scripts["release"](args=[self.key, self.pid, len(acks), *acks])
        if returned:
            self.stats.inc_value(_STATS + "returned_at_close", int(returned))
