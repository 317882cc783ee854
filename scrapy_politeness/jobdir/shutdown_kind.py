"""Tell a JOBDIR left by a forced shutdown from one left by a clean pause.

A second Ctrl-C (or a kill, or a crash) stops Scrapy without closing the
spider: the scheduler never writes ``requests.queue/active.json`` and the
plugin never writes its state file. ``requests.seen`` was appended to all
along, so a resumed crawl filters every request the killed run had queued as a
duplicate and finishes "cleanly" without them. Scrapy says nothing; this
module finds the evidence so the middleware can say it loudly.

What a clean close leaves, in the order it writes them (``ExecutionEngine``):
the disk queues, then ``active.json`` (``Scheduler.close``), then the last
fingerprints flushed into ``requests.seen`` (the dupefilter closes its file),
then, on ``spider_closed``, our state file. So in a clean JOBDIR nothing in
``requests.queue`` is newer than ``active.json``, and our state file is not
older than ``requests.seen``. The check must run before the scheduler opens
the JOBDIR (the middleware is built first), and compares modification times
strictly, so equal coarse timestamps never raise a false alarm.

A queue whose saved state is missing or stale is worse than empty: the disk
queues' headers no longer match their contents, and popping from them raises
``OSError`` on every engine tick, so the resumed crawl never ends. Such a
queue is set aside (renamed, never deleted) before the scheduler opens, and
the crawl resumes with an empty queue.

Pure stdlib, file metadata only: it reads no request and no state.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["QUEUE_DIR", "QUEUE_STATE", "SEEN_FILE", "UNCLEAN_WARNING", "inspect_at_start",
           "set_aside_queue", "unclean_evidence"]

SEEN_FILE = "requests.seen"
QUEUE_DIR = "requests.queue"
QUEUE_STATE = "active.json"


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _newest_queue_file(queue_dir: Path) -> tuple[float, str] | None:
    newest: tuple[float, str] | None = None
    for root, _dirs, names in os.walk(queue_dir):
        for name in names:
            if root == str(queue_dir) and name == QUEUE_STATE:
                continue
            path = Path(root, name)
            mtime = _mtime(path)
            if mtime is not None and (newest is None or mtime > newest[0]):
                newest = (mtime, str(path.relative_to(queue_dir.parent)))
    return newest


def unclean_evidence(jobdir: str | os.PathLike[str],
                     state_file: str | None) -> tuple[list[str], bool]:
    """Why ``jobdir`` looks left by a run that never closed (empty when it looks
    clean), and whether its queue is unusable (its saved state missing or stale).

    ``state_file`` is our own state file's name inside ``jobdir``, or None
    when this crawl keeps no state file (``POLITENESS_PERSIST = False``, or a
    shared backend). A missing state file alone is no evidence: the last run
    may have kept no file. A fresh JOBDIR (nothing seen, nothing queued) is clean.
    """
    root = Path(jobdir)
    seen = root / SEEN_FILE
    seen_at = _mtime(seen) if _size(seen) else None
    queue_dir = root / QUEUE_DIR
    newest = _newest_queue_file(queue_dir)
    if seen_at is None and newest is None:
        return [], False  # a fresh JOBDIR
    evidence = []
    queue_state_at = _mtime(queue_dir / QUEUE_STATE)
    if queue_state_at is None:
        what = f"{SEEN_FILE} lists requests" if seen_at is not None else \
            f"{QUEUE_DIR} holds queued requests"
        evidence.append(f"{what} but {QUEUE_DIR}/{QUEUE_STATE}, which Scrapy writes when the "
                        f"crawl closes, is missing")
    elif newest is not None and newest[0] > queue_state_at:
        evidence.append(f"{newest[1]} changed after {QUEUE_DIR}/{QUEUE_STATE} was "
                        f"written: the queue's saved state is stale")
    queue_unusable = bool(evidence)
    if state_file is not None:
        ours_at = _mtime(root / state_file)
        if ours_at is not None and seen_at is not None and ours_at < seen_at:
            evidence.append(f"{state_file} is older than {SEEN_FILE}: the last run never "
                            f"saved its host and IP state")
    return evidence, queue_unusable


def set_aside_queue(jobdir: str | os.PathLike[str]) -> str | None:
    """Rename ``JOBDIR/requests.queue`` out of Scrapy's way; returns the new name
    (None when there is no queue directory)."""
    if not (Path(jobdir) / QUEUE_DIR).is_dir():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    root = Path(jobdir)
    target = root / f"{QUEUE_DIR}.unclean-{stamp}"
    n = 1
    while target.exists():
        n += 1
        target = root / f"{QUEUE_DIR}.unclean-{stamp}-{n}"
    (root / QUEUE_DIR).rename(target)
    return target.name


def inspect_at_start(jobdir: str, state_file: str | None) -> tuple[str, str, str] | None:
    """None for a clean JOBDIR; else the arguments of :data:`UNCLEAN_WARNING`
    (the JOBDIR, the evidence, what was done), its unusable queue set aside."""
    evidence, queue_unusable = unclean_evidence(jobdir, state_file)
    if not evidence:
        return None
    done = ""
    if queue_unusable:  # its disk queues would fail on every pop: the crawl would never end
        try:
            moved = set_aside_queue(jobdir)
        except OSError as exc:
            moved, done = None, f"Its inconsistent queue could not be moved aside ({exc}). "
        if moved is not None:
            done = (f"Its inconsistent queue was moved to {moved} and this run starts with "
                    f"an empty queue. ")
    return jobdir, "; ".join(evidence), done


UNCLEAN_WARNING = (
    "politeness: JOBDIR %s was not closed cleanly (%s). The previous run was stopped by "
    "force (a second Ctrl-C, a kill or a crash) before Scrapy saved its queue: the requests "
    "it had queued and not yet fetched are LOST. They are listed in requests.seen, so this "
    "run filters them out as duplicates and will report 'finished' without them. %sHost "
    "and IP politeness state is from the last clean close, if any. To fetch everything, delete "
    "the JOBDIR and start the crawl again. To pause safely, press Ctrl-C ONCE and wait for "
    "the crawl to close.")
