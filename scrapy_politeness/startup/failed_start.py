"""A crawl that must not start says so in one ERROR line, and nothing more.

A bad setting, a backend the crawl cannot use, or a demo farm that does not
answer: the crawl stops before its first request, ``scrapy crawl`` exits
with 1 (a cron job or CI notices), and the user reads one line that says the
fix, not a traceback after it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NoReturn

__all__ = ["StartRefused", "quiet_failed_start", "refuse_to_start"]

logger = logging.getLogger(__name__)


class StartRefused(RuntimeError):
    """A crawl that must not start; its one ERROR line has been logged."""


def refuse_to_start(message: str, log: logging.Logger = logger) -> NoReturn:
    """Stop a crawl before it starts: ``message`` as one ERROR line, no traceback, and
    ``scrapy crawl`` exits with 1. For a spider's ``from_crawler`` (the demo farm's
    spider, when the farm does not answer) or any component built at start."""
    log.error("%s", message)
    exc = StartRefused(message)
    quiet_failed_start(exc)
    raise exc


def quiet_failed_start(exc: BaseException) -> None:
    """Let the ERROR line just logged be all that a failed start prints.

    ``scrapy crawl`` runs the crawl's start in an asyncio task and re-raises a
    failure from it (that is how it exits with 1); nothing awaits the task, so
    asyncio prints ``Task exception was never retrieved`` and the whole
    traceback after our one line. The task's exception is marked retrieved
    once the task ends, for ``exc`` only: another exception is handed to the
    loop's exception handler as asyncio would have. Scripts that await the
    task still get ``exc``.
    """
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: a Deferred-based start, which has no task
        return
    if task is None:
        return

    def retrieve(done: asyncio.Task[Any]) -> None:
        if done.cancelled():
            return
        found = done.exception()
        if found is not None and found is not exc:
            done.get_loop().call_exception_handler({
                "message": "Task exception was never retrieved", "exception": found,
                "future": done})

    task.add_done_callback(retrieve)
