"""The shared backend's sleeps inside ``process_request``, ended when the crawl closes.

A request that sleeps towards its booked start (or a pause another process
reported after its booking) holds its engine slot all the while, and Scrapy's
close waits for every slot to be freed. A Retry-After or a suspension's pause
can be minutes long: asleep in ``asyncio.sleep``, such a request held the
close, ``CLOSESPIDER_TIMEOUT`` included, until the pause's end. Here every
such sleep is a future that :meth:`Sleeps.drop` fails with ``IgnoreRequest``
when the engine begins closing, as the gate drops its own waiters. A request
that learns its host was suspended by another process leaves instead, back to
the scheduler (:class:`SuspendedElsewhere`).
"""

from __future__ import annotations

import asyncio

from scrapy.exceptions import IgnoreRequest

__all__ = ["Sleeps", "SuspendedElsewhere"]


class SuspendedElsewhere(Exception):
    """The shared state says another process suspended the host this request
    was booked for: the request goes back to the scheduler to wait there."""


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Sleeps:
    """The requests asleep in the shared backend's waits, each a future."""

    def __init__(self) -> None:
        self._sleeping: dict[asyncio.Future[None], asyncio.TimerHandle] = {}
        self.closed: str | None = None  # the reason, once dropped: later sleeps fail at once

    def __len__(self) -> int:
        return len(self._sleeping)

    async def sleep(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        """``asyncio.sleep(delay)``, or ``IgnoreRequest`` as soon as :meth:`drop` is called."""
        if self.closed is not None:
            raise IgnoreRequest(self.closed)
        fut: asyncio.Future[None] = loop.create_future()
        self._sleeping[fut] = loop.call_later(delay, _wake, fut)
        try:
            await fut
        finally:
            self._sleeping.pop(fut).cancel()

    def drop(self, reason: str) -> int:
        """Fail every sleep now and any later one at once; how many were asleep."""
        self.closed = reason
        dropped = 0
        for fut in list(self._sleeping):
            if not fut.done():
                fut.set_exception(IgnoreRequest(reason))
                dropped += 1
        return dropped
