"""The private Scrapy attributes the plugin reads, in one place.

Scrapy has no public API yet for what these give; each function names the
public alternative it waits for and degrades to Scrapy's own behaviour when the
attribute is missing. ``missing()`` lists what a Scrapy upgrade renamed: the
middleware logs it once at start (a loud WARNING, not a silent slowdown) and
``tests/test_scrapy_internals.py`` fails on it against the installed Scrapy.
Checked against Scrapy 2.13 to 2.19.
"""

from __future__ import annotations

from typing import Any

__all__ = ["downloader_active", "engine_closing", "engine_in_progress", "missing",
           "wake_engine"]


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
    slot = getattr(getattr(crawler, "_engine", None), "_slot", None)
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
    if not isinstance(getattr(getattr(engine, "downloader", None), "active", None), set):
        gone.append("engine.downloader.active")
    return gone
