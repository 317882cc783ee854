"""The rate policy: the interval band a host must stay in and the AIMD step.

Pure arithmetic on seconds (floats); no clock, no I/O, no Scrapy. Everything
here is a direct port of the reference design's ``Config``: ``adapt`` is the
unclamped AIMD step, ``host_interval`` the clamp, ``at_ceiling`` the dead test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["RECOVERIES", "Config", "Signal", "is_failure"]

RECOVERIES = ("fast", "bracket", "additive")
"""How a host comes back after a failure: ``"fast"`` (policy/recovery.py,
the plugin's default: the bracket search, round paces first), ``"bracket"``
(the same search, every pace alike) or ``"additive"`` (the reference
design's AIMD)."""

MIN_WIDEN = 0.05
"""The smallest widen a failure makes when multiplying cannot widen (an
interval of 0 with ``floor = 0``, or ``backoff = 1``): seconds, or ``narrow``
when that is larger."""


def is_failure(status: int) -> bool:
    """A transport error (status 0), a 429 or any 5xx: the server is struggling."""
    return status == 0 or status == 429 or status >= 500


@dataclass(frozen=True, slots=True)
class Signal:
    """The part of a fetch outcome the rate controller reads.

    ``status`` is the HTTP status, or 0 for a transport error (timeout,
    refused, reset), which backs off like a 5xx. Durations are seconds;
    ``retry_after`` is 0 when the response carried none.
    """

    status: int
    retry_after: float = 0.0
    latency: float = 0.0
    prev_latency: float = 0.0


@dataclass(frozen=True, slots=True)
class Config:
    """The politeness policy of one host (or of every host without overrides).

    ``default``: the interval of a host with no signal yet. ``floor``: never
    fetch one host faster. ``ceiling``: never slower; a host held here is
    dead. ``ip_floor``: the minimum spacing of fetches to one IP. ``backoff``:
    multiplicative widen on 429/5xx/transport errors. ``soft_widen``:
    multiplicative widen on sharply rising latency. ``narrow``: additive
    narrow on a healthy fetch. ``latency_rise``: the latency ratio that counts
    as sharply rising. ``latency_min_rise`` (an addition to the reference
    design): a rise smaller than this many seconds is noise, not a struggling
    server (on a LAN or loopback, 1 ms against 0.6 ms is a ratio of 1.7).
    ``recovery`` (an addition): ``"additive"`` keeps the reference design's
    step (``adapt``); ``"fast"`` and ``"bracket"`` use the controller of
    ``policy.recovery`` (with and without its round-pace prior).
    The dataclass default is the reference design; the plugin's setting
    ``POLITENESS_RECOVERY`` defaults to ``"fast"``.
    """

    default: float = 1.0
    floor: float = 0.25
    ceiling: float = 60.0
    ip_floor: float = 0.25
    backoff: float = 2.0
    soft_widen: float = 1.25
    narrow: float = 0.05
    latency_rise: float = 1.5
    latency_min_rise: float = 0.05
    recovery: str = "additive"

    def __post_init__(self) -> None:
        if self.recovery not in RECOVERIES:
            raise ValueError(f"Config.recovery must be one of {RECOVERIES!r}, "
                             f"got {self.recovery!r}")
        for name in ("default", "floor", "ceiling", "ip_floor", "backoff",
                     "soft_widen", "narrow", "latency_rise", "latency_min_rise"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"Config.{name} must be a number of seconds or a ratio, "
                                f"got {value!r}")
            if math.isnan(value) or math.isinf(value):
                raise ValueError(f"Config.{name} must be finite, got {value!r}")
            if value < 0:
                raise ValueError(f"Config.{name} must not be negative, got {value!r}")
        if self.backoff < 1:
            raise ValueError(f"Config.backoff must be >= 1, got {self.backoff!r}")
        if self.soft_widen < 1:
            raise ValueError(f"Config.soft_widen must be >= 1, got {self.soft_widen!r}")
        if self.latency_rise < 1:
            raise ValueError(f"Config.latency_rise must be >= 1, got {self.latency_rise!r}")
        if not self.floor <= self.default <= self.ceiling:
            raise ValueError(
                "Config needs floor <= default <= ceiling, got "
                f"floor={self.floor!r}, default={self.default!r}, ceiling={self.ceiling!r}"
            )
        if self.ceiling <= 0:
            raise ValueError(f"Config.ceiling must be positive, got {self.ceiling!r}")

    def adapt(self, interval: float, signal: Signal) -> float:
        """One AIMD step from ``interval`` given ``signal``; the result is unclamped.

        Reactions, first match wins: a failure widens (``widen``) and takes
        Retry-After as a floor; a latency above ``prev_latency *
        latency_rise`` widens by ``soft_widen``; anything else narrows by
        ``narrow``.
        """
        if is_failure(signal.status):
            widened = self.widen(interval)
            return signal.retry_after if signal.retry_after > widened else widened
        if self.latency_rising(signal.latency, signal.prev_latency):
            return interval * self.soft_widen
        return interval - self.narrow

    def widen(self, interval: float) -> float:
        """The failure step: ``interval * backoff``, and always wider than ``interval``.

        Multiplying alone cannot widen an interval of 0 (``floor = 0``) or
        anything with ``backoff = 1``: the host would never back off again.
        Then the step is additive, ``max(narrow, MIN_WIDEN)`` seconds.
        """
        widened = interval * self.backoff
        if widened > interval:
            return widened
        return interval + (self.narrow if self.narrow > MIN_WIDEN else MIN_WIDEN)

    def latency_rising(self, latency: float, prev_latency: float) -> bool:
        """Latency above ``prev_latency * latency_rise`` by at least ``latency_min_rise``."""
        return (prev_latency > 0 and latency > prev_latency * self.latency_rise
                and latency - prev_latency >= self.latency_min_rise)

    def host_interval(self, adaptive: float, crawl_delay: float = 0.0) -> float:
        """Clamp ``adaptive`` into ``[max(floor, crawl_delay), ceiling]``.

        A crawl-delay above the ceiling wins over the ceiling: a site asking to
        be crawled slower is always honoured (the caller caps crawl-delay by
        policy before it gets here).
        """
        low = crawl_delay if crawl_delay > self.floor else self.floor
        if adaptive < low:
            return low
        if adaptive > self.ceiling:
            return low if low > self.ceiling else self.ceiling
        return adaptive

    def at_ceiling(self, interval: float) -> bool:
        """Whether a clamped interval sits at the ceiling."""
        return interval >= self.ceiling
