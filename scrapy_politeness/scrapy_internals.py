"""The private Scrapy attributes the plugin reads, in one place.

Scrapy has no public API yet for what these give; each function names the
public alternative it waits for and degrades to Scrapy's own behaviour when the
attribute is missing. ``missing()`` lists what a Scrapy upgrade renamed: the
middleware logs it once at start (a loud WARNING, not a silent slowdown) and
``tests/test_scrapy_internals.py`` fails on it against the installed Scrapy.
Checked against Scrapy 2.13 to 2.19.
"""

from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from typing import Any

from twisted.web.client import HTTPConnectionPool

__all__ = ["START_REQUESTS", "bound_idle_connections", "downloader_active", "engine_closing",
           "engine_in_progress",
           "exception_leaving", "missing", "path_safe", "start_requests_left",
           "switch_off_autothrottle", "wake_engine", "zero_slot_delay"]

START_REQUESTS = "engine._start"
"""How :func:`missing` names the engine's start-request iterator, which
:func:`start_requests_left` reads."""


def _engine(crawler: Any) -> Any:
    try:
        return crawler.engine
    except (AttributeError, RuntimeError):  # the crawl has not started
        return None


def wake_engine(crawler: Any) -> None:
    """Ask the engine to pull from the scheduler on its next loop turn.

    Private: ``engine._slot.nextcall`` (a ``CallLaterOnce``). Waits for a public
    "the scheduler has work again" hook. Without it a request that becomes
    eligible between two pulls waits for the engine's 5 s heartbeat.
    """
    nextcall = getattr(getattr(_engine(crawler), "_slot", None), "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()


def engine_closing(crawler: Any) -> bool:
    """Whether the engine began closing (its waiters must be dropped then).

    Private: ``engine._slot.closing``, a Deferred set when closing begins.
    Waits for a public "engine closing" signal (``spider_closed`` comes only
    after every request in progress, the gate's waiters included, has ended).
    """
    slot = getattr(_engine(crawler), "_slot", None)
    return slot is not None and getattr(slot, "closing", None) is not None


def downloader_active(crawler: Any) -> set[Any] | None:
    """The requests in Scrapy's downloader now, or None if unknown.

    Private in practice: ``engine.downloader.active`` (documented nowhere).
    Waits for a public count of requests in progress per slot. ``None`` makes
    callers fall back to an age limit.
    """
    active = getattr(getattr(_engine(crawler), "downloader", None), "active", None)
    return active if isinstance(active, set) else None


def engine_in_progress(crawler: Any) -> set[Any] | None:
    """The requests the engine has in progress (scheduled out, not yet finished).

    Private: ``engine._slot.inprogress``. Waits for a public "request finished
    however it ended" signal (``request_dropped`` and ``request_left_downloader``
    do not cover an exception raised from a downloader middleware)."""
    found = getattr(getattr(_engine(crawler), "_slot", None), "inprogress", None)
    return found if isinstance(found, set) else None


def start_requests_left(crawler: Any) -> bool | None:
    """Whether the spider's start requests are not all taken yet (None: unknown).

    Private: ``engine._start``, the start iterator, None once exhausted (what
    ``ExecutionEngine.spider_is_idle`` reads). Waits for a public "start
    requests exhausted" signal.
    """
    engine = _engine(crawler)
    if engine is None or not hasattr(engine, "_start"):
        return None
    return engine._start is not None


def zero_slot_delay(crawler: Any, request: Any) -> float:
    """Set the delay of the download slot ``request`` was queued in to 0; the delay it had.

    Public attributes, undocumented: ``engine.downloader.slots[key].delay``,
    under the key the downloader writes to ``request.meta["download_slot"]``
    just before it sends ``request_reached_downloader`` and then processes the
    slot's queue (an order tests/test_setup_paths.py fails without). Waits for
    a public "no downloader delay" switch that a middleware can set.
    """
    downloader = getattr(_engine(crawler), "downloader", None)
    slots = getattr(downloader, "slots", None)
    slot: Any = slots.get(request.meta.get("download_slot")) if isinstance(slots, dict) else None
    delay = getattr(slot, "delay", None)
    if not delay:
        return 0.0
    slot.delay = 0.0
    return float(delay)


def switch_off_autothrottle(crawler: Any) -> bool:
    """Disconnect Scrapy's AutoThrottle extension, if this crawl built it; whether it did.

    Private: the extension's ``_spider_opened`` (sets the downloader's start
    delay) and ``_response_downloaded`` (rewrites a slot's delay after each
    response) signal handlers. The extension is built before the downloader
    middlewares, so it is found here; a subclass's own handlers of those names
    go too. Waits for a public way to disable an extension that is built.
    """
    from scrapy import signals
    from scrapy.extensions.throttle import AutoThrottle

    try:
        extension = crawler.get_extension(AutoThrottle)
    except (AttributeError, RuntimeError):  # no extension manager (yet)
        return False
    if extension is None:
        return False
    for name, signal in (("_spider_opened", signals.spider_opened),
                         ("_response_downloaded", signals.response_downloaded)):
        handler = getattr(extension, name, None)
        if handler is not None:
            crawler.signals.disconnect(handler, signal=signal)
    return True


def exception_leaving() -> BaseException | None:
    """In a ``request_left_downloader`` handler: the exception the download is
    failing with, or None.

    Private in practice: Scrapy sends that signal from the ``finally`` of its
    download, so the exception on its way out is ``sys.exc_info()`` there
    (tests/test_slot_release.py fails if a Scrapy upgrade changes it). Waits for
    the exception as an argument of the signal. ``None`` leaves the outcome to
    ``process_exception`` or the sweep.
    """
    return sys.exc_info()[1]


def path_safe(text: str) -> str:
    """A directory name for ``text``, as Scrapy names its per-slot queue directories.

    Private: ``scrapy.pqueues._path_safe``; Scrapy's own while it has it (so a
    JOBDIR keeps the names Scrapy's queues give), else the same rule here, so
    nothing is lost if it goes (tests/test_scrapy_internals.py notices that).
    Waits for a public helper of Scrapy's.
    """
    scrapy_own = _scrapy_path_safe()
    if scrapy_own is not None:
        return str(scrapy_own(text))
    pathable = "".join(c if c.isalnum() or c in "-._" else "_" for c in text)
    return f"{pathable}-{hashlib.md5(text.encode('utf8')).hexdigest()}"


def _scrapy_path_safe() -> Any:
    try:
        from scrapy.pqueues import _path_safe
    except ImportError:
        return None
    return _path_safe


_POOL_INTERNALS = ("_putConnection", "_removeConnection", "_timeouts", "_connections",
                   "_reactor", "_factory")


class _BoundedIdlePool(HTTPConnectionPool):
    """Twisted's pool, keeping at most ``budget`` idle connections over all hosts.

    When one more would go over, the least recently used idle one closes: a
    host still being crawled puts its connection back often and keeps it.
    Private Twisted: ``_putConnection`` (where a connection turns idle),
    ``_removeConnection`` (closes one idle connection) and ``_timeouts`` (the
    idle connections, each with its pending 240 s close, cancelled when the
    budget closes it first). Waits for a public bound on
    the idle connections of ``HTTPConnectionPool``. A host's emptied list of
    idle connections goes too (``_connections``): Twisted keeps it, with its
    key, for every host ever fetched (~0.2 KB per host in a broad crawl).
    """

    def __init__(self, reactor: Any, persistent: bool, budget: int) -> None:
        super().__init__(reactor, persistent)  # type: ignore[no-untyped-call]
        self.budget = budget
        self._idle_order: OrderedDict[Any, Any] = OrderedDict()  # connection -> key, oldest first

    def _putConnection(self, key: Any, connection: Any) -> None:
        super()._putConnection(key, connection)  # type: ignore[no-untyped-call]
        if connection not in self._timeouts:  # not taken into the pool
            return
        order = self._idle_order
        order[connection] = key
        order.move_to_end(connection)
        while len(self._timeouts) > self.budget and order:
            oldest, oldest_key = order.popitem(last=False)
            if oldest in self._timeouts:  # else taken again or closed: nothing to do
                # its 240 s close goes too: left pending, it would remove it again and raise
                self._timeouts[oldest].cancel()
                self._removeConnection(oldest_key, oldest)
        if len(order) > 2 * self.budget + 64:  # forget connections closed meanwhile
            self._idle_order = OrderedDict(
                (c, k) for c, k in order.items() if c in self._timeouts)

    def getConnection(self, key: Any, endpoint: Any) -> Any:
        got = super().getConnection(key, endpoint)
        self._forget_empty(key)
        return got

    def _removeConnection(self, key: Any, connection: Any) -> None:
        super()._removeConnection(key, connection)  # type: ignore[no-untyped-call]
        self._forget_empty(key)

    def _forget_empty(self, key: Any) -> None:
        if not self._connections.get(key, True):
            del self._connections[key]


def bound_idle_connections(handler: Any, budget: int,
                           pool_class: type[_BoundedIdlePool] = _BoundedIdlePool) -> bool:
    """Give Scrapy's HTTP/1.1 handler a pool of at most ``budget`` idle
    connections (see :class:`_BoundedIdlePool`); whether it could.

    Private Scrapy: ``HTTP11DownloadHandler._pool``. Waits for a public pool
    setting of Scrapy's. False leaves Scrapy's own pool (idle connections
    then close only after 240 s).
    """
    pool = getattr(handler, "_pool", None)
    if not isinstance(pool, HTTPConnectionPool) or _pool_internals_missing(pool):
        return False
    bounded = pool_class(pool._reactor, pool.persistent, budget)
    bounded.maxPersistentPerHost = pool.maxPersistentPerHost
    bounded.cachedConnectionTimeout = pool.cachedConnectionTimeout
    bounded.retryAutomatically = pool.retryAutomatically
    bounded._factory = pool._factory
    handler._pool = bounded
    return True


def _pool_internals_missing(pool: Any) -> list[str]:
    return [f"HTTPConnectionPool.{name}" for name in _POOL_INTERNALS if not hasattr(pool, name)]


def missing(crawler: Any) -> list[str]:
    """The private attributes this Scrapy no longer has (call once the engine is open)."""
    engine = _engine(crawler)
    if engine is None:
        return []
    gone = []
    slot = getattr(engine, "_slot", None)
    if slot is None or not hasattr(slot, "nextcall"):
        gone.append("engine._slot.nextcall")
    if slot is None or not hasattr(slot, "closing"):
        gone.append("engine._slot.closing")
    if not isinstance(getattr(slot, "inprogress", None), set):
        gone.append("engine._slot.inprogress")
    if not hasattr(engine, "_start"):
        gone.append(START_REQUESTS)
    downloader = getattr(engine, "downloader", None)
    if not isinstance(getattr(downloader, "active", None), set):
        gone.append("engine.downloader.active")
    if not isinstance(getattr(downloader, "slots", None), dict):
        gone.append("engine.downloader.slots")
    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

    if "_pool" not in HTTP11DownloadHandler.__init__.__code__.co_names:
        gone.append("HTTP11DownloadHandler._pool")
    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware

    if "_parsers" not in RobotsTxtMiddleware.__init__.__code__.co_names:
        gone.append("RobotsTxtMiddleware._parsers")
    from twisted.internet import reactor

    gone.extend(_pool_internals_missing(
        HTTPConnectionPool(reactor)))  # type: ignore[no-untyped-call]
    return gone
