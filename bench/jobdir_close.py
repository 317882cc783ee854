"""What the plugin's own part of a JOBDIR close costs, by the hosts it holds.

``python -m bench.jobdir_close [--hosts 20000,100000]``. For each size: a
scheduler store of N hosts x 2 requests (one popped from every third host),
closed as the scheduler queue closes it (``HostQueues.close``), and a host table
of N learnt hosts saved as ``politeness-state.json`` is at the close
(``persistence.snapshot`` + ``save``). Printed: seconds for each (CPU time of
this process: the machine's load does not count), the SQL statements the store's
close ran, and the state file's size. Run it from two checkouts to compare two
versions of the plugin; the crawl's whole close is ``bench.broad --only jobdir``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from scrapy import Request
from scrapy.squeues import PickleFifoDiskQueue, PickleLifoDiskQueue
from scrapy.utils.test import get_crawler

from scrapy_politeness.jobdir import persistence
from scrapy_politeness.jobdir.queue_state import HostQueues
from scrapy_politeness.policy import HostTable, IPTable
from scrapy_politeness.policy.config import Config
from scrapy_politeness.scheduler.heap_entries import HostEntry

__all__ = ["main", "queue_close", "state_save"]


def queue_close(hosts: int, where: Path) -> tuple[float, int, int]:
    """(CPU seconds of the close, SQL statements it ran, requests it kept)."""
    queues = HostQueues(get_crawler(), PickleLifoDiskQueue, str(where), PickleFifoDiskQueue)
    entries = []
    for i in range(hosts):
        queue = queues.make(f"h{i}.test")
        queue.push(Request(f"http://h{i}.test/a"))
        queue.push(Request(f"http://h{i}.test/b"))
        if i % 3 == 0:
            queue.pop()
        entries.append(HostEntry(f"h{i}.test", queue))
    ran: list[str] = []
    assert queues.store is not None
    queues.store._db.set_trace_callback(ran.append)
    start = time.process_time()
    state = queues.close(entries)
    return time.process_time() - start, len(ran), sum(sum(v) for v in state.values())


def state_save(hosts: int, where: Path) -> tuple[float, int]:
    """(CPU seconds of the snapshot and the save, the file's bytes)."""
    table = HostTable(Config())
    for i in range(hosts):
        state = table.get(f"h{i}.test")
        state.adaptive, state.latency, state.last_start, state.touched = 1.5, 0.02, 90.0, 95.0
    path = where / persistence.STATE_FILE
    start = time.process_time()
    document = persistence.snapshot(table.items(), 100.0, time.time(), IPTable(0.25).items())
    persistence.save(path, document)
    return time.process_time() - start, path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.jobdir_close")
    parser.add_argument("--hosts", default="20000,100000")
    args = parser.parse_args()
    print("| hosts | queue close (CPU s) | SQL statements | requests kept | "
          "state save (CPU s) | state file (MB) |\n|---:|---:|---:|---:|---:|---:|")
    for hosts in (int(n) for n in args.hosts.split(",")):
        with tempfile.TemporaryDirectory(prefix="jobdir-close-") as tmp:
            closed, statements, kept = queue_close(hosts, Path(tmp, "q"))
            saved, size = state_save(hosts, Path(tmp))
        print(f"| {hosts} | {closed:.3f} | {statements} | {kept} | {saved:.3f} | "
              f"{size / 1e6:.1f} |")


if __name__ == "__main__":
    main()
