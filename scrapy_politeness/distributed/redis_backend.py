"""Shared politeness state in Redis, so several crawler processes share ONE budget.

Each step that must not interleave between processes (book a start on the
host and IP buckets; fold an outcome into the AIMD state) is one Lua script
run with EVALSHA: one round trip, atomic on the server. Instants are the
server's clock (``TIME``); only relative delays cross the wire, so crawler
machines with skewed clocks stay polite. Every key expires once idle.

Losing Redis mid-crawl never lets a request out unbooked in ``"hold"`` mode
(``reserve`` waits while one background probe reconnects with exponential
backoff); in ``"local"`` mode the local buckets alone apply until it is back.

The parts: the steps' script calls (here), the connection and its loss
(:mod:`._redis_conn`), the pending bookings re-seeded after a state loss
(:mod:`._redis_reseed`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scrapy_politeness.distributed.base import LateStart, SharedHost
from scrapy_politeness.distributed.lua_source import lua_source
from scrapy_politeness.distributed.redaction import redact_url, secrets_of
from scrapy_politeness.distributed.redis_connection import BackendError, BackendUnavailable
from scrapy_politeness.distributed.redis_reseed import _is_zero_ip, _RedisReseed
from scrapy_politeness.policy import recovery as _recovery
from scrapy_politeness.policy.config import MIN_WIDEN

if TYPE_CHECKING:
    from scrapy_politeness.downloader.send_lateness import AnswerBound
    from scrapy_politeness.policy import Config, Signal

__all__ = ["BackendError", "BackendUnavailable", "RedisBackend", "redact_url"]

logger = logging.getLogger(__name__)

_ON_LOSS = ("hold", "local")
_LATENCY_ALPHA = 0.3  # HostTable's default EWMA weight
# feedback.lua runs policy/recovery.py's arithmetic; its constants come from there.
_RECOVERY_CONSTANTS = (_recovery.SHRINK, _recovery.CONFIRM, _recovery.PATIENCE,
                       _recovery.PROBE_SHARE, _recovery.MARGIN, _recovery.FORGET_AFTER,
                       _recovery.FORGET_STEP, MIN_WIDEN, _recovery.AT_PACE,
                       _recovery.REFUSED_WEIGHT, _recovery.PENDING_AT_MOST,
                       _recovery.ROUND_BELIEF)


_SCRIPTS = ("reserve", "feedback", "crawl_delay", "resync", "late_start", "wait_before_send",
            "go_late", "peek")


_LATE = {"feedback.lua", "late_start.lua", "go_late.lua"}  # fold a late start in


def _script(name: str) -> str:
    """A script's source after its shared fragments (``lua.source``)."""
    return lua_source(name, "_late_start.lua") if name in _LATE else lua_source(name)


def _f(raw: Any) -> float:
    return float(raw.decode() if isinstance(raw, bytes) else raw)


def _host(reply: list[Any]) -> SharedHost:
    adaptive, crawl_delay, nb_in, latency, streak, dead = reply[:6]
    return SharedHost(_f(adaptive), _f(crawl_delay), _f(nb_in), _f(latency),
                      int(streak), bool(int(dead)))


def _fed_host(reply: list[Any]) -> SharedHost:
    """A feedback answer: the host plus the fast recovery's memory."""
    fail_at, good_at, run, cost = reply[6:10]
    return replace(_host(reply), fail_at=_f(fail_at), good_at=_f(good_at),
                   healthy_run=int(run), fail_cost=_f(cost))


