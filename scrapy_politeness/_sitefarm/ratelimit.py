"""The rate-limited host: a token bucket that answers 429 + Retry-After above its rate.

``rate_interval`` seconds per token, at most ``burst`` tokens, full at start;
a request with a whole token is served and spends it, any other gets 429 and
spends nothing. ``rate_change_after`` served requests later the interval
becomes ``rate_interval_after`` (a limit that drops mid-crawl). Retry-After is
sent in seconds or, with ``retry_after_form = "date"``, as an HTTP-date
rounded UP to the next whole second, so a client that honours the date never
comes back before ``retry_after`` seconds.
"""

from __future__ import annotations

import math
from email.utils import formatdate

from scrapy_politeness._sitefarm.spec import HostSpec


class TokenBucket:
    """One host's bucket; times are the farm's monotonic first-byte times."""

    __slots__ = ("host", "last", "served", "tokens")

    def __init__(self, host: HostSpec) -> None:
        self.host = host
        self.tokens = host.burst
        self.last: float | None = None
        self.served = 0

    def interval(self) -> float:
        h = self.host
        if h.rate_change_after and self.served >= h.rate_change_after:
            return h.rate_interval_after
        return h.rate_interval

    def admit(self, t: float) -> bool:
        """Whether a request arriving at ``t`` is served (and spend its token)."""
        if self.last is not None:
            step = self.interval()
            gained = (t - self.last) / step if step > 0 else math.inf
            self.tokens = min(self.host.burst, self.tokens + gained)
        self.last = t
        if self.tokens >= 1.0 - 1e-9:
            self.tokens -= 1.0
            self.served += 1
            return True
        return False


def retry_after_value(host: HostSpec, wall: float) -> str:
    """The Retry-After header of a 429 sent at wall-clock ``wall``."""
    if host.retry_after_form == "date":
        return formatdate(math.ceil(wall + host.retry_after), usegmt=True)
    return f"{host.retry_after:g}"
