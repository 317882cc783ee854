"""The decision trace: one JSON line per gate decision and per feedback.

Enabled with ``POLITENESS_TRACE = "path.jsonl"``. The first line is a header
(``"type": "header"``) with the wall-clock epoch of the crawl start; every
other line carries ``"t"``, seconds since that start on the event loop's
monotonic clock, and a ``"type"``:

- ``dispatch``: a fetch left the gate (host key, IP, URL, seconds waited,
  the host's interval at dispatch);
- ``feedback``: an outcome was folded in (status, 0 for a transport error;
  Retry-After; latency; interval before and after; backoff cause);
- ``crawl_delay``: robots.txt asked for a delay;
- ``dead`` / ``parked``: a host's requests are being dropped;
- ``restored``: a host's learnt state was read back from ``JOBDIR``;
- ``end``: the last line, with the counts of lines written and dropped.

Writing never blocks the event loop: lines are buffered in a list and handed
in batches (every ``flush_lines`` lines, every second, and at close) to one
writer thread. While the thread is still busy with a batch (a slow disk),
lines keep accumulating, up to ``max_buffer``; past that they are dropped and
counted (``politeness/trace/dropped``) rather than held in memory.

The module imports neither Scrapy nor Twisted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, TextIO

__all__ = ["TRACE_VERSION", "TraceWriter"]

logger = logging.getLogger(__name__)

TRACE_VERSION = 1
FLUSH_EVERY = 1.0  # seconds between time-based flushes (see ``tick``)
_DUMPS = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _r(x: float) -> float:
    return round(x, 4)


class TraceWriter:
    """Buffered JSON-lines writer with one background thread.

    ``start`` is the crawl start on the caller's monotonic clock; every ``now``
    passed in is on that clock. Only ``write``/``flush``/``tick`` run on the
    event loop, and none of them touches the disk.
    """

    def __init__(self, path: str | os.PathLike[str], *, start: float,
                 max_buffer: int = 100_000, flush_lines: int = 1000,
                 header: dict[str, Any] | None = None, sink: TextIO | None = None) -> None:
        if max_buffer < 1 or flush_lines < 1:
            raise ValueError("max_buffer and flush_lines must be >= 1")
        self.path = Path(path)
        self.start = start
        self.max_buffer = max_buffer
        self.flush_lines = min(flush_lines, max_buffer)
        self.dropped = 0
        self.lines = 0  # accepted into the buffer (so written, unless a write failed)
        self.write_errors = 0
        self._buf: list[str] = []
        self._last_flush = start
        self._cond = threading.Condition()
        self._batch: list[str] | None = None
        self._busy = False
        self._closing = False
        self._closed = False
        if sink is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            sink = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 (closed by the thread)
        self._fh = sink
        self._thread = threading.Thread(target=self._run, name="politeness-trace", daemon=True)
        self._thread.start()
        self.write({"type": "header", "version": TRACE_VERSION, "wall": time.time(),
                    "clock": "t = seconds since the crawl start (monotonic)",
                    **(header or {})})

    # -- event loop side -----------------------------------------------------

    def write(self, record: dict[str, Any]) -> None:
        """Buffer one line; dropped (and counted) when the buffer is full."""
        if self._closed:
            return
        if len(self._buf) >= self.max_buffer:
            self.dropped += 1
            return
        self._buf.append(_DUMPS(record) + "\n")
        self.lines += 1
        if len(self._buf) >= self.flush_lines:
            self.flush()

    def flush(self) -> None:
        """Hand the buffer to the writer thread, unless it is still busy."""
        if not self._buf:
            return
        with self._cond:
            if self._busy:
                return  # the disk is slow: keep buffering (bounded by max_buffer)
            self._batch, self._buf = self._buf, []
            self._busy = True
            self._cond.notify()

    def tick(self, now: float) -> None:
        """Called now and then (the middleware's periodic tick): flush every second."""
        if now - self._last_flush >= FLUSH_EVERY:
            self._last_flush = now
            self.flush()

    def close(self, now: float | None = None) -> None:
        """Write everything still buffered and an ``end`` line; wait for the disk."""
        if self._closed:
            return
        end: dict[str, Any] = {"type": "end", "lines": self.lines + 1,
                               "dropped": self.dropped}
        if now is not None:
            end["t"] = self.t(now)
        self._buf.append(_DUMPS(end) + "\n")
        self.lines += 1
        self._closed = True
        with self._cond:
            while self._busy:
                self._cond.wait()
            self._batch, self._buf = self._buf, []
            self._busy = True
            self._closing = True
            self._cond.notify()
        self._thread.join()

    # -- records ---------------------------------------------------------------

    def t(self, now: float) -> float:
        return round(now - self.start, 6)

    def dispatch(self, now: float, key: str, *, ip: str | None, url: str, waited: float,
                 interval: float) -> None:
        self.write({"type": "dispatch", "t": self.t(now), "host": key, "ip": ip, "url": url,
                    "wait": round(waited, 6), "interval": _r(interval)})

    def feedback(self, now: float, key: str, *, ip: str | None, status: int,
                 retry_after: float | None, latency: float, before: float, after: float,
                 cause: str | None) -> None:
        self.write({"type": "feedback", "t": self.t(now), "host": key, "ip": ip,
                    "status": status, "retry_after": retry_after, "latency": round(latency, 6),
                    "interval_before": _r(before), "interval_after": _r(after),
                    "cause": cause})

    def crawl_delay(self, now: float, key: str, delay: float, over_max: str | None) -> None:
        self.write({"type": "crawl_delay", "t": self.t(now), "host": key, "delay": delay,
                    "over_max": over_max})

    def dead(self, now: float, key: str, interval: float, reason: str) -> None:
        self.write({"type": "dead", "t": self.t(now), "host": key, "interval": _r(interval),
                    "reason": reason})

    def parked(self, now: float, key: str, until: float, reason: str) -> None:
        self.write({"type": "parked", "t": self.t(now), "host": key,
                    "for": None if math.isinf(until) else round(until - now, 3),
                    "reason": reason})

    def restored(self, now: float, key: str, interval: float, fields: dict[str, Any]) -> None:
        self.write({"type": "restored", "t": self.t(now), "host": key,
                    "interval": _r(interval), **fields})

    # -- writer thread -----------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._batch is None:
                    self._cond.wait()
                batch, self._batch = self._batch, None
                closing = self._closing
            try:
                self._fh.write("".join(batch))
                self._fh.flush()
            except (OSError, ValueError) as exc:
                self.write_errors += len(batch)
                if self.write_errors == len(batch):  # the first failure only
                    logger.error("politeness: cannot write the trace %s: %s", self.path, exc)
            with self._cond:
                self._busy = False
                self._cond.notify_all()
            if closing:
                break
        with contextlib.suppress(OSError):
            self._fh.close()
