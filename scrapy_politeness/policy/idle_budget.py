"""How many idle kept-alive connections a crawl may hold: its concurrency and its open files.

Scrapy's connection pool keeps a host's connection idle for up to 240 s after
its last answer. A broad crawl visits most hosts once, so those idle sockets,
not the requests in flight, fill the process's open files ("Too many open
files" after about a thousand hosts at the usual limit of 1,024) and its
memory (about 2.5 KB of RSS each: +23 MiB in a 12,000-host crawl whose limit
of 20,000 let it keep ~9,900). At most ``IDLE_PER_SLOT`` idle connections per concurrent request
are kept, the hosts the crawl returns to soon (the pool closes the least
recently used first), and never more than half the open-file limit less the
connections in flight: the other half stays for in-flight sockets, DNS, the
JOBDIR store, logs and Python itself.
"""

from __future__ import annotations

__all__ = ["IDLE_PER_SLOT", "MIN_IDLE", "idle_connection_budget"]

MIN_IDLE = 8  # a tiny limit still keeps a few hosts' connections for reuse
IDLE_PER_SLOT = 16  # idle connections kept per concurrent request


def idle_connection_budget(open_files: int | None, in_flight: int) -> int:
    """The idle connections to keep at most (``open_files`` None: unlimited)."""
    in_flight = max(0, in_flight)
    budget = IDLE_PER_SLOT * max(1, in_flight)
    if open_files is not None and open_files > 0:
        budget = min(budget, open_files // 2 - in_flight)
    return max(MIN_IDLE, budget)