class RedisBackend(_RedisReseed):
    """The ``SharedBackend`` on Redis (``redis://``, ``rediss://``, ``unix://``).

    ``margin`` is added to every spacing, like ``POLITENESS_SEND_MARGIN`` on
    the local gate: processes resume from their sleep with different slips.
    ``idle_margin`` is how long a key outlives the longest wait it encodes
    (ceiling, crawl-delay, Retry-After window). ``grace``: after the server
    lost its state, how long every client gets to re-seed its pending
    bookings before anyone books again.
    """

    def __init__(self, url: str, *, namespace: str, on_loss: str = "hold",
                 margin: float = 0.01, idle_margin: float = 60.0,
                 backoff: tuple[float, float] = (0.1, 5.0), grace: float = 1.0,
                 socket_timeout: float = 5.0, connect_timeout: float = 2.0) -> None:
        if on_loss not in _ON_LOSS:
            raise ValueError(f"on_loss must be one of {_ON_LOSS!r}, got {on_loss!r}")
        self.url = url
        self.shown_url = redact_url(url)
        self.namespace = namespace
        self.on_loss = on_loss
        self.margin = margin
        self.idle_margin = idle_margin
        self.backoff = backoff
        self.grace = grace
        self._secrets = secrets_of(url)
        self._socket_timeout = socket_timeout
        self._connect_timeout = connect_timeout
        self._client: Any = None
        self._scripts: dict[str, Any] = {}
        self._up = asyncio.Event()
        self._probe: asyncio.Task[None] | None = None
        self._lost_at = 0.0
        # What survives a server that loses its state: the namespace epoch we
        # booked under and our pending bookings (monotonic instants): per host
        # (start, interval), per IP its next-eligible (see resync.lua).
        self._epoch = ""
        self._booked_hosts: dict[str, tuple[float, float]] = {}
        self._booked_ips: dict[str, float] = {}
        self._aborted = False
        self.outages = 0
        self._resync_lock = asyncio.Lock()
        self._resynced_to = ""  # the epoch our last re-seed adopted: re-seed once per loss
        self._refusal = ""  # the last non-outage error of the reconnect probe, said once

    # -- life cycle ------------------------------------------------------

    async def open(self) -> None:
        """Connect, PING and load the scripts; ``BackendUnavailable`` if unreachable."""
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # No client-side retries: reserve() owns the loss policy, and a blind
        # retry of a script whose reply was lost would book twice.
        self._client = aioredis.Redis.from_url(
            self.url, socket_timeout=self._socket_timeout,
            socket_connect_timeout=self._connect_timeout, retry=Retry(NoBackoff(), 0))
        step = "PING"
        try:
            await self._client.ping()
            for name in _SCRIPTS:
                step = f"loading {name}.lua"
                source = _script(name + ".lua")
                self._scripts[name] = self._client.register_script(source)
                await self._client.script_load(source)
        except Exception as exc:
            await self._client.aclose()
            if self._is_loss(exc):  # unreachable, or refused our credentials
                raise BackendUnavailable(
                    f"cannot use Redis at {self.shown_url}: {self._scrub(exc)}") from None
            raise BackendError(f"Redis at {self.shown_url} failed while {step}: "
                               f"{self._scrub(exc)}") from None
        self._up.set()
        logger.info("politeness: sharing state in Redis at %s (namespace %r, on loss: %s)",
                    self.shown_url, self.namespace, self.on_loss)

    # -- the three steps -------------------------------------------------

    async def reserve(self, key: str, ip: str | None, config: Config, *,
                      crawl_delay: float = 0.0, slip: float = 0.0,
                      ip_spacing: float | None = None) -> tuple[float, SharedHost | None]:
        """See ``SharedBackend.reserve``. ``crawl_delay``: this process's, kept
        if larger than the shared one (a Redis restart forgets it). ``slip``:
        how late after its booked start this process expects its bytes to
        leave; both buckets are spent at start + slip, so the next booking of
        any process is spaced from the real send, not from the plan."""
        keys = [self._key("host", key), self._key("ns")]
        if not _is_zero_ip(ip):
            keys.append(self._key("ip", ip))
        while True:
            if not self._up.is_set():
                if self.on_loss == "local":
                    return 0.0, None
                await self._up.wait()
            if self._aborted:
                raise BackendUnavailable(f"Redis backend at {self.shown_url} is closed")
            args = [config.default, config.floor, config.ceiling, config.ip_floor,
                    self.margin, self.idle_margin, self._epoch, uuid.uuid4().hex, self.grace,
                    crawl_delay, slip]
            if ip_spacing is not None:
                args.append(ip_spacing)
            try:
                reply = await self._scripts["reserve"](keys=keys, args=args)
                if reply[0] == b"resync":
                    await self._resync(reply[1].decode())
                    continue
                if reply[0] == b"wait":  # the grace window after a state loss
                    self._epoch = reply[2].decode()
                    await asyncio.sleep(_f(reply[1]))
                    continue
            except Exception as exc:
                if not self._is_loss(exc):
                    raise
                self._lost(exc)
                continue
            delay = max(0.0, _f(reply[0]))
            host = SharedHost(_f(reply[1]), _f(reply[2]), _f(reply[3]), _f(reply[4]),
                              int(reply[5]), bool(int(reply[6])), gap=_f(reply[8]))
            self._epoch = reply[7].decode()
            self._remember(key, ip, delay, host, config, slip=slip, ip_spacing=ip_spacing)
            return delay, host

    async def feedback(self, key: str, signal: Signal, config: Config,
                       dead_after: int, *, gap: float = 0.0,
                       late: LateStart | None = None, backlog: int = -1,
                       early: AnswerBound | None = None) -> SharedHost:
        args: list[Any] = [signal.status, signal.retry_after, signal.latency, config.default,
                           config.floor, config.ceiling, config.backoff, config.soft_widen,
                           config.narrow, config.latency_rise, config.latency_min_rise,
                           dead_after, _LATENCY_ALPHA, self.idle_margin, config.recovery,
                           *_RECOVERY_CONSTANTS, gap, backlog]
        keys = [self._key("host", key)]
        if late is not None:  # correct_start's step, in the same round trip
            args += [late.started_ago, late.interval, late.ip_spacing]
            if not _is_zero_ip(late.ip):
                keys += [self._key("ip", late.ip), self._key("late", late.ip)]
        elif early is not None:  # moved back to its answer, in the same round trip
            ago = asyncio.get_running_loop().time() - early.answered  # just before the trip
            args += ["early", ago, early.spent, early.ip_spacing, early.margin]
            if not _is_zero_ip(early.ip):
                keys.append(self._key("ip", early.ip))
        reply = await self._run("feedback", keys, args)
        return _fed_host(reply)

    async def set_crawl_delay(self, key: str, delay: float) -> None:
        """Keep the larger crawl-delay; during an outage only this process has it."""
        try:
            await self._run("crawl_delay", [self._key("host", key)],
                            [delay, self.idle_margin])
        except BackendUnavailable:
            logger.debug("politeness: crawl-delay of %s not shared (Redis down)", key)

    async def correct_start(self, key: str, ip: str | None, started_ago: float,
                            interval: float, ip_spacing: float) -> None:
        """A request of ours started later than its booking allowed for: move the
        shared host and IP buckets to its real start (``started_ago`` seconds
        before now), so the next booking of every process is spaced from it."""
        keys = [self._key("host", key)]
        if not _is_zero_ip(ip):
            keys += [self._key("ip", ip), self._key("late", ip)]
        try:
            await self._run("late_start", keys,
                            [started_ago, interval, ip_spacing, self.idle_margin])
        except BackendUnavailable:
            logger.debug("politeness: late start of %s not shared (Redis down)", key)

    async def go_late(self, key: str, ip: str | None, booked_at: float, *, booked_slip: float,
                      starts_in: float, interval: float, ip_spacing: float) -> float | None:
        """A start the frontier booked for ``booked_at`` (the server's clock, as its
        pop answered) goes only now: move the
        shared buckets to it (its bytes leave ``starts_in`` s from now) and go
        (the start put in force, the server's clock), unless another process
        booked behind it meanwhile (None: book it afresh). Atomic, before the
        send, so no other booking misses it.
        Raises ``BackendUnavailable`` while Redis is lost."""
        keys = [self._key("host", key)]
        if not _is_zero_ip(ip):
            keys += [self._key("ip", ip), self._key("late", ip)]
        reply: Any = await self._run("go_late", keys, [
            booked_at, booked_slip, starts_in, interval, ip_spacing, self.idle_margin])
        started = _f(reply)
        return started if started > 0 else None

    async def wait_before_send(self, key: str, ip: str | None, config: Config, *,
                               slip: float = 0.0) -> float | None:
        """Seconds a request booked earlier must still wait, just before its
        send, for a late start reported since (``correct_start``) or a
        Retry-After pause another process learnt since; 0 if none. Redis
        lost: None in ``"hold"`` mode (the request books again once it is
        back: a late start nobody could report may have overtaken it), 0 in
        ``"local"`` mode (its booking stands; the local buckets apply)."""
        keys = [self._key("host", key)]
        if not _is_zero_ip(ip):
            keys.append(self._key("late", ip))
        try:
            reply: Any = await self._run("wait_before_send", keys, [
                self.margin, slip, config.default, config.floor, config.ceiling])
        except BackendUnavailable:
            return None if self.on_loss == "hold" else 0.0
        return _f(reply)

    async def peek(self, key: str, config: Config) -> SharedHost | None:
        """See ``SharedBackend.peek``; None while Redis is lost."""
        try:
            reply = await self._run("peek", [self._key("host", key)], [config.default])
        except BackendUnavailable:
            return None
        return _host(reply)
