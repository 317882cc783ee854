"""The Scrapy add-on: ``ADDONS = {"scrapy_politeness.Addon": 300}``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES
from scrapy.utils.misc import load_object

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.settings import PRIORITY_NAMES
from scrapy_politeness.startup.throttles import replaced_message

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["Addon"]

logger = logging.getLogger(__name__)

_MW_PATH = "scrapy_politeness.PolitenessMiddleware"
_PQ_PATH = "scrapy_politeness.pqueue.PolitenessAwarePriorityQueue"
_FRONTIER_PATH = "scrapy_politeness.frontier.PolitenessFrontierQueue"
_HTTP_HANDLER_PATH = "scrapy_politeness.downloader.http_handler.BoundedIdleHTTP11DownloadHandler"


def _is(component: Any, cls: type) -> bool:
    """``component`` (a class or an import path, any of its paths) is ``cls`` or a subclass."""
    if isinstance(component, str):
        try:
            component = load_object(component)
        except (ImportError, NameError, ValueError, AttributeError):
            return False  # not ours; Scrapy reports a bad path itself when it loads it
    return isinstance(component, type) and issubclass(component, cls)


def _force(settings: BaseSettings, name: str, value: object) -> None:
    """Set ``name`` even over a user's value (a second throttle), saying so
    in the words the middleware uses when it finds the value on its own path."""
    user_priority = settings.getpriority(name) or 0
    try:
        same = (settings.getbool(name) == value if isinstance(value, bool)
                else settings.getfloat(name) == value)
    except ValueError:  # not even a number: certainly not the value wanted
        same = False
    if user_priority > SETTINGS_PRIORITIES["default"] and not same:
        origin = PRIORITY_NAMES.get(user_priority, f"priority {user_priority}")
        logger.warning("%s", replaced_message(name, settings[name], origin))
    settings.set(name, value, priority=max(user_priority, SETTINGS_PRIORITIES["addon"]))


class Addon:
    """Enables the politeness middleware and turns off Scrapy's own throttles.

    AutoThrottle and DOWNLOAD_DELAY would hold requests in Scrapy's download
    slots after the gate released them (and AutoThrottle ignores 429/503 and
    Retry-After), so they are switched off, with a warning when the user had
    set them (``scrapy startproject`` writes ``DOWNLOAD_DELAY = 1``); the
    middleware does the same on its own, and for what is set after add-ons
    (see :mod:`scrapy_politeness.startup.throttles`). The middleware is added at
    :attr:`PolitenessMiddleware.DOWNLOAD_PRIORITY` unless already listed,
    under any import path. The scheduler queue that sees the requests waiting
    in the gate becomes ``SCHEDULER_PRIORITY_QUEUE`` unless the user chose one;
    then the user's stays, with a warning if it is not gate-aware.
    """

    def update_settings(self, settings: BaseSettings) -> None:
        mws = settings["DOWNLOADER_MIDDLEWARES"]
        if not any(_is(k, PolitenessMiddleware) for k in mws):
            mws[_MW_PATH] = PolitenessMiddleware.DOWNLOAD_PRIORITY
        _force(settings, "AUTOTHROTTLE_ENABLED", False)
        _force(settings, "DOWNLOAD_DELAY", 0)
        _force(settings, "DOWNLOAD_DELAY_JITTER", 0)
        self._queue(settings)
        _set_scheduler_queue(settings)
        _set_http_handlers(settings)

    @staticmethod
    def _queue(settings: BaseSettings) -> None:
        if (settings.getpriority("SCHEDULER_PRIORITY_QUEUE") or 0) <= SETTINGS_PRIORITIES["addon"]:
            settings.set("SCHEDULER_PRIORITY_QUEUE", _PQ_PATH, priority="addon")
            return
        from scrapy_politeness.scheduler.queue import PolitenessAwarePriorityQueue

        chosen = settings["SCHEDULER_PRIORITY_QUEUE"]
        if not _is(chosen, PolitenessAwarePriorityQueue):
            logger.warning("scrapy-politeness keeps your SCHEDULER_PRIORITY_QUEUE %r: requests "
                           "held in the gate can then block others (%s is the gate-aware one)",
                           chosen, _PQ_PATH)


def _set_http_handlers(settings: BaseSettings) -> None:
    """Bound the idle connections of Scrapy's HTTP/1.1 handler by the open-file
    limit (see :mod:`scrapy_politeness.downloader.http_handler`), for the
    schemes whose handler the user did not choose."""
    handlers = settings["DOWNLOAD_HANDLERS"]
    for scheme in ("http", "https"):
        if scheme not in handlers:
            handlers[scheme] = _HTTP_HANDLER_PATH


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
