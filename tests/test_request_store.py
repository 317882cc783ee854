"""The JOBDIR request store against Scrapy's own disk priority queue: same order."""

from __future__ import annotations

import random
import sqlite3
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


def _close_statements(store: RequestStore) -> tuple[int, list[str]]:
    """What the close returned and the SQL statements it ran (sqlite's trace)."""
    ran: list[str] = []
    store._db.set_trace_callback(ran.append)
    return store.close(), ran


@pytest.mark.parametrize("hosts", [3, 3_000])
def test_the_close_commits_the_tail_and_counts_nothing_on_disk(tmp_path: Path,
                                                               hosts: int) -> None:
    """The close's work does not grow with what the store holds: one COMMIT of the
    writes since the last batch, no statement over the rows (the count it returns is
    kept in memory and matches the file's), whatever the number of hosts."""
    store = RequestStore(str(tmp_path / "q"), None, False, None)
    queues = [StoredHost(store, f"h{i}.test") for i in range(hosts)]
    for i, queue in enumerate(queues):
        queue.push(Request(f"http://h{i}.test/a"))
        queue.push(Request(f"http://h{i}.test/b"))
    for queue in queues[::3]:
        assert queue.pop() is not None
    stored, statements = _close_statements(store)
    assert statements == ["COMMIT"]
    assert stored == sum(len(q) for q in queues)
    again = RequestStore(str(tmp_path / "q"), None, False, None)
    assert sum(again.hosts().values()) == again.stored == stored
    assert _close_statements(again) == (stored, ["COMMIT"])


def test_the_writes_reach_the_file_as_the_crawl_goes(tmp_path: Path) -> None:
    """Committed in batches and checkpointed by sqlite as they go: what the close has
    left to write is a tail (the log stays under its checkpoint size), not the crawl."""
    from scrapy_politeness.jobdir.request_store import CHECKPOINT_PAGES, COMMIT_EVERY

    store = RequestStore(str(tmp_path / "q"), None, False, None)
    body = "x" * 2_000  # ~2 KB a request: many log pages
    for i in range(10 * COMMIT_EVERY):
        StoredHost(store, f"h{i % 500}.test").push(Request(f"http://h{i % 500}.test/{i}/{body}"))
    log = tmp_path / "q" / "queue.sqlite3-wal"
    # a second connection sees the committed rows: all but the last, uncommitted batch
    reader = sqlite3.connect(str(tmp_path / "q" / "queue.sqlite3"))
    (committed,) = reader.execute("SELECT count(*) FROM requests").fetchone()
    reader.close()
    assert 10 * COMMIT_EVERY - committed < COMMIT_EVERY
    # checkpointed as it went: the log was restarted, it holds less than the crawl wrote
    wrote = (tmp_path / "q" / "queue.sqlite3").stat().st_size
    assert wrote > 8 * CHECKPOINT_PAGES * 4096
    assert log.stat().st_size < 3 * CHECKPOINT_PAGES * 4096
    assert store.close() == 10 * COMMIT_EVERY


def test_the_queues_close_visits_no_host_under_the_store(tmp_path: Path) -> None:
    """Under the store every host queue is a StoredHost, with nothing to close: the
    scheduler queue's close is the store's, not a step per host ever queued (the
    hosts handed to it are never iterated), and its saved state counts the requests."""
    from scrapy_politeness.jobdir.queue_state import HostQueues
    from scrapy_politeness.jobdir.request_store import STORE_STATE

    queues = HostQueues(get_crawler(), PickleLifoDiskQueue, str(tmp_path / "q"),
                        PickleFifoDiskQueue)
    made = [queues.make(f"h{i}.test") for i in range(50)]
    assert all(isinstance(q, StoredHost) for q in made)
    for i, queue in enumerate(made):
        queue.push(Request(f"http://h{i}.test/"))
    visited: list[object] = []

    def hosts() -> Any:
        visited.append(1)
        yield from ()

    assert queues.close(hosts()) == {STORE_STATE: [50]}
    assert visited == []
