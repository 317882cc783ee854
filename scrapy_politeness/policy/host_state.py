"""One host group's bucket state: its interval, last start, and what the recovery remembers.

Apart from the tables so that the modules that read a host's state
(``recovery``) need not import the tables that call them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy_politeness.policy.config import Config

if TYPE_CHECKING:
    from scrapy_politeness.policy.retry_after import ServerDates

__all__ = ["HostState"]


class HostState:
    """What the gate knows of one host group (the bucket key).

    ``last_start`` is the start instant of the last fetch; the next one is
    eligible at ``last_start + interval`` with the interval evaluated when
    the next fetch is decided, so a Crawl-delay learnt meanwhile applies.

    The clamped intervals are read several times per request (the gate, the
    send slip, the queue's estimates) and change only with ``adaptive`` or
    ``crawl_delay``: they are kept in ``clamped``/``ip_clamped``, recomputed
    when either is set (``config`` is fixed for a state's life).
    """

    __slots__ = ("_adaptive", "_crawl_delay", "alone", "backlog", "backoffs", "ceiling_streak",
                 "clamped", "config", "dates", "dead", "fail_at", "fail_cost", "gap",
                 "good_at", "healthy_run", "ip_clamped", "last_start", "latency",
                 "not_before", "parked_until", "queue_wait", "queued_since", "requests",
                 "touched", "waited")

    def __init__(self, config: Config, adaptive: float, crawl_delay: float = 0.0, *,
                 last_start: float = float("-inf"), not_before: float = 0.0,
                 latency: float = 0.0, ceiling_streak: int = 0, dead: bool = False,
                 parked_until: float = 0.0, touched: float = 0.0, requests: int = 0,
                 waited: float = 0.0, backoffs: dict[str, int] | None = None,
                 fail_at: float = 0.0, good_at: float = 0.0, healthy_run: int = 0,
                 gap: float = 0.0, fail_cost: float = 0.0, dates: ServerDates | None = None,
                 queued_since: float = float("inf"), backlog: int = -1,
                 queue_wait: float = 0.0, alone: float = 0.0) -> None:
        self.config = config
        self._adaptive = adaptive
        self._crawl_delay = crawl_delay
        self.clamped = config.host_interval(adaptive, crawl_delay)
        self.ip_clamped = config.host_interval(adaptive)
        self.last_start = last_start
        self.not_before = not_before
        self.latency = latency
        self.ceiling_streak = ceiling_streak
        self.dead = dead
        self.parked_until = parked_until
        self.touched = touched
        self.requests = requests
        self.waited = waited
        self.backoffs = backoffs  # by cause, created on the first one
        # The fast recovery's memory (policy/recovery.py); unused by "additive".
        self.fail_at = fail_at
        self.good_at = good_at
        self.healthy_run = healthy_run
        self.gap = gap  # start-to-start time before the last start (0: none yet)
        self.fail_cost = fail_cost  # what the last failure cost (its pause), seconds
        self.dates = dates  # its recent Date headers (HTTP-date Retry-After)
        # Set by the scheduler queue when it hands a request out: since when the
        # host has had requests waiting there, and how many are left (-1: unknown).
        self.queued_since = queued_since
        self.backlog = backlog
        # What the report says of the host (this run only): request-seconds its
        # requests waited in the scheduler queue, and the seconds it was the only
        # host with requests waiting (the crawl ran for it alone).
        self.queue_wait = queue_wait
        self.alone = alone

    def __repr__(self) -> str:
        return (f"HostState(adaptive={self._adaptive!r}, crawl_delay={self._crawl_delay!r}, "
                f"last_start={self.last_start!r}, dead={self.dead!r})")

    @property
    def adaptive(self) -> float:
        """The controller's interval, unclamped by the crawl-delay."""
        return self._adaptive

    @adaptive.setter
    def adaptive(self, value: float) -> None:
        if value == self._adaptive:
            return
        self._adaptive = value
        self.clamped = self.config.host_interval(value, self._crawl_delay)
        self.ip_clamped = self.config.host_interval(value)

    @property
    def crawl_delay(self) -> float:
        """The Crawl-delay honoured (0: none)."""
        return self._crawl_delay

    @crawl_delay.setter
    def crawl_delay(self, value: float) -> None:
        self._crawl_delay = value
        self.clamped = self.config.host_interval(self._adaptive, value)

    def interval(self) -> float:
        """The clamped interval in force now (``clamped``)."""
        return self.clamped

    def ip_interval(self) -> float:
        """The spacing this host's fetch imposes on its IP: the clamped adaptive
        interval without the crawl-delay (``ip_clamped``). Backoff is a sign the machine
        struggles, so every vhost on it slows down; a Crawl-delay is one
        site's wish and stays with that site."""
        return self.ip_clamped

    def eligible_at(self) -> float:
        nxt = self.last_start + self.clamped
        return nxt if nxt > self.not_before else self.not_before
