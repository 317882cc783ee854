"""A process's pushes on their way to the frontier: they ride on its next pop.

scrapy-redis pushes one request at a time, synchronously; a script per push
was one more Redis round trip per request. The queue keeps them here until its
next pop (the engine's next pull) carries them, or at the latest the next turn
of the event loop (a pop that picks nothing). The pop queues them before it
picks, in the same atomic step as the acks, so a callback's new requests are
in Redis when its lease ends (``frontier_pop.lua``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["PendingPushes"]

logger = logging.getLogger("scrapy_politeness.distributed.frontier")

FIELDS = 6  # data priority host_key ip hold cfg, per push (push_one's arguments)
RETRY = 2.5  # after a flush that failed (Redis away), the wait before the next one


class PendingPushes:
    """The pushes not yet in Redis; ``flush()`` sends them (a pop that picks nothing)."""

    def __init__(self, flush: Callable[[], Any]) -> None:
        self._flush = flush
        self._args: list[Any] = []
        self._timer: asyncio.Handle | None = None
        self.closed = False

    def __bool__(self) -> bool:
        return bool(self._args)

    def add(self, *fields: Any) -> None:
        self._args += fields
        if self._timer is None and not self.closed:
            self._timer = asyncio.get_running_loop().call_soon(self._due)

    def take(self) -> list[Any]:
        """The pending pushes' arguments, flat, prefixed by their count; none left."""
        args, self._args = self._args, []
        return [len(args) // FIELDS, *args]

    def give_back(self, taken: list[Any]) -> None:
        """What a pop that failed took: the next one carries it."""
        self._args[:0] = taken[1:]

    def clear(self) -> None:
        self._args = []

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()

    def _due(self) -> None:
        self._timer = None
        if not self._args or self.closed:
            return
        try:
            self._flush()
        except Exception:  # Redis away: the next pop carries them; try again meanwhile
            logger.debug("politeness: frontier push failed", exc_info=True)
            self._timer = asyncio.get_running_loop().call_later(RETRY, self._due)
