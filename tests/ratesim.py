"""A token-bucket server and a one-host crawl on a fake clock, for the recovery tests.

The server refills ``1 / interval`` tokens per second up to ``burst``; a
request with a whole token is served (200), any other gets 429 with
``Retry-After: retry_after``. The crawl is the plugin's own HostTable: a
fetch starts when the host's bucket (start-to-start interval, never inside
a Retry-After window) and its IP bucket (spent at the interval in force at
the previous start, as the gate does) both permit; the response comes back
``latency`` later. ``limits`` lets the server's interval change after some fetches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scrapy_politeness.policy import Config, HostTable, IPTable, Signal


@dataclass
class TokenBucket:
    interval: float
    burst: float = 1.0
    retry_after: float = 1.0
    tokens: float = 1.0
    last: float | None = None

    def answer(self, t: float) -> int:
        if self.last is not None:
            self.tokens = min(self.burst, self.tokens + (t - self.last) / self.interval)
        self.last = t
        if self.tokens >= 1.0 - 1e-9:
            self.tokens -= 1.0
            return 200
        return 429


@dataclass
class Run:
    starts: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    intervals: list[float] = field(default_factory=list)  # the interval after each feedback
    windows: list[tuple[float, float]] = field(default_factory=list)  # Retry-After pauses

    @property
    def wall(self) -> float:
        return self.starts[-1] - self.starts[0]

    def refused(self) -> int:
        return self.statuses.count(429)

    def early(self) -> int:
        """Starts inside a Retry-After window they were given (must be 0)."""
        return sum(1 for t in self.starts for a, b in self.windows if a < t < b - 1e-9)


def crawl(config: Config, server: TokenBucket, pages: int, *, latency: float = 0.01,
          limits: dict[int, float] | None = None, table: HostTable | None = None,
          now: float = 0.0, slip: float = 0.0, backlog: bool = False) -> Run:
    """Fetch ``pages`` pages, retrying each 429 until it is served; ``table`` and
    ``now`` continue a crawl (a resumed one) instead of starting afresh. Each
    start goes ``slip`` after its buckets permit (the send margin and loop
    slip of a real crawl: the gap is the interval plus that). ``backlog``: the
    queue tells the host how many pages are left (the probe's price)."""
    table = HostTable(config) if table is None else table
    ips = IPTable(config.ip_floor)
    run = Run()
    done = 0
    fetch = 0
    while done < pages:
        if limits and fetch in limits:
            server.interval = limits[fetch]
        fetch += 1
        state = table.get("h")
        # The gate's rule: the host bucket at its current interval AND the IP
        # bucket, spent at the interval in force at the previous start.
        start = max(now, state.eligible_at(), ips.eligible_at("127.0.0.9")) + slip
        table.start("h", start, waiting=pages - done - 1 if backlog else -1)
        ips.spend("127.0.0.9", start, state.ip_interval())
        status = server.answer(start)
        now = start + latency
        retry_after = server.retry_after if status == 429 else 0.0
        table.feedback("h", Signal(status, retry_after, latency), now)
        if retry_after:
            run.windows.append((now, now + retry_after))
        run.starts.append(start)
        run.statuses.append(status)
        run.intervals.append(table.get("h").interval())
        done += status == 200
        assert fetch < 20 * pages + 100, "the crawl does not finish"
    return run
