"""MemoryHostQueue against ScrapyPriorityQueue: the same order, on deques."""

from __future__ import annotations

import random
from typing import Any

import pytest
from scrapy import Request
from scrapy.pqueues import ScrapyPriorityQueue
from scrapy.squeues import FifoMemoryQueue, LifoMemoryQueue, PickleFifoDiskQueue
from scrapy.utils.test import get_crawler

from scrapy_politeness.scheduler.host_queue import MemoryHostQueue, memory_order

CLASSES = (FifoMemoryQueue, LifoMemoryQueue)


@pytest.mark.parametrize(("prios", "start_share"), [((-1, 0, 0, 2), 0.4), ((0,), 0.0)],
                         ids=["mixed", "one-key"])
@pytest.mark.parametrize("start_cls", [*CLASSES, None])
@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("seed", range(20))
def test_same_order_as_scrapys_priority_queue(cls: Any, start_cls: Any, seed: int,
                                              prios: tuple[int, ...],
                                              start_share: float) -> None:
    """Random pushes (priorities, start requests or not) and pops: both hand
    out the same requests in the same order, and agree on their length (one
    key only: the compact list past ``SMALL`` and back)."""
    rnd = random.Random(seed)
    scrapy_q = ScrapyPriorityQueue(get_crawler(), cls, "", start_queue_cls=start_cls)
    order = memory_order(cls, start_cls)
    assert order is not None
    ours = MemoryHostQueue(*order)
    n = 0
    for _ in range(300):
        if rnd.random() < 0.55:
            request = Request(f"http://h.test/{n}", priority=rnd.choice(prios),
                              meta={"is_start_request": rnd.random() < start_share})
            n += 1
            scrapy_q.push(request)
            ours.push(request)
        else:
            expected = scrapy_q.pop()
            assert ours.pop() is expected
        assert len(ours) == len(scrapy_q)
        assert bool(ours) == bool(len(scrapy_q))
    expected_rest = []
    while (request := scrapy_q.pop()) is not None:
        expected_rest.append(request)
    rest = []
    while (peeked := ours.peek()) is not None:
        assert ours.pop() is peeked  # peek is what pop returns next
        rest.append(peeked)
    assert rest == expected_rest
    assert ours.pop() is None
    assert ours.close() == []


def test_close_reports_the_priorities_still_holding_requests() -> None:
    ours = MemoryHostQueue(lifo=True, start_lifo=False)
    ours.push(Request("http://h.test/1", priority=3))
    ours.push(Request("http://h.test/2", priority=-1, meta={"is_start_request": True}))
    assert ours.close() == [-3, 1]
    assert len(ours) == 0


def test_only_scrapys_memory_queues_are_replaced() -> None:
    """A disk queue (JOBDIR) or a user's own class keeps ScrapyPriorityQueue."""
    assert memory_order(LifoMemoryQueue, FifoMemoryQueue) == (True, False)
    assert memory_order(FifoMemoryQueue, None) == (False, None)
    assert memory_order(PickleFifoDiskQueue, FifoMemoryQueue) is None
    assert memory_order(FifoMemoryQueue, PickleFifoDiskQueue) is None


def test_a_host_with_a_few_requests_keeps_them_in_one_short_list() -> None:
    """One or two requests under one key cost a short list, not a dict of deques
    (about 900 bytes a host); a second key spreads them, an emptied queue is
    compact again."""
    ours = MemoryHostQueue(lifo=False, start_lifo=False)
    first, second = Request("http://h.test/1"), Request("http://h.test/2")
    ours.push(first)
    ours.push(second)
    assert ours._queues is None
    assert ours._few == [first, second]
    ours.push(Request("http://h.test/3", priority=5))
    assert ours._queues is not None
    while ours.pop() is not None:
        pass
    assert ours._queues is None
    ours.push(first)
    assert ours._few == [first]
