"""Under ``JOBDIR``, the requests waiting for their host: one sqlite3 file for every host.

A disk queue per host (Scrapy's ``ScrapyPriorityQueue`` over its disk queues)
is a directory and an open file per host: a broad crawl ran out of file
descriptors at the usual limit of 1,024 and left tens of thousands of
directories. Here every host's requests are rows of one table in one sqlite3
database (``requests.queue/queue.sqlite3``, write-ahead log), as Heritrix keeps
one database for all its queues: three files open and on disk whatever the
number of hosts, and a host in memory is a count (:class:`StoredHost`).

Order within a host is the one ``ScrapyPriorityQueue`` keeps: the smallest
``rank`` (``2 * -priority``, plus one for a start request when start requests
have their own queue) first, then FIFO or LIFO as the configured disk queue
class (``pos`` counts up, negated for LIFO). Requests are serialised as
Scrapy's disk queues do (``Request.to_dict`` then pickle); one that cannot be
raises ``ValueError`` before anything is stored, so the scheduler keeps it in
memory. Writes are committed in batches of :data:`COMMIT_EVERY` as the crawl
goes and sqlite checkpoints its log into the file every
:data:`CHECKPOINT_PAGES` pages, so the close commits and checkpoints only the
tail: its work does not grow with the hosts or requests stored (the count it
returns is kept in memory, not counted on disk). A clean close leaves one file
(the log checkpointed into it), older than Scrapy's ``active.json``.
"""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.squeues import PickleFifoDiskQueue, PickleLifoDiskQueue
from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy import Request, Spider

__all__ = ["STORE_FILE", "STORE_STATE", "RequestStore", "StoredHost", "disk_order", "order_in"]

STORE_FILE = "queue.sqlite3"
STORE_STATE = " store"  # the saved state's key (no host key has a space): [requests]
COMMIT_EVERY = 512  # writes between commits
CHECKPOINT_PAGES = 256  # log pages (4 KiB) between sqlite's own checkpoints: the close's bound

_ORDER: dict[object, bool] = {PickleFifoDiskQueue: False, PickleLifoDiskQueue: True}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    host TEXT NOT NULL, rank INTEGER NOT NULL, pos INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS next_of_host ON requests (host, rank, pos);
"""


def order_in(orders: Mapping[object, bool], queue_cls: object,
             start_queue_cls: object) -> tuple[bool, bool | None] | None:
    """``(lifo, start_lifo)`` when ``orders`` (class: LIFO) knows both classes
    (``start_lifo`` None: no start queue), else None."""
    lifo = orders.get(queue_cls)
    if lifo is None:
        return None
    if start_queue_cls is None:
        return lifo, None
    start_lifo = orders.get(start_queue_cls)
    return None if start_lifo is None else (lifo, start_lifo)


def disk_order(queue_cls: object, start_queue_cls: object) -> tuple[bool, bool | None] | None:
    """``(lifo, start_lifo)`` when both classes are Scrapy's pickle disk queues
    (``start_lifo`` None: no start queue), else None (the classes are kept)."""
    return order_in(_ORDER, queue_cls, start_queue_cls)


class RequestStore:
    """Every host's waiting requests in one sqlite3 database under ``directory``."""

    def __init__(self, directory: str, spider: Spider | None, lifo: bool,
                 start_lifo: bool | None) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = str(Path(directory, STORE_FILE))
        self._spider = spider
        self._lifo = lifo
        self._start_lifo = start_lifo
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
        self._db.executescript(_SCHEMA)
        self._db.execute("BEGIN")
        self._writes = 0
        row = self._db.execute("SELECT max(abs(pos)), count(*) FROM requests").fetchone()
        self._pos = (row[0] or 0) + 1
        self.stored: int = row[1]  # requests in the store, kept so the close counts nothing

    def hosts(self) -> dict[str, int]:
        """Each host key with requests stored, and how many (a resumed crawl's)."""
        return dict(self._db.execute("SELECT host, count(*) FROM requests GROUP BY host"))

    def push(self, host: str, request: Request, *, in_order: bool = False) -> None:
        """Store ``request`` for ``host``; ValueError (nothing stored) if it cannot be.

        ``in_order``: requests pushed so come out in the order pushed, within
        their rank (moving another queue in), and after later LIFO pushes."""
        try:
            data = pickle.dumps(request.to_dict(spider=self._spider), protocol=4)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise ValueError(str(exc)) from exc
        rank = -2 * request.priority
        lifo = self._lifo
        if self._start_lifo is not None and request.meta.get("is_start_request", False):
            rank += 1
            lifo = self._start_lifo
        pos = self._pos
        self._pos = pos + 1
        self._db.execute("INSERT INTO requests VALUES (?, ?, ?, ?)",
                         (host, rank, -pos if lifo and not in_order else pos, data))
        self.stored += 1
        self._wrote()

    def _next(self, host: str) -> tuple[int, bytes] | None:
        return self._db.execute(  # type: ignore[no-any-return]
            "SELECT rowid, data FROM requests WHERE host = ? ORDER BY rank, pos LIMIT 1",
            (host,)).fetchone()

    def pop(self, host: str) -> Request | None:
        """``host``'s next request, removed from the store (None: it has none)."""
        row = self._next(host)
        if row is None:
            return None
        self._db.execute("DELETE FROM requests WHERE rowid = ?", (row[0],))
        self.stored -= 1
        self._wrote()
        return self._load(row[1])

    def peek(self, host: str) -> Request | None:
        row = self._next(host)
        return None if row is None else self._load(row[1])

    def _load(self, data: bytes) -> Request:
        return request_from_dict(pickle.loads(data), spider=self._spider)  # our own file

    def _wrote(self) -> None:
        self._writes += 1
        if self._writes >= COMMIT_EVERY:
            self.commit()

    def commit(self) -> None:
        self._db.execute("COMMIT")
        self._db.execute("BEGIN")
        self._writes = 0

    def close(self) -> int:
        """Commit the tail, checkpoint the log into the file and close; the requests
        stored. One statement (the COMMIT) whatever the store holds: no pass over its rows."""
        self._db.execute("COMMIT")
        self._db.close()  # the last connection: sqlite checkpoints and removes the log
        return self.stored


class StoredHost:
    """A host key's requests in the :class:`RequestStore`: in memory, only their count.

    The host queue protocol the scheduler queue uses (``push``, ``pop``,
    ``peek``, ``close``, ``len``), as ``ScrapyPriorityQueue`` and
    ``MemoryHostQueue`` offer it.
    """

    __slots__ = ("_len", "key", "store")

    def __init__(self, store: RequestStore, key: str, stored: int = 0) -> None:
        self.store = store
        self.key = key
        self._len = stored

    def push(self, request: Request) -> None:
        self.store.push(self.key, request)
        self._len += 1

    def pop(self) -> Request | None:
        if not self._len:
            return None
        request = self.store.pop(self.key)
        self._len = self._len - 1 if request is not None else 0
        return request

    def peek(self) -> Request | None:
        return self.store.peek(self.key) if self._len else None

    def close(self) -> list[int]:
        """Nothing to close: the requests stay in the store (the store closes once)."""
        return []

    def __len__(self) -> int:
        return self._len

