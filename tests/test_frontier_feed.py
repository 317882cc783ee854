"""frontier_feed.StartFeed: reads of the start URLs that find none back off."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from scrapy_politeness.distributed import frontier_feed
from scrapy_politeness.distributed.frontier_feed import FEED_EMPTY, FEED_EMPTY_MAX, StartFeed


class _Stats:
    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count


def test_empty_reads_back_off_and_a_fruitful_one_starts_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(frontier_feed, "clock", lambda: now[0])
    batches = [0]  # start URLs the next read finds
    reads: list[float] = []
    feed: StartFeed

    class Spider:
        def schedule_next_requests(self) -> None:
            reads.append(now[0])
            feed.pushed += batches[0]

    stats: Any = _Stats()
    feed = StartFeed(Spider(), stats)
    for _ in range(2000):  # a starved pop every 10 ms for 20 s, none to read
        feed.starved()
        now[0] += 0.01
    gaps = [round(b - a, 2) for a, b in itertools.pairwise(reads)]
    assert gaps[:3] == [FEED_EMPTY, 2 * FEED_EMPTY, 4 * FEED_EMPTY]
    assert set(gaps[3:]) == {FEED_EMPTY_MAX}
    assert len(reads) == 7  # at 0, 1, 3, 7, 11, 15, 19 s: not 20 (one a second)
    batches[0] = 5  # start URLs pushed: the next read finds them, and starts over
    now[0] = reads[-1] + FEED_EMPTY_MAX
    feed.starved()
    assert stats.values == {"politeness/frontier/fed": 5}
    batches[0] = 0
    feed.starved()  # it found some: the next may read at once (this one finds none)
    now[0] += FEED_EMPTY - 0.01
    feed.starved()  # within the first pause again: no read
    now[0] += 0.02
    feed.starved()
    assert len(reads) == 10
