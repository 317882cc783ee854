"""What the middleware checks and says once, when the crawl starts.

Misspelt setting names, a second throttle left on, a bad value or a backend
the crawl cannot use, a Scrapy that renamed a private attribute we read, and
the one INFO line that says the plugin is on and with which policy. A bad
value or a backend failure is logged as one ERROR line first (Scrapy then
prints its own traceback of the failed start), and raises from the
middleware's ``from_crawler``, so Scrapy counts the crawl as failed to start
and ``scrapy crawl`` exits with 1: a cron job or CI notices.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from scrapy_politeness.observe.live_line import plural
from scrapy_politeness.scrapy_internals import missing
from scrapy_politeness.settings import PolitenessSettings, unknown_names

__all__ = ["BackendNotUsable", "check_asyncio", "check_backend", "start_line",
           "warn_missing_internals", "warn_unknown_settings"]

logger = logging.getLogger(__name__)

REDIS_EXTRA = "pip install 'redis>=5' (the [redis] extra of scrapy-politeness)"
PRIORITY_NAMES = {0: "default", 10: "command", 15: "addon", 20: "project", 30: "spider",
                  40: "cmdline"}
"""Scrapy's settings priorities by number: where a value came from."""


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


def load_settings(crawler_settings: Any) -> PolitenessSettings:
    """The plugin's settings, checked; a bad value or backend is logged as one ERROR
    line before it raises, so it is the first thing a user sees."""
    warn_unknown_settings(crawler_settings)
    try:
        settings = PolitenessSettings.from_settings(crawler_settings)
        if settings.enabled:
            check_backend(settings.backend)
            check_asyncio()
    except (ValueError, BackendNotUsable) as exc:
        logger.error("scrapy-politeness cannot start: %s", exc)
        raise
    if settings.enabled:
        warn_other_throttles(crawler_settings)
    return settings


def warn_other_throttles(crawler_settings: Any) -> list[str]:
    """Warn when DOWNLOAD_DELAY or AutoThrottle would space requests a second time.

    The add-on turns both off; a project that lists only the middleware (or
    sets them again at a higher priority) runs two throttles at once.
    """
    messages = []
    delay = crawler_settings.getfloat("DOWNLOAD_DELAY")
    if delay > 0:
        messages.append(f"scrapy-politeness: DOWNLOAD_DELAY = {delay:g} spaces requests a second "
                        "time on top of the politeness buckets; set DOWNLOAD_DELAY = 0 (the "
                        "add-on, ADDONS = {'scrapy_politeness.Addon': 300}, does it for you) and "
                        "use POLITENESS_FLOOR / POLITENESS_DEFAULT instead")
    if crawler_settings.getbool("AUTOTHROTTLE_ENABLED"):
        messages.append("scrapy-politeness: AUTOTHROTTLE_ENABLED = True runs a second throttle "
                        "that ignores 429/503 and Retry-After; set AUTOTHROTTLE_ENABLED = False "
                        "(the add-on does it for you)")
    for message in messages:
        logger.warning("%s", message)
    return messages


def warn_missing_internals(crawler: Any) -> list[str]:
    """WARN once if this Scrapy renamed a private attribute the plugin reads.

    The plugin still works without them, only slower to notice new work or a
    close; saying so beats a silent slowdown after an upgrade."""
    gone = missing(crawler)
    if gone:
        logger.warning("scrapy-politeness: this Scrapy has no %s; the crawl works but may "
                       "idle up to 5 s where it could go on (report it with your Scrapy "
                       "version)", ", ".join(gone))
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


def _s(value: float) -> str:
    """Seconds for people: 0.9, not 0.8999999999999999."""
    return f"{round(value, 3):g}s"


def start_line(settings: PolitenessSettings, crawler_settings: Any) -> str:
    """One INFO line: the plugin is on, with the intervals and parts it will use."""
    c = settings.config
    backend = settings.backend
    if backend != "memory":
        from scrapy_politeness.distributed.redis_backend import redact_url

        backend = redact_url(backend)
    queue = str(crawler_settings.get("SCHEDULER_PRIORITY_QUEUE") or "")
    live = (f"live line every {_s(settings.log_interval)}" if settings.log_interval > 0
            else "no live line")
    n = len(settings.hosts)
    overrides = f", {n} host override{'s' if n != 1 else ''}" if n else ""
    line = (f"scrapy-politeness on: per host start {_s(c.default)}, floor {_s(c.floor)}, "
            f"ceiling {_s(c.ceiling)}{overrides}; per IP floor {_s(c.ip_floor)}; grouping "
            f"{settings.grouping}; backend {backend}; queue {queue.rpartition('.')[2]}; "
            f"dead after {plural(settings.dead_after, 'fetch', 'fetches')} at the ceiling; {live}")
    origins = settings_origins(crawler_settings)
    return f"{line}; {origins}" if origins else line


def settings_origins(crawler_settings: Any) -> str:
    """The POLITENESS_* settings given a value, grouped by where it came from
    (project, spider, cmdline...): a spider's ``custom_settings`` silently wins
    over settings.py, so the start line says which source each value is from."""
    getpriority = getattr(crawler_settings, "getpriority", None)
    if getpriority is None:
        return ""
    by_origin: dict[str, list[str]] = {}
    for name in sorted(n for n in crawler_settings if str(n).startswith("POLITENESS_")):
        priority = getpriority(name) or 0
        if priority > 0:
            origin = PRIORITY_NAMES.get(priority, f"priority {priority}")
            by_origin.setdefault(origin, []).append(name)
    return "; ".join(f"{', '.join(names)} from {origin}" for origin, names in by_origin.items())
