"""The small interface a shared state backend implements."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

from scrapy_politeness.policy.shared import SharedHost

if TYPE_CHECKING:
    from scrapy_politeness.downloader.send_lateness import AnswerBound
    from scrapy_politeness.policy import Config, Signal

__all__ = ["LateStart", "SharedBackend", "SharedHost"]


class LateStart(NamedTuple):
    """A start later than its booking allowed for (``correct_start``'s arguments),
    carried by the fetch's ``feedback`` when its answer comes in time."""

    ip: str | None
    started_ago: float
    interval: float
    ip_spacing: float


class SharedBackend(Protocol):
    """Bucket state shared by several crawler processes.

    Every method is one round trip. Instants are the backend's own (its
    clock), and only relative delays cross the wire.
    """

    async def open(self) -> None:
        """Connect; raise a clear error when the backend is unreachable."""

    async def close(self) -> None: ...

    async def reserve(self, key: str, ip: str | None, config: Config, *,
                      crawl_delay: float = 0.0, slip: float = 0.0,
                      ip_spacing: float | None = None) -> tuple[float, SharedHost | None]:
        """Atomically: when both the host and the IP buckets permit, book the
        start and spend both at start + ``slip`` (the caller's estimate of how
        late its send leaves); keep the larger of the shared and the caller's
        ``crawl_delay``. ``ip_spacing``: what the start spends on the IP (the
        decoupled IP model's own interval); None: the shared host's clamped
        interval, at least the IP floor (the coupled model). Returns (seconds
        from now until the booked start, >= 0; the host's shared state, or None
        when the backend fell back to local buckets and has no shared answer)."""
        ...

    async def feedback(self, key: str, signal: Signal, config: Config,
                       dead_after: int, *, gap: float = 0.0,
                       late: LateStart | None = None, backlog: int = -1,
                       early: AnswerBound | None = None) -> SharedHost:
        """Atomically fold one outcome into the shared host (AIMD, Retry-After,
        latency EWMA, ceiling streak, dead flag). ``gap``: the start-to-start
        time this process last booked for the host, the pace the local table
        judges too (0: the host's last booked gap, which with several
        processes booking ahead is usually another process's). With several
        fetches of one host in flight it is the latest one's, at the same pace
        but for the one fetch that moved the interval. ``late``: this fetch's
        own late start, applied first as ``correct_start`` would; ``early``: or
        the sooner start its answer bounds, moved back to. ``backlog``:
        the host's requests still queued here, which prices a probe (-1: unknown)."""
        ...

    async def set_crawl_delay(self, key: str, delay: float) -> None: ...

    async def correct_start(self, key: str, ip: str | None, started_ago: float,
                            interval: float, ip_spacing: float) -> None:
        """Move the shared buckets to a start later than its booking allowed for."""

    async def go_late(self, key: str, ip: str | None, booked_at: float, *, booked_slip: float,
                      starts_in: float, interval: float, ip_spacing: float) -> float | None:
        """Move the shared buckets to a booked start that goes late, before it
        goes: the start put in force (the server's clock), or None (nothing
        moved) when another booking came behind it meanwhile."""
        ...

    async def wait_before_send(self, key: str, ip: str | None, config: Config, *,
                               slip: float = 0.0) -> float | None:
        """Seconds a booked request must still wait for a late start reported
        after its booking or a pause learnt since (0 when none); pushed, it
        goes behind any booking made after it. ``slip``: how late after now
        its send leaves. None: the backend cannot say (lost, and the crawl
        holds while it is): the caller books again once it is back."""
        ...

    async def peek(self, key: str, config: Config) -> SharedHost | None:
        """The shared host as every process left it, changing nothing (None:
        the backend cannot say). Read when a pause came after a booking: the
        state merged at the booking may predate a suspension's trip."""
        ...

    def abort_waiting(self) -> None:
        """Make reservations still waiting for the backend fail at once (closing)."""
