"""The scheduler queue under ``JOBDIR``: per-host directories, saved state, rescue.

Each host key has its disk queues in a directory named as Scrapy names its
slots' (``scrapy_internals.path_safe``); the queue's ``close()`` returns
``{key: priorities}`` and its constructor's ``startprios`` restores it, as for
``DownloaderAwarePriorityQueue``.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy_politeness.scheduler.host_heap import HostEntry
from scrapy_politeness.scrapy_internals import path_safe

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.scheduler.handed_out import HandedOut
    from scrapy_politeness.scheduler.host_heap import HostHeap
    from scrapy_politeness.scheduler.host_queue import HostQueue

__all__ = ["check_startprios", "host_dir", "reclaim", "rescue", "restore"]

logger = logging.getLogger("scrapy_politeness.scheduler.queue")


def check_startprios(queue: object, startprios: Any) -> dict[str, Iterable[int]]:
    """The saved state, refused with a ValueError if another queue class wrote it."""
    if startprios and not isinstance(startprios, dict):
        raise ValueError(
            f"{type(queue).__name__} expects its saved state as a dict of host key -> "
            f"priorities, got {type(startprios).__name__}: the JOBDIR was written by "
            "another SCHEDULER_PRIORITY_QUEUE; resume it with the same queue class")
    return startprios or {}


def restore(saved: dict[str, Iterable[int]],
            make_queue: Callable[[str, Iterable[int]], HostQueue],
            index: HostHeap, now: float) -> int:
    """Reopen the saved host queues into ``index``; the number of requests in them."""
    total = 0
    for host_key, prios in saved.items():
        queue = make_queue(host_key, prios)
        if not queue:
            queue.close()
            continue
        host = index.hosts[host_key] = HostEntry(host_key, queue)
        host.since = now
        index.enter(host, now)
        total += len(queue)
    return total


def host_dir(base: str, host_key: str) -> str:
    """The directory (the downstream queue's key) of one host key."""
    return base + "/" + path_safe(host_key)


def reclaim(base: str, host_key: str) -> None:
    """Remove a closed host queue's directory; rmdir leaves it if files remain."""
    if base:
        with suppress(OSError):
            Path(base, path_safe(host_key)).rmdir()


def rescue(handed: HandedOut, push: Callable[[Request], None],
           stats: StatsCollector | None) -> None:
    """Push back the requests handed out that never reached the downloader.

    The gate drops the requests waiting in it when the spider closes; without
    this a paused crawl would lose them.
    """
    rescued = lost = 0
    for request in handed.undelivered():
        handed.forget(request)
        try:
            push(request)
        except ValueError as exc:  # unserializable: it came from the memory queue
            lost += 1
            logger.warning("politeness: cannot keep %s for the next run (JOBDIR): it "
                           "cannot be serialised (%s); it is lost", request, exc)
            continue
        rescued += 1
    if stats is not None:
        if rescued:
            stats.inc_value("politeness/scheduler/rescued", rescued)
        if lost:
            stats.inc_value("politeness/scheduler/lost_unserializable", lost)
