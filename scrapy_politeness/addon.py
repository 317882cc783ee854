"""The Scrapy add-on: ``ADDONS = {"scrapy_politeness.Addon": 300}``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES

from .middleware import PolitenessMiddleware

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Addon"]

logger = logging.getLogger(__name__)

_MW_PATH = "scrapy_politeness.PolitenessMiddleware"
_MW_PATHS = {_MW_PATH, "scrapy_politeness.middleware.PolitenessMiddleware"}
_PQ_PATH = "scrapy_politeness.pqueue.PolitenessAwarePriorityQueue"
_FRONTIER_PATH = "scrapy_politeness.frontier.PolitenessFrontierQueue"


def _force(settings: BaseSettings, name: str, value: object) -> None:
    """Set ``name`` even over a user's value: two throttles would fight."""
    priority = max(settings.getpriority(name) or 0, SETTINGS_PRIORITIES["addon"])
    settings.set(name, value, priority=priority)


class Addon:
    """Enables the politeness middleware and turns off Scrapy's own throttles.

    AutoThrottle and DOWNLOAD_DELAY would space requests a second time (and
    AutoThrottle ignores 429/503 and Retry-After), so they are switched off,
    with a warning when the user had set them. The middleware is added at
    :attr:`PolitenessMiddleware.DOWNLOAD_PRIORITY` unless already listed.
    The scheduler queue that sees the requests waiting in the gate becomes
    ``SCHEDULER_PRIORITY_QUEUE`` unless the user chose one (addon priority).
    """

    def update_settings(self, settings: BaseSettings) -> None:
        mws = settings["DOWNLOADER_MIDDLEWARES"]
        listed = {k if isinstance(k, str) else f"{k.__module__}.{k.__qualname__}" for k in mws}
        if not (listed & _MW_PATHS) and PolitenessMiddleware not in mws:
            mws[_MW_PATH] = PolitenessMiddleware.DOWNLOAD_PRIORITY
        if settings.getbool("AUTOTHROTTLE_ENABLED"):
            logger.warning("scrapy-politeness turns AUTOTHROTTLE_ENABLED off: the politeness "
                           "middleware replaces AutoThrottle")
        _force(settings, "AUTOTHROTTLE_ENABLED", False)
        if settings.getfloat("DOWNLOAD_DELAY") > 0:
            logger.warning("scrapy-politeness sets DOWNLOAD_DELAY (%s) to 0: use "
                           "POLITENESS_FLOOR / POLITENESS_DEFAULT instead",
                           settings.getfloat("DOWNLOAD_DELAY"))
        _force(settings, "DOWNLOAD_DELAY", 0)
        _force(settings, "DOWNLOAD_DELAY_JITTER", 0)
        settings.set("SCHEDULER_PRIORITY_QUEUE", _PQ_PATH, priority="addon")
        _set_scheduler_queue(settings)


def _set_scheduler_queue(settings: BaseSettings) -> None:
    """Give scrapy-redis's scheduler the politeness-aware frontier queue.

    scrapy-redis's scheduler (or a subclass, under any import path) never
    reads ``SCHEDULER_PRIORITY_QUEUE``; its queue is ``SCHEDULER_QUEUE_CLASS``,
    set here at addon priority so a user's own choice wins. Any other
    scheduler that is not Scrapy's also bypasses the politeness-aware queue:
    requests then wait in the gate holding ``CONCURRENT_REQUESTS``, so say so.
    """
    from scrapy.core.scheduler import Scheduler
    from scrapy.utils.misc import load_object

    scheduler = settings.get("SCHEDULER")
    cls = load_object(scheduler) if isinstance(scheduler, str) else scheduler
    # By the MRO: Scrapy's BaseScheduler claims every class with its methods.
    if not isinstance(cls, type) or Scheduler in cls.__mro__:
        return
    try:
        from scrapy_redis.scheduler import Scheduler as RedisScheduler
    except ImportError:
        RedisScheduler = None
    if RedisScheduler is not None and RedisScheduler in cls.__mro__:
        settings.set("SCHEDULER_QUEUE_CLASS", _FRONTIER_PATH, priority="addon")
        return
    logger.warning("scrapy-politeness: SCHEDULER %s does not use the politeness-aware "
                   "queue (SCHEDULER_PRIORITY_QUEUE): requests will wait in the "
                   "middleware holding CONCURRENT_REQUESTS slots", scheduler)
