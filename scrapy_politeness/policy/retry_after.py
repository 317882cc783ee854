"""Parsing of the Retry-After header (RFC 9110 section 10.2.3).

Hostile or broken servers send garbage, negatives, dates in the past or
several headers; none of that may make the crawl faster or crash it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import timezone
from email.utils import parsedate_to_datetime

__all__ = ["parse_retry_after", "retry_after_of", "server_clock"]


def _http_date(text: str) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # asctime form or "-0000": an HTTP-date is always GMT
        when = when.replace(tzinfo=timezone.utc)
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
