"""The JOBDIR request store against Scrapy's own disk priority queue: same order."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from scrapy import Request
from scrapy.pqueues import ScrapyPriorityQueue
from scrapy.squeues import MarshalFifoDiskQueue, PickleFifoDiskQueue, PickleLifoDiskQueue
from scrapy.utils.test import get_crawler

from scrapy_politeness.jobdir.request_store import RequestStore, StoredHost, disk_order

CLASSES = (PickleFifoDiskQueue, PickleLifoDiskQueue)


@pytest.mark.parametrize("start_cls", [*CLASSES, None])
@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("seed", range(4))
def test_same_order_as_scrapys_disk_priority_queue(tmp_path: Path, cls: Any, start_cls: Any,
                                                   seed: int) -> None:
    """Random pushes (priorities, start requests or not) and pops, with a close
    and reopen half-way: the store hands out what ScrapyPriorityQueue does."""
    rnd = random.Random(seed)
    crawler = get_crawler()
    scrapy_q = ScrapyPriorityQueue(crawler, cls, str(tmp_path / "scrapy"),
                                   start_queue_cls=start_cls)
    order = disk_order(cls, start_cls)
    assert order is not None
    store = RequestStore(str(tmp_path / "ours"), None, *order)
    ours = StoredHost(store, "h.test")
    n = 0
    for step in range(240):
        if step == 120:  # a pause: closed, reopened from the file
            assert store.close() == len(ours)
            store = RequestStore(str(tmp_path / "ours"), None, *order)
            ours = StoredHost(store, "h.test", store.hosts().get("h.test", 0))
        if rnd.random() < 0.55:
            request = Request(f"http://h.test/{n}", priority=rnd.choice((-1, 0, 0, 2)),
                              meta={"is_start_request": rnd.random() < 0.4})
            n += 1
            scrapy_q.push(request)
            ours.push(request)
        else:
            expected = scrapy_q.pop()
            got = ours.pop()
            assert (got and got.url) == (expected and expected.url)
        assert len(ours) == len(scrapy_q)
    while (expected := scrapy_q.pop()) is not None:
        peeked = ours.peek()
        got = ours.pop()
        assert got is not None
        assert peeked is not None
        assert got.url == peeked.url == expected.url
    assert ours.pop() is None
    scrapy_q.close()
    assert store.close() == 0


def test_a_request_that_cannot_be_serialised_is_refused_and_not_stored(tmp_path: Path) -> None:
    store = RequestStore(str(tmp_path), None, True, False)
    host = StoredHost(store, "h.test")
    with pytest.raises(ValueError, match="pickle"):
        host.push(Request("http://h.test/", meta={"x": lambda: None}))
    assert len(host) == 0
    assert store.hosts() == {}
    assert store.close() == 0


def test_one_file_whatever_the_number_of_hosts(tmp_path: Path) -> None:
    """2,000 hosts: one database file once closed (its log checkpointed into it)."""
    store = RequestStore(str(tmp_path / "q"), None, True, False)
    for i in range(2_000):
        StoredHost(store, f"h{i}.test").push(Request(f"http://h{i}.test/"))
    assert store.close() == 2_000
    assert [p.name for p in (tmp_path / "q").iterdir()] == ["queue.sqlite3"]
    again = RequestStore(str(tmp_path / "q"), None, True, False)
    assert len(again.hosts()) == 2_000
    again.close()


def test_only_scrapys_pickle_disk_queues_go_to_the_store() -> None:
    assert disk_order(PickleLifoDiskQueue, PickleFifoDiskQueue) == (True, False)
    assert disk_order(PickleFifoDiskQueue, None) == (False, None)
    assert disk_order(MarshalFifoDiskQueue, PickleFifoDiskQueue) is None
    assert disk_order(PickleFifoDiskQueue, MarshalFifoDiskQueue) is None
