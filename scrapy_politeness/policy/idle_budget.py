"""How many idle kept-alive connections a crawl may hold, from its open-file limit.

Scrapy's connection pool keeps a host's connection idle for up to 240 s after
its last answer. A broad crawl visits most hosts once, so those idle sockets,
not the requests in flight, fill the process's open files ("Too many open
files" after about a thousand hosts at the usual limit of 1,024). Half the
limit, less the connections in flight, is left to idle ones: the other half
stays for in-flight sockets, DNS, the JOBDIR store, logs and Python itself.
"""

from __future__ import annotations

__all__ = ["MIN_IDLE", "idle_connection_budget"]

MIN_IDLE = 8  # a tiny limit still keeps a few hosts' connections for reuse


def idle_connection_budget(open_files: int | None, in_flight: int) -> int | None:
    """The idle connections to keep at most; None (no bound) if ``open_files`` is unlimited."""
    if open_files is None or open_files <= 0:
        return None
    return max(MIN_IDLE, open_files // 2 - max(0, in_flight))
