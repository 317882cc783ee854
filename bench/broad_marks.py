"""The close's steps marked from inside a broad-bench crawl (:mod:`bench.broad_crawl`).

``marks["closing"]`` when the engine starts closing the spider, ``marks["spider_closed"]``
when it has closed it (its INFO lines, whatever ``LOG_LEVEL``: Scrapy sends no
signal at the start of a close), ``marks["engine_stopped"]`` at that signal.
With the SIGINT's instant and the process's exit (:mod:`bench.broad_run`) they
say where a graceful close's seconds go (``ChildRun.close_steps``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from scrapy import signals

__all__ = ["mark_close"]

_LINES = {"Closing spider (%(reason)s)": "closing", "Spider closed (%(reason)s)": "spider_closed"}


class _EngineMarks(logging.Handler):
    def __init__(self, marks: dict[str, float]) -> None:
        super().__init__(logging.INFO)
        self.marks = marks

    def emit(self, record: logging.LogRecord) -> None:
        mark = _LINES.get(str(record.msg))
        if mark is not None:
            self.marks.setdefault(mark, record.created)


def mark_close(crawler: Any, marks: dict[str, float]) -> None:
    """Record the close's marks of ``crawler`` into ``marks`` (``time.time()``)."""

    def stopped() -> None:
        marks["engine_stopped"] = time.time()

    crawler.signals.connect(stopped, signal=signals.engine_stopped, weak=False)
    logging.getLogger("scrapy.core.engine").addHandler(_EngineMarks(marks))
