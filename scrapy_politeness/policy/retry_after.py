"""Parsing of the Retry-After header (RFC 9110 section 10.2.3).

Hostile or broken servers send garbage, negatives, dates in the past or
several headers; none of that may make the crawl faster or crash it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Protocol

__all__ = ["DRIFT", "Headers", "ServerDates", "note_date", "parse_retry_after", "retry_after_of",
           "retry_after_seen", "server_clock", "server_now"]


def _http_date(text: str) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # asctime form or "-0000": an HTTP-date is always GMT
        when = when.replace(tzinfo=UTC)
    try:
        stamp = when.timestamp()
    except (OverflowError, ValueError, OSError):
        return None
    return stamp if math.isfinite(stamp) else None


def server_clock(date: str | bytes | None, now_wall: float) -> float:
    """The server's "now" (unix time) from its ``Date`` header, else ``now_wall``.

    An HTTP-date Retry-After is an instant on the server's clock: measured
    against ours, a local clock running ahead would bring us back early.
    """
    if isinstance(date, bytes):
        date = date.decode("latin-1")
    if not date:
        return now_wall
    stamp = _http_date(date.strip())
    return now_wall if stamp is None else stamp


def parse_retry_after(value: str | bytes | None, now_wall: float) -> float | None:
    """Seconds to wait from ``now_wall`` (unix time), or None when unusable.

    Accepts delta-seconds (fractions too, as some servers send them) and the
    HTTP-date form. Garbage, negative, NaN/infinite and past values give None.
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes anything
            return None
    text = value.strip()
    if not text:
        return None
    if text[0].isdigit() or text[0] == ".":
        try:
            seconds = float(text)
        except ValueError:
            return None
        if math.isnan(seconds) or math.isinf(seconds) or seconds <= 0:
            return None
        return seconds
    stamp = _http_date(text)
    if stamp is None:
        return None
    delta = stamp - now_wall
    return delta if delta > 0 else None


def retry_after_of(values: Iterable[str | bytes], now_wall: float) -> float | None:
    """The largest usable Retry-After among several headers (the politest)."""
    best: float | None = None
    for value in values:
        seconds = parse_retry_after(value, now_wall)
        if seconds is not None and (best is None or seconds > best):
            best = seconds
    return best


DRIFT = 1e-4
"""How far apart two clocks may run (100 ppm): a bound learnt from an older
Date header is trusted that much less per second since."""


class ServerDates:
    """The first arrival of each of a host's recent Date headers: a bound on its clock.

    An HTTP-date has whole seconds. Measured against the response's own Date
    (the server's clock is at least D when it answers), a Retry-After date
    waits until up to a second after it: on average 0.5 s per pause, 1% of a
    100-page crawl at 2/s each time. A Date D first seen at our monotonic
    ``at`` says the server's clock runs at least ``D - at`` ahead of ours;
    over responses arriving at different fractions of a second the largest of
    these is within a few ms of the truth, and never above it (so the pause
    never ends early, unless the server's clock steps back).
    """

    __slots__ = ("seen",)
    KEEP = 8

    def __init__(self) -> None:
        self.seen: list[tuple[bytes, float]] = []

    def note(self, date: bytes, now: float) -> None:
        """A response with Date ``date`` arrived at monotonic ``now``. Only a new
        value counts: its first arrival gives its tightest bound."""
        if self.seen and self.seen[-1][0] == date:
            return
        self.seen.append((date, now))
        if len(self.seen) > self.KEEP:
            del self.seen[0]

    def bound(self, now: float) -> float | None:
        """The latest unix time the server's clock has surely reached at monotonic ``now``."""
        best = None
        for date, at in self.seen:
            stamp = _http_date(date.decode("latin-1").strip())
            if stamp is not None:
                sure = stamp + (now - at) * (1.0 - DRIFT)
                best = sure if best is None or sure > best else best
        return best


def note_date(dates: ServerDates | None, date: bytes, now: float) -> ServerDates:
    """``dates`` (created on the first Date header) with ``date`` noted at monotonic ``now``."""
    if dates is None:
        dates = ServerDates()
    dates.note(date, now)
    return dates


def server_now(dates: ServerDates | None, now: float, date: str | bytes | None,
               now_wall: float) -> float:
    """The server's "now" (unix time) to measure an HTTP-date Retry-After from:
    the tightest bound the host's Date headers give (``dates``, at monotonic
    ``now``; the response's own Date is among them), else :func:`server_clock`.
    An unreadable Date never brings our own wall clock back in beside them."""
    best = dates.bound(now) if dates is not None else None
    return best if best is not None else server_clock(date, now_wall)


class Headers(Protocol):
    """The part of a response's headers read here (Scrapy's ``Headers``)."""

    def getlist(self, key: bytes) -> list[bytes]: ...
    def get(self, key: bytes) -> bytes | None: ...


class Dated(Protocol):
    """What reading a response's dates needs of a host's state (``HostState``)."""

    dates: ServerDates | None


def retry_after_seen(state: Dated, headers: Headers, now: float,
                     wall_clock: Callable[[], float] = time.time) -> float | None:
    """One response: note its ``Date`` in ``state.dates`` (at monotonic ``now``),
    and return its Retry-After in seconds from now, or None.

    Dates are noted from a host's first Retry-After on: a host that never asks
    for a pause costs no memory and no header read per response (the first
    pause gains little from them anyway: few Dates, rarely tight)."""
    values = headers.getlist(b"Retry-After")
    if not values and state.dates is None:
        return None
    date = headers.get(b"Date")
    if date is not None:
        state.dates = note_date(state.dates, date, now)
    if not values:
        return None
    return retry_after_of(values, server_now(state.dates, now, date, wall_clock()))
