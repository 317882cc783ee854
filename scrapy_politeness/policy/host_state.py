"""One host group's bucket state: its interval, last start, and what the recovery remembers.

Apart from the tables so that the modules that read a host's state
(``recovery``) need not import the tables that call them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy_politeness.policy.config import Config

if TYPE_CHECKING:
    from scrapy_politeness.policy.retry_after import ServerDates

__all__ = ["HostState"]


@dataclass(slots=True)
class HostState:
    """What the gate knows of one host group (the bucket key).

    ``last_start`` is the start instant of the last fetch; the next one is
    eligible at ``last_start + interval`` with the interval evaluated when
    the next fetch is decided, so a Crawl-delay learnt meanwhile applies.
    """

    config: Config
    adaptive: float
    crawl_delay: float = 0.0
    last_start: float = float("-inf")
    not_before: float = 0.0
    latency: float = 0.0
    ceiling_streak: int = 0
    dead: bool = False
    parked_until: float = 0.0
    touched: float = 0.0
    requests: int = 0
    waited: float = 0.0
    backoffs: dict[str, int] | None = None  # by cause, created on the first one
    # The fast recovery's memory (policy/recovery.py); unused by "additive".
    fail_at: float = 0.0
    good_at: float = 0.0
    healthy_run: int = 0
    gap: float = 0.0  # start-to-start time before the last start (0: none yet)
    fail_cost: float = 0.0  # what the last failure cost (its pause), seconds
    dates: ServerDates | None = None  # its recent Date headers (HTTP-date Retry-After)
    # Set by the scheduler queue when it hands a request out: since when the
    # host has had requests waiting there, and how many are left (-1: unknown).
    queued_since: float = float("inf")
    backlog: int = -1
    # What the report says of the host (this run only): request-seconds its
    # requests waited in the scheduler queue, and the seconds it was the only
    # host with requests waiting (the crawl ran for it alone).
    queue_wait: float = 0.0
    alone: float = 0.0

    def interval(self) -> float:
        """The clamped interval in force now."""
        return self.config.host_interval(self.adaptive, self.crawl_delay)

    def ip_interval(self) -> float:
        """The spacing this host's fetch imposes on its IP: the clamped adaptive
        interval without the crawl-delay. Backoff is a sign the machine
        struggles, so every vhost on it slows down; a Crawl-delay is one
        site's wish and stays with that site."""
        return self.config.host_interval(self.adaptive)

    def eligible_at(self) -> float:
        nxt = self.last_start + self.interval()
        return nxt if nxt > self.not_before else self.not_before
