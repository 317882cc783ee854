"""What a Retry-After, a Crawl-delay or an outcome does to a host.

These used to be decided in the Scrapy glue; they are policy, so they live
here, on plain numbers, and are tested on their own.
"""

from __future__ import annotations

from scrapy_politeness.policy.tables import Outcome

__all__ = ["backoff_cause_of", "crawl_delay_verdict", "retry_after_verdict"]

CRAWL_DELAY_OVER_MAX = ("skip", "cap", "honour")


def retry_after_verdict(retry_after: float | None, limit: float) -> tuple[float, bool]:
    """The pause to honour (seconds, 0 for none) and whether to park the host.

    A Retry-After above ``limit`` (POLITENESS_MAX_RETRY_AFTER) would stall the
    crawl for that long: the host is parked instead (its requests dropped
    until then), and nothing is honoured as a pause.
    """
    if retry_after is None:
        return 0.0, False
    if retry_after > limit:
        return 0.0, True
    return retry_after, False


def crawl_delay_verdict(delay: float, limit: float | None, over_max: str) -> float | None:
    """The Crawl-delay to apply, or None to skip the host (park it for good).

    Above ``limit`` (POLITENESS_MAX_CRAWL_DELAY; None: no limit) the policy
    ``over_max`` decides: ``"skip"`` the host, ``"cap"`` the delay at the
    limit, or ``"honour"`` it as asked.
    """
    if limit is None or delay <= limit:
        return delay
    if over_max == "skip":
        return None
    if over_max == "cap":
        return limit
    if over_max == "honour":
        return delay
    raise ValueError(f"unknown Crawl-delay policy {over_max!r}; one of {CRAWL_DELAY_OVER_MAX}")


def backoff_cause_of(status: int, outcome: Outcome) -> str | None:
    """The ``politeness/backoff/<cause>`` of one feedback, None when it did not widen."""
    if outcome.backed_off:
        return "429" if status == 429 else "transport" if status == 0 else "5xx"
    if outcome.soft_widened:
        return "latency"
    return None
