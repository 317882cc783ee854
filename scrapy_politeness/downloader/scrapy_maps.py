"""Scrapy's own per-host maps, trimmed to the hosts in use (private Scrapy, kept apart).

Scrapy keeps a download slot per host for a minute or two after its last
transfer, and its robots middleware a robots.txt parser per netloc for the whole
crawl. A broad crawl meets hosts by the ten thousand, each for seconds: the
eviction pass (``downloader.periodic``) trims both. Each access here says which
private attribute it reads; ``scrapy_internals.missing`` watches them.
"""

from __future__ import annotations

from typing import Any

from scrapy_politeness.scrapy_internals import _engine

__all__ = ["drop_idle_slots", "robots_parsers"]


def drop_idle_slots(crawler: Any, before: float) -> int:
    """Forget the download slots idle since ``before`` (``time.monotonic``); how many.

    Scrapy's own collection (``Downloader._slot_gc``) forgets a slot 60 s after its
    last transfer, once a minute: a broad crawl keeps a slot (~1.3 KB: two sets
    and a deque) per host of its last one to two minutes, 11,700 of them 10,000
    hosts into a 40,000-host crawl. A slot with nothing queued, active or
    transferring, no delayed call pending and its delay passed holds nothing
    its host's next request needs: Scrapy makes it again, with its per-slot
    settings. Public attributes, undocumented: ``engine.downloader.slots`` and a
    slot's ``active``, ``queue``, ``transferring``, ``latercall``, ``lastseen``,
    ``delay``, ``close()``. Waits for a setting of Scrapy's slot collection age.
    """
    slots = getattr(getattr(_engine(crawler), "downloader", None), "slots", None)
    if not isinstance(slots, dict):
        return 0
    try:
        gone = [key for key, slot in slots.items()
                if not slot.active and not slot.queue and not slot.transferring
                and slot.latercall is None and slot.lastseen + slot.delay <= before]
    except AttributeError:  # another Slot: leave them to Scrapy
        return 0
    for key in gone:
        slots.pop(key).close()
    return len(gone)


def robots_parsers(middleware: Any) -> dict[str, Any] | None:
    """The robots middleware's parser per netloc, to drop those of idle hosts.

    Private Scrapy: ``RobotsTxtMiddleware._parsers`` (netloc -> parser, None, or
    a Deferred while fetched); None when it is not a dict. Waits for a bound of
    Scrapy's own on its parsers.
    """
    parsers = getattr(middleware, "_parsers", None)
    return parsers if isinstance(parsers, dict) else None
