"""A host key's requests in memory, in Scrapy's order, on plain deques.

The scheduler queue keeps one queue per host key. Scrapy's
``ScrapyPriorityQueue`` builds a downstream queue through
``build_from_crawler`` for every priority that fills, and closes it when it
empties: with thousands of hosts holding a request or two each, that was one
factory call and about eight objects per request (and objects are what every
full garbage collection walks). When the scheduler's memory queues are
Scrapy's own (``scrapy.squeues.FifoMemoryQueue``/``LifoMemoryQueue``, the
defaults), :class:`MemoryHostQueue` keeps the same order on deques: lowest
``-priority`` first; at one priority, other requests before start requests
(as ``ScrapyPriorityQueue`` with a start queue); within each, FIFO or LIFO as
the configured class. Any other class (a disk queue with ``JOBDIR``, a user's
own) keeps ``ScrapyPriorityQueue``.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, TypeAlias

from scrapy.pqueues import ScrapyPriorityQueue
from scrapy.squeues import FifoMemoryQueue, LifoMemoryQueue

from scrapy_politeness.jobdir.request_store import StoredHost, order_in

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.pqueues import QueueProtocol

__all__ = ["SMALL", "HostQueue", "MemoryHostQueue", "memory_order"]

SMALL = 8  # requests a host keeps in its compact list (a list pops its front in O(n))

# class -> pops the newest first
_ORDER: dict[object, bool] = {FifoMemoryQueue: False, LifoMemoryQueue: True}


def memory_order(queue_cls: type[QueueProtocol],
                 start_queue_cls: type[QueueProtocol] | None) -> tuple[bool, bool | None] | None:
    """``(lifo, start_lifo)`` when both classes are Scrapy's memory queues
    (``start_lifo`` None: no start queue), else None."""
    return order_in(_ORDER, queue_cls, start_queue_cls)



class MemoryHostQueue:
    """``ScrapyPriorityQueue``'s protocol and order for Scrapy's memory queues.

    One deque per (priority, start request or not), under the key
    ``2 * -priority + is_start``: the smallest key is the next queue, which
    puts the lowest ``-priority`` first and, at one priority, the other
    requests before the start requests, as ``ScrapyPriorityQueue.pop`` does.

    Most hosts of a broad crawl hold a request or two, all under one key: those
    keep them in one short list (``_few``, a few dozen bytes) instead of a dict
    of deques (about 900 bytes a host); a second key or more than ``SMALL``
    requests spreads them, and an emptied queue is compact again.
    """

    __slots__ = ("_few", "_len", "_lifo", "_queues", "_start_lifo", "curkey")

    def __init__(self, lifo: bool, start_lifo: bool | None) -> None:
        self._lifo = lifo
        self._start_lifo = start_lifo  # None: start requests share the other queues
        self._few: list[Request] | None = None  # every request, all under curkey (compact)
        self._queues: dict[int, deque[Request]] | None = None  # spread; None: compact
        self.curkey: int | None = None
        self._len = 0

    def push(self, request: Request) -> None:
        key = -2 * request.priority
        if self._start_lifo is not None and request.meta.get("is_start_request", False):
            key += 1
        self._len += 1
        queues = self._queues
        if queues is None:
            few = self._few
            if not few:
                if few is None:
                    self._few = [request]
                else:
                    few.append(request)
                self.curkey = key
                return
            if key == self.curkey and len(few) < SMALL:
                few.append(request)
                return
            queues = self._queues = {self.curkey: deque(few)}  # type: ignore[dict-item]
            self._few = None
        q = queues.get(key)
        if q is None:
            q = queues[key] = deque()
        q.append(request)
        if self.curkey is None or key < self.curkey:
            self.curkey = key

    def _next(self, *, remove: bool) -> Request | None:
        key = self.curkey
        if key is None:
            return None
        lifo = self._start_lifo if key & 1 else self._lifo
        queues = self._queues
        if queues is None:
            few: list[Request] = self._few  # type: ignore[assignment]  # curkey: not empty
            if not remove:
                return few[-1] if lifo else few[0]
            self._len -= 1
            request = few.pop() if lifo else few.pop(0)
            if not few:
                self.curkey = None
            return request
        q = queues[key]  # curkey always names a non-empty queue
        if not remove:
            return q[-1] if lifo else q[0]
        request = q.pop() if lifo else q.popleft()
        self._len -= 1
        if not q:
            del queues[key]
            if queues:
                self.curkey = min(queues)
            else:  # compact again
                self.curkey = None
                self._queues = None
        return request

    def pop(self) -> Request | None:
        return self._next(remove=True)

    def peek(self) -> Request | None:
        """What :meth:`pop` returns next (``ScrapyPriorityQueue.peek`` looks at
        the start queue first, which ``pop`` does not)."""
        return self._next(remove=False)

    def close(self) -> list[int]:
        """The priorities still holding requests (dropped: memory does not persist)."""
        if self._queues is None:
            prios = [] if self.curkey is None else [self.curkey >> 1]
        else:  # floor: 2p + 1 >> 1 == p
            prios = sorted({key >> 1 for key in self._queues})
        self._queues = self._few = None
        self.curkey = None
        self._len = 0
        return prios

    def __len__(self) -> int:
        return self._len


HostQueue: TypeAlias = ScrapyPriorityQueue | MemoryHostQueue | StoredHost
