"""The one INFO line that says the plugin is on, with which policy, and where each
value came from."""

from __future__ import annotations

from typing import Any

from scrapy_politeness.observe.live_line import plural
from scrapy_politeness.settings import PRIORITY_NAMES, PolitenessSettings

__all__ = ["queue_in_use", "settings_origins", "start_line"]

_FRONTIER = "scrapy_politeness.distributed.frontier.PolitenessFrontierQueue"


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
    queue = queue_in_use(crawler_settings)
    live = (f"live line every {_s(settings.log_interval)}" if settings.log_interval > 0
            else "no live line")
    n = len(settings.hosts)
    overrides = f", {n} host override{'s' if n != 1 else ''}" if n else ""
    line = (f"scrapy-politeness on: per host start {_s(c.default)}, floor {_s(c.floor)}, "
            f"ceiling {_s(c.ceiling)}{overrides}; per IP floor {_s(c.ip_floor)}; grouping "
            f"{settings.grouping}; backend {backend}; {queue}; "
            f"{'suspended' if settings.on_ceiling == 'suspend' else 'dead'} after "
            f"{plural(settings.dead_after, 'fetch', 'fetches')} at the ceiling; {live}")
    origins = settings_origins(crawler_settings)
    return f"{line}; {origins}" if origins else line


def _name(path: Any) -> str:
    """A class or import path, by its class name."""
    return (path.__name__ if isinstance(path, type) else str(path or "")).rpartition(".")[2]


def queue_in_use(crawler_settings: Any) -> str:
    """Where the requests wait, for the start line: the queue this scheduler reads.

    Scrapy's scheduler reads SCHEDULER_PRIORITY_QUEUE; scrapy-redis's reads
    SCHEDULER_QUEUE_CLASS (the shared frontier, when it is ours); another
    scheduler, its own.
    """
    from scrapy.core.scheduler import Scheduler
    from scrapy.utils.misc import load_object

    scheduler = crawler_settings.get("SCHEDULER")
    try:
        cls = load_object(scheduler) if isinstance(scheduler, str) else scheduler
    except (ImportError, NameError, ValueError, AttributeError):
        cls = None  # Scrapy reports a bad path itself
    if not isinstance(cls, type) or Scheduler in cls.__mro__:
        return f"queue {_name(crawler_settings.get('SCHEDULER_PRIORITY_QUEUE'))}"
    try:
        from scrapy_redis.scheduler import Scheduler as RedisScheduler
    except ImportError:
        RedisScheduler = None
    if RedisScheduler is not None and RedisScheduler in cls.__mro__:
        from scrapy_redis import defaults

        queue = crawler_settings.get("SCHEDULER_QUEUE_CLASS") or defaults.SCHEDULER_QUEUE_CLASS
        try:
            queue_cls = load_object(queue) if isinstance(queue, str) else queue
        except (ImportError, NameError, ValueError, AttributeError):
            queue_cls = None
        # By name: importing the frontier here would tie the start to the request path.
        frontier = any(f"{c.__module__}.{c.__qualname__}" == _FRONTIER
                       for c in getattr(queue_cls, "__mro__", ()))
        kind = "the shared frontier" if frontier else "scrapy-redis queue"
        return f"{kind} {_name(queue)}"
    return f"scheduler {_name(cls)} and its own queue"


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
