"""The plugin's HTTP handler tells which request it writes, when it writes it.

Twisted's agent writes a request in the callback that hands it its connection
(``HTTPConnectionPool.getConnection``); the handler's pool adds its own callback
first, for the request being downloaded (``SENDING``). A kept-alive connection
is handed over at once, a new one once connected: the write is reported then,
and before the agent's own callback, never earlier.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from scrapy_politeness.downloader.http_handler import (
    BoundedIdleHTTP11DownloadHandler,
    _WatchedPool,
    own_schemes,
)
from scrapy_politeness.downloader.write_watch import SENDING, WriteWatch

KEY = ("http", b"a.test", 80)
HANDLER = "scrapy_politeness.downloader.http_handler.BoundedIdleHTTP11DownloadHandler"


class _Idle:
    state = "QUIESCENT"


class _Timeout:
    def cancel(self) -> None:
        pass


class _Endpoint:
    def __init__(self) -> None:
        self.connecting: Deferred[Any] = Deferred()

    def connect(self, factory: Any) -> Deferred[Any]:
        return self.connecting


def _pool(seen: list[Any]) -> _WatchedPool:
    from twisted.internet import reactor

    pool = _WatchedPool(reactor, True, 10)
    pool.retryAutomatically = False
    pool.watch = WriteWatch()
    pool.watch.on_written = lambda request: seen.append(("written", request))
    return pool


def _ask(pool: _WatchedPool, request: Request | None, endpoint: Any, seen: list[Any]) -> None:
    """What the agent does: ask for a connection, then write in its callback."""
    token = SENDING.set(request)
    try:
        got = pool.getConnection(KEY, endpoint)
    finally:
        SENDING.reset(token)
    got.addCallback(lambda connection: seen.append(("agent writes", connection)))


def test_a_kept_alive_connection_reports_the_write_at_once_before_the_agents() -> None:
    seen: list[Any] = []
    pool = _pool(seen)
    idle = _Idle()
    pool._connections[KEY] = [idle]
    pool._timeouts[idle] = _Timeout()
    request = Request("http://a.test/")
    _ask(pool, request, _Endpoint(), seen)
    assert seen == [("written", request), ("agent writes", idle)]


def test_a_new_connection_reports_the_write_once_connected() -> None:
    seen: list[Any] = []
    pool = _pool(seen)
    endpoint = _Endpoint()
    request = Request("http://a.test/")
    _ask(pool, request, endpoint, seen)
    assert seen == []  # connecting: nothing written yet
    connection = object()
    endpoint.connecting.callback(connection)
    assert seen == [("written", request), ("agent writes", connection)]


def test_a_connection_asked_outside_a_download_reports_nothing() -> None:
    seen: list[Any] = []
    pool = _pool(seen)
    endpoint = _Endpoint()
    _ask(pool, None, endpoint, seen)
    endpoint.connecting.callback("c")
    assert seen == [("agent writes", "c")]


def test_a_failing_report_never_fails_the_download() -> None:
    seen: list[Any] = []
    pool = _pool(seen)
    assert pool.watch is not None

    def broken(request: Request) -> None:
        raise RuntimeError("bookkeeping")

    pool.watch.on_written = broken
    endpoint = _Endpoint()
    _ask(pool, Request("http://a.test/"), endpoint, seen)
    endpoint.connecting.callback("c")
    assert seen == [("agent writes", "c")]  # the agent still gets its connection


def test_the_schemes_watched_are_those_the_handler_downloads() -> None:
    both = get_crawler(settings_dict={"DOWNLOAD_HANDLERS": {"http": HANDLER, "https": HANDLER}})
    assert own_schemes(both, BoundedIdleHTTP11DownloadHandler) == ["http", "https"]
    mine = get_crawler(settings_dict={"DOWNLOAD_HANDLERS": {
        "http": BoundedIdleHTTP11DownloadHandler,
        "https": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"}})
    assert own_schemes(mine, BoundedIdleHTTP11DownloadHandler) == ["http"]
    stock = get_crawler()
    assert own_schemes(stock, BoundedIdleHTTP11DownloadHandler) == []


def test_a_watch_covers_only_its_schemes() -> None:
    watch = WriteWatch()
    assert not watch.watches(Request("http://a.test/"))
    watch.cover(["https"])
    assert watch.watches(Request("https://a.test/"))
    assert not watch.watches(Request("http://a.test/"))
