"""The Redis backend's connection: running a script, and losing the server.

A lost connection becomes one outage (one WARNING, one background probe that
reconnects with exponential backoff) however many callers see it; what a
caller does meanwhile (hold or fall back to the local buckets) is
``RedisBackend.reserve``'s business. Split from :mod:`.redis` (same logger).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

__all__ = ["BackendError", "BackendUnavailable"]

logger = logging.getLogger("scrapy_politeness.distributed.redis_backend")


class BackendUnavailable(ConnectionError):
    """Redis cannot be reached (at start, or during an outage)."""


class BackendError(RuntimeError):
    """Redis answered, with an error that is not an outage (a script it refused, say).

    Kept apart from ``BackendUnavailable`` so a bug is reported as what it is,
    not as "cannot use Redis".
    """


class _RedisConnection:
    """Connection and loss handling for :class:`~.redis.RedisBackend`."""

    namespace: str
    on_loss: str
    shown_url: str
    backoff: tuple[float, float]
    outages: int
    _client: Any
    _scripts: dict[str, Any]
    _secrets: list[str]
    _up: asyncio.Event
    _probe: asyncio.Task[None] | None
    _lost_at: float
    _aborted: bool
    _refusal: str

    async def close(self) -> None:
        if self._client is not None and not self._up.is_set():
            logger.info("politeness: closing while the Redis backend at %s is still "
                        "unavailable (for %.1fs)", self.shown_url,
                        time.monotonic() - self._lost_at)
        self.abort_waiting()
        if self._probe is not None:
            self._probe.cancel()
            await asyncio.gather(self._probe, return_exceptions=True)
            self._probe = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def abort_waiting(self) -> None:
        """Make reserves held by an outage raise ``BackendUnavailable`` (closing)."""
        self._aborted = True
        self._up.set()

    # -- CDN edges the fleet recognised -----------------------------------

    async def put_edge(self, ip: str, record: str) -> None:
        """Tell the fleet ``ip`` is a CDN edge: a field of the namespace's ``cdn_edges`` hash."""
        await self._plain(self._client.hset, self._key("cdn_edges"), ip, record)

    async def fleet_edges(self, known: int) -> dict[str, str] | None:
        """Every edge recognised in the fleet (ip -> record); None when the hash
        still holds ``known`` of them (one HLEN) or Redis is unavailable."""
        count = await self._plain(self._client.hlen, self._key("cdn_edges"))
        if count is None or int(count) == known:
            return None
        edges = await self._plain(self._client.hgetall, self._key("cdn_edges"))
        return None if edges is None else {k.decode(): v.decode() for k, v in edges.items()}

    async def _plain(self, command: Any, *args: Any) -> Any:
        """One plain command; None when Redis is unavailable (an outage starts as in ``_run``)."""
        if not self._up.is_set() or self._aborted:
            return None
        try:
            return await command(*args)
        except Exception as exc:
            if not self._is_loss(exc):
                raise
            self._lost(exc)
            return None

    # -- plumbing --------------------------------------------------------

    def _key(self, kind: str, name: str | None = None) -> str:
        return f"{self.namespace}:{kind}" if name is None else f"{self.namespace}:{kind}:{name}"

    async def _run(self, script: str, keys: list[str], args: list[Any]) -> list[Any]:
        """One EVALSHA; a lost connection becomes ``BackendUnavailable`` at once."""
        if not self._up.is_set() or self._aborted:
            raise BackendUnavailable(f"Redis backend at {self.shown_url} is unavailable")
        try:
            reply: list[Any] = await self._scripts[script](keys=keys, args=args)
        except Exception as exc:
            if not self._is_loss(exc):
                raise
            self._lost(exc)
            raise BackendUnavailable(
                f"Redis backend at {self.shown_url} is unavailable") from None
        return reply

    @staticmethod
    def _is_loss(exc: BaseException) -> bool:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        return isinstance(exc, (RedisConnectionError, RedisTimeoutError, OSError,
                                asyncio.TimeoutError))

    def _scrub(self, exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {exc}"
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _lost(self, exc: BaseException) -> None:
        """Enter an outage once: one WARNING, one probe task, however many callers."""
        if not self._up.is_set() or self._aborted:
            return
        self._up.clear()
        self._lost_at = time.monotonic()
        self.outages += 1
        what = ("holding every request until it is back" if self.on_loss == "hold"
                else "using this process's local buckets until it is back")
        logger.warning("politeness: lost the Redis backend at %s (%s); %s",
                       self.shown_url, self._scrub(exc), what)
        self._probe = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        """PING with exponential backoff until the server answers again."""
        assert self._client is not None
        await self._client.connection_pool.disconnect()  # every pooled socket is stale
        delay, cap = self.backoff
        while True:
            await asyncio.sleep(delay)
            try:
                await self._client.ping()
                break
            except Exception as exc:  # whatever it is, keep holding and retry
                self._still_down(exc)
                await self._client.connection_pool.disconnect()
                delay = min(delay * 2, cap)
        logger.info("politeness: the Redis backend at %s is back after %.1fs",
                    self.shown_url, time.monotonic() - self._lost_at)
        self._probe = None
        self._refusal = ""
        self._up.set()

    def _still_down(self, exc: BaseException) -> None:
        """A failed reconnect: a plain outage at DEBUG; a server that answers
        but refuses us (wrong password, ACL, ...) at WARNING, once per cause,
        since waiting will not cure it."""
        from redis.exceptions import AuthenticationError, ResponseError

        text = self._scrub(exc)
        if not isinstance(exc, (AuthenticationError, ResponseError)):
            logger.debug("politeness: Redis still unavailable: %s", text)
            return
        if text != self._refusal:
            self._refusal = text
            what = ("holding every request" if self.on_loss == "hold"
                    else "using the local buckets")
            logger.warning("politeness: the Redis server at %s is back but refuses this "
                           "crawler (%s); %s until it accepts us", self.shown_url, text, what)
