"""The Redis backend's own copy of its pending bookings, for a server that
loses its state (restarted without persistence) while crawlers still sleep
towards the starts it booked: they are re-seeded (``resync.lua``) under the
server's new epoch. Split from :mod:`.redis` (same logger).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy_politeness.distributed.redis_connection import _RedisConnection

if TYPE_CHECKING:
    from scrapy_politeness.distributed.base import SharedHost
    from scrapy_politeness.policy import Config

__all__: list[str] = []

logger = logging.getLogger("scrapy_politeness.distributed.redis_backend")


def _is_zero_ip(ip: str | None) -> bool:
    return not ip or ip == "0.0.0.0" or ip == "::"


class _RedisReseed(_RedisConnection):
    """Pending bookings kept per host and IP, and re-seeded after a state loss."""

    idle_margin: float
    _epoch: str
    _booked_hosts: dict[str, tuple[float, float]]
    _booked_ips: dict[str, float]
    _resync_lock: asyncio.Lock
    _resynced_to: str

    def _remember(self, key: str, ip: str | None, delay: float, host: SharedHost,
                  config: Config, *, slip: float, ip_spacing: float | None = None) -> None:
        """Keep our pending bookings, the only copy left if the server loses its state."""
        now = time.monotonic()
        start = now + delay + slip
        interval = config.host_interval(host.adaptive, host.crawl_delay)
        self._booked_hosts[key] = (start, interval)
        if ip is not None and not _is_zero_ip(ip):
            spacing = max(config.ip_floor, config.host_interval(host.adaptive)
                          if ip_spacing is None else ip_spacing)
            self._booked_ips[ip] = max(self._booked_ips.get(ip, 0.0), start + spacing)
        if len(self._booked_hosts) + len(self._booked_ips) > 4096:
            self._forget_past(now)

    def _forget_past(self, now: float) -> None:
        self._booked_hosts = {k: v for k, v in self._booked_hosts.items() if v[0] + v[1] > now}
        self._booked_ips = {k: v for k, v in self._booked_ips.items() if v > now}

    async def _resync(self, epoch: str) -> None:
        """Re-seed our pending bookings into a server that lost them; adopt its epoch.

        Every reservation in flight at the loss is told to resync; the first
        re-seeds (and says so, once), the others find it done and only adopt
        the epoch.
        """
        async with self._resync_lock:
            if epoch == self._resynced_to:
                self._epoch = epoch
                return
            await self._reseed()

    async def _reseed(self) -> None:
        now = time.monotonic()
        self._forget_past(now)
        hosts, ips = list(self._booked_hosts.items()), list(self._booked_ips.items())
        keys = ([self._key("ns")] + [self._key("host", k) for k, _ in hosts]
                + [self._key("ip", ip) for ip, _ in ips])
        args: list[Any] = [len(hosts), self.idle_margin]
        for _, (start, interval) in hosts:
            args += [start - now, interval]
        args += [nxt - now for _, nxt in ips]
        epoch = await self._scripts["resync"](keys=keys, args=args)
        if epoch is None:  # lost again: the next reserve resyncs again
            return
        self._epoch = self._resynced_to = epoch.decode()
        logger.info("politeness: the Redis backend lost its state; re-seeded %d pending "
                    "host and %d IP bookings", len(hosts), len(ips))
