"""The scheduler queue's host queues, and under ``JOBDIR`` their saved state and rescue.

:class:`HostQueues` makes each host key's queue: with Scrapy's memory queues a
``MemoryHostQueue``; under ``JOBDIR`` with Scrapy's pickle disk queues (the
defaults) a :class:`~.request_store.StoredHost` in the one sqlite3 store,
whose saved state is ``{" store": [requests]}``; with any other class a
``ScrapyPriorityQueue`` per host, its disk queues in a directory named by
``scrapy_internals.path_safe`` and its saved state ``{key: priorities}``, as
for ``DownloaderAwarePriorityQueue``. A JOBDIR saved that way by an earlier
version is moved into the store when it is resumed.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.pqueues import ScrapyPriorityQueue

from scrapy_politeness.jobdir.request_store import (
    STORE_STATE,
    RequestStore,
    StoredHost,
    disk_order,
)
from scrapy_politeness.scheduler.host_heap import HostEntry
from scrapy_politeness.scheduler.host_queue import MemoryHostQueue, memory_order
from scrapy_politeness.scrapy_internals import path_safe

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.pqueues import QueueProtocol
    from scrapy.statscollectors import StatsCollector

    from scrapy_politeness.scheduler.handed_out import HandedOut
    from scrapy_politeness.scheduler.host_heap import HostHeap
    from scrapy_politeness.scheduler.host_queue import HostQueue

__all__ = ["HostQueues", "check_startprios", "host_dir", "reclaim", "rescue", "restore"]

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


class HostQueues:
    """Makes the host queues of one scheduler queue; owns the store under ``JOBDIR``."""

    def __init__(self, crawler: Crawler, queue_cls: type[QueueProtocol], key: str,
                 start_queue_cls: type[QueueProtocol] | None) -> None:
        self.crawler = crawler
        self.key = key
        self.queue_cls = queue_cls
        self.start_queue_cls = start_queue_cls
        self.memory = memory_order(queue_cls, start_queue_cls)
        order = disk_order(queue_cls, start_queue_cls) if key else None
        self.store = None if order is None else RequestStore(key, crawler.spider, *order)

    def make(self, host_key: str, startprios: Iterable[int] = ()) -> HostQueue:
        if self.store is not None and not startprios:
            return StoredHost(self.store, host_key)
        if self.memory is not None and not startprios:
            return MemoryHostQueue(*self.memory)
        return ScrapyPriorityQueue(self.crawler, self.queue_cls, host_dir(self.key, host_key),
                                   startprios, start_queue_cls=self.start_queue_cls)

    def restore(self, saved: dict[str, Iterable[int]], index: HostHeap, now: float) -> int:
        """Reopen what was saved into ``index``; the number of requests."""
        store = self.store
        if store is None:
            return restore(saved, self.make, index, now)
        old = {k: v for k, v in saved.items() if k != STORE_STATE}
        if old:  # saved with a directory per host: into the store, once
            self._move_into_store(old)
        total = 0
        for host_key, stored in store.hosts().items():
            host = index.hosts[host_key] = HostEntry(host_key, StoredHost(store, host_key, stored))
            host.since = now
            index.enter(host, now)
            total += stored
        return total

    def _move_into_store(self, saved: dict[str, Iterable[int]]) -> None:
        assert self.store is not None
        for host_key, prios in saved.items():
            queue = self.make(host_key, prios)
            while (request := queue.pop()) is not None:
                self.store.push(host_key, request, in_order=True)
            queue.close()
            reclaim(self.key, host_key)
        self.store.commit()

    def reclaim(self, host_key: str) -> None:
        """A host queue was closed: remove its directory (none in the store)."""
        if self.store is None:
            reclaim(self.key, host_key)

    def close(self, hosts: Iterable[HostEntry]) -> dict[str, list[int]]:
        """Close every host queue (and the store); the state to save.

        With the store no host is visited: a :class:`StoredHost` has nothing to
        close (every host queue is one under the store: ``make``), so the close
        costs the store's tail, not a step per host ever queued."""
        state = {}
        if self.store is not None:
            stored = self.store.close()
            if stored:
                state[STORE_STATE] = [stored]
            return state
        for host in hosts:
            if prios := host.queue.close():
                state[host.key] = prios
            else:
                self.reclaim(host.key)
        return state
