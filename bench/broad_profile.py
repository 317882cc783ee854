"""cProfile of a broad-bench crawl in two windows: its first and its last fifth.

``BENCH_BROAD_PROFILE=DIR`` in the environment of :mod:`bench.broad_crawl`:
the profiler runs while the crawl's first fifth of responses comes in and
again over its last fifth (by the responses the job expects), and writes
``DIR/first.prof`` and ``DIR/last.prof`` (``pstats``) with a text summary of
each (``DIR/first.txt``, ``DIR/last.txt``: responses, CPU, calls per response,
the functions by own time). Comparing the two says what costs more per
request late in the crawl. Slow (cProfile): for finding, not for figures.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import time
from typing import Any

__all__ = ["PROFILE_ENV", "WindowedProfile"]

PROFILE_ENV = "BENCH_BROAD_PROFILE"


class WindowedProfile:
    """Profiles responses ``[0, n/5)`` and ``[4n/5, n)`` of an expected ``n``."""

    def __init__(self, crawler: Any, expected: int, where: str) -> None:
        self.crawler, self.where = crawler, where
        self.windows = [("first", 0, expected // 5), ("last", expected - expected // 5, expected)]
        self._prof: cProfile.Profile | None = None
        self._began: tuple[int, float] = (0, 0.0)

    @classmethod
    def from_env(cls, crawler: Any, expected: int) -> WindowedProfile | None:
        where = os.environ.get(PROFILE_ENV)
        return cls(crawler, expected, where) if where else None

    def _count(self) -> int:
        stats = self.crawler.stats
        return int(stats.get_value("response_received_count", 0)) if stats is not None else 0

    def check(self, *_: Any, **__: Any) -> None:
        """``response_received``: open or close a window."""
        if not self.windows:
            return
        _, begin, end = self.windows[0]
        count = self._count()
        if self._prof is None and begin <= count < end:
            self._began = (count, time.process_time())
            self._prof = cProfile.Profile()
            self._prof.enable()
        elif self._prof is not None and count >= end:
            self.dump()

    def dump(self) -> None:
        """Close the open window (also at the spider's close)."""
        prof = self._prof
        if prof is None or not self.windows:
            return
        prof.disable()
        self._prof = None
        name = self.windows.pop(0)[0]
        responses = self._count() - self._began[0]
        cpu = time.process_time() - self._began[1]
        prof.dump_stats(os.path.join(self.where, f"{name}.prof"))
        out = io.StringIO()
        stats = pstats.Stats(prof, stream=out)
        calls = sum(v[1] for v in stats.stats.values())  # type: ignore[attr-defined]
        out.write(f"{name}: {responses} responses, CPU {cpu:.1f} s (profiled), "
                  f"{calls / max(1, responses):.0f} calls per response\n")
        stats.sort_stats("tottime").print_stats(60)
        with open(os.path.join(self.where, f"{name}.txt"), "w", encoding="utf-8") as fh:
            fh.write(out.getvalue())
