"""What the middleware checks once, when the crawl starts.

Misspelt setting names, a bad value or a backend the crawl cannot use (one
ERROR line, and the middleware's ``from_crawler`` raises, so Scrapy counts the
crawl as failed to start), Scrapy's own throttles (switched off, each named in
a warning), and a Scrapy that renamed a private attribute we read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from scrapy_politeness.scrapy_internals import START_REQUESTS, missing
from scrapy_politeness.settings import PolitenessSettings, unknown_names
from scrapy_politeness.startup.failed_start import quiet_failed_start
from scrapy_politeness.startup.throttles import (
    concurrency_warnings,
    slot_delays,
    take_over,
    throttle_warnings,
    with_slot_floors,
)

__all__ = ["BackendNotUsable", "check_asyncio", "check_backend", "load_settings",
           "warn_missing_internals", "warn_unknown_settings"]

logger = logging.getLogger(__name__)

REDIS_EXTRA = "pip install 'redis>=5' (the [redis] extra of scrapy-politeness)"


class BackendNotUsable(RuntimeError):
    """POLITENESS_BACKEND names a backend this crawl cannot use; the message says the fix."""


def warn_unknown_settings(names: Iterable[str]) -> list[str]:
    """Warn about each POLITENESS_* name no setting has; the warnings, for tests."""
    messages = []
    for name, close in unknown_names(names):
        hint = f"; did you mean {close}?" if close else ""
        messages.append(f"scrapy-politeness: unknown setting {name} is ignored{hint}")
        logger.warning("%s", messages[-1])
    return messages


def load_settings(crawler_settings: Any, crawler: Any = None) -> PolitenessSettings:
    """The plugin's settings, checked; a bad value or backend is logged as one ERROR
    line before it raises, so it is the first thing a user sees (and the last:
    see :func:`quiet_failed_start`). Given the ``crawler``, Scrapy's own
    throttles are switched off for it (:mod:`.throttles`)."""
    warn_unknown_settings(crawler_settings)
    slot_messages: list[str] = []
    try:
        settings = PolitenessSettings.from_settings(crawler_settings)
        if settings.enabled:
            delays = slot_delays(crawler_settings)
            if delays:
                settings, slot_messages = with_slot_floors(settings, delays)
            check_backend(settings.backend)
            check_asyncio()
    except (ValueError, BackendNotUsable) as exc:
        logger.error("scrapy-politeness cannot start: %s", exc)
        quiet_failed_start(exc)
        raise
    if settings.enabled:
        for message in slot_messages:
            logger.warning("%s", message)
        announced = throttle_warnings(crawler_settings) + slot_messages
        concurrency_warnings(crawler_settings)
        if crawler is not None:
            take_over(crawler, announced=bool(announced))
    return settings


def warn_missing_internals(crawler: Any) -> list[str]:
    """WARN once if this Scrapy renamed a private attribute the plugin reads.

    The plugin still works without them, slower to notice new work or a close,
    or (without the download slots) unable to set a slot delay to 0; saying so
    beats a silent change after an upgrade."""
    gone = missing(crawler)
    if gone:
        costs = ["the crawl may idle up to 5 s where it could go on"]
        if "engine.downloader.slots" in gone:
            costs.append("a download slot delay cannot be set to 0: keep DOWNLOAD_DELAY = 0, "
                         "AutoThrottle off and no delay in DOWNLOAD_SLOTS")
        if START_REQUESTS in gone:
            costs.append("a crawl left with only suspended hosts waits for their probes "
                         "instead of closing")
        logger.warning("scrapy-politeness: this Scrapy has no %s; %s (report it with your "
                       "Scrapy version)", ", ".join(gone), "; ".join(costs))
    return gone


def check_backend(url: str, timeout: float = 5.0) -> None:
    """PING the shared backend once, synchronously, before the crawl starts.

    Blocking here is deliberate: it happens once, before any request, and a
    failure must stop the crawl before it starts rather than close it later
    with a ``finished`` status.
    """
    if url == "memory":
        return
    from scrapy_politeness.distributed.redis_backend import redact_url

    shown = redact_url(url)
    try:
        import redis
    except ImportError:
        raise BackendNotUsable(
            f"POLITENESS_BACKEND={shown} needs the redis client, which is not installed: "
            f"{REDIS_EXTRA}") from None
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise BackendNotUsable(
            f"POLITENESS_BACKEND={shown} is unreachable ({type(exc).__name__}); start Redis "
            f"there or set POLITENESS_BACKEND = 'memory'") from None
    finally:
        client.close()


def check_asyncio() -> None:
    """The gate's timers and the DNS resolver run on the asyncio event loop."""
    from scrapy.utils.asyncio import is_asyncio_available

    if not is_asyncio_available():
        raise ValueError(
            "scrapy-politeness needs an asyncio event loop: set TWISTED_REACTOR = "
            "'twisted.internet.asyncioreactor.AsyncioSelectorReactor' (Scrapy's default)"
        )
