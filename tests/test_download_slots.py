"""Scrapy's download slots of idle hosts are forgotten after seconds, not minutes.

Scrapy forgets a slot 60 s after its last transfer, once a minute: a broad crawl
kept 11,700 slots 10,000 hosts into a 40,000-host crawl. Scrapy's own Slot class
on a stand-in engine; no crawl.
"""

from __future__ import annotations

from types import SimpleNamespace

from scrapy.core.downloader import Slot

from scrapy_politeness.downloader.scrapy_maps import drop_idle_slots


def _crawler(slots: dict[str, Slot]) -> SimpleNamespace:
    return SimpleNamespace(engine=SimpleNamespace(downloader=SimpleNamespace(slots=slots)))


def _slot(lastseen: float, delay: float = 0.0) -> Slot:
    slot = Slot(concurrency=8, delay=delay, jitter=0.0)
    slot.lastseen = lastseen
    return slot


def test_only_slots_idle_with_nothing_in_them_are_dropped() -> None:
    busy = {name: _slot(0.0) for name in ("active", "queued", "transferring", "delayed")}
    busy["active"].active.add(object())
    busy["queued"].queue.append((object(), None))
    busy["transferring"].transferring.add(object())
    busy["delayed"].latercall = object()  # type: ignore[assignment]
    slots = {**busy, "idle": _slot(0.0), "recent": _slot(95.0), "slow": _slot(80.0, delay=30.0)}
    assert drop_idle_slots(_crawler(slots), before=90.0) == 1
    assert sorted(slots) == ["active", "delayed", "queued", "recent", "slow", "transferring"]
    assert drop_idle_slots(_crawler(slots), before=111.0) == 2  # recent, and slow's delay passed
    assert sorted(slots) == sorted(busy)


def test_no_engine_or_another_downloader_drops_nothing() -> None:
    assert drop_idle_slots(SimpleNamespace(), before=1e9) == 0
    other = {"x": SimpleNamespace(active=set())}
    assert drop_idle_slots(_crawler(other), before=1e9) == 0  # type: ignore[arg-type]
    assert list(other) == ["x"]
