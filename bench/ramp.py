"""Where a crawl's time goes beyond T*, from the farm's arrivals: ramp, gaps, tail.

For a scenario whose T* is set by its fast hosts (every host at the target
interval), a crawl's wall time splits into

- the **start-up ramp**: how long after the crawl's first start each fast host
  starts (robots.txt first under ``ROBOTSTXT_OBEY``, DNS, the engine);
- the **per-gap excess**: each gap of a host beyond its interval (send margin,
  slip corrections, timer granularity);
- the **tail**: the last fast host ending after the others.

It also gives what the issue judges: fast-host starts per second for the first
seconds against the limit (fast hosts / interval). A 1 s window holds 3 or 4
starts of a host spaced 0.3 s depending on phase, so a crawl exactly at its
limit shows per-second counts between 60 and 80 for 20 hosts; the mean over the
first 3 s (10 intervals) is free of that phase effect and is the judged figure.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from itertools import pairwise

from scrapy_politeness._sitefarm import Arrival

from .scenarios import Scenario

SECONDS = 5  # per-second counts shown
JUDGED = 3.0  # the window of the judged mean rate (a multiple of 0.3 s)


@dataclass(frozen=True)
class Ramp:
    limit: float  # fast hosts / interval: starts per second at the politeness limit
    per_second: list[int]  # fast-host starts in [t0 + k, t0 + k + 1)
    first_rate: float  # fast-host starts per second over [t0, t0 + JUDGED)
    first_start: float  # latest first start of a fast host after t0 (s)
    median_first_start: float
    gap_median: float  # median fast-host gap (s)
    gap_excess: float  # mean over fast hosts of sum(gap - interval) (s)
    tail: float  # last fast host's end - median fast host's end (s)

    def line(self) -> str:
        counts = ", ".join(str(c) for c in self.per_second)
        share = self.first_rate / self.limit if self.limit else float("nan")
        return (f"fast-host starts/s by second: {counts} (limit {self.limit:.1f}/s); "
                f"first {JUDGED:g} s: **{self.first_rate:.1f}/s = {share:.1%} of the limit**; "
                f"where the time goes: fast hosts' first start +{self.median_first_start:.3f} s "
                f"median, +{self.first_start:.3f} s latest; median gap {self.gap_median:.4f} s, "
                f"excess over all gaps {self.gap_excess:.3f} s per host; tail {self.tail:.3f} s")


def ramp(scenario: Scenario, arrivals: list[Arrival]) -> Ramp | None:
    """The ramp, gap and tail figures of ``arrivals``; None without fast hosts."""
    if not arrivals:
        return None
    ordered = sorted(arrivals, key=lambda a: a.t)
    t0 = ordered[0].t
    fast = {h for h, _ in scenario.urls if scenario.interval_of(h) == scenario.interval}
    by_host: dict[str, list[float]] = {}
    for a in ordered:
        if a.host in fast:
            by_host.setdefault(a.host, []).append(a.t)
    if not by_host:
        return None
    interval = scenario.interval
    starts = [t for seq in by_host.values() for t in seq]
    per_second = [sum(t0 + k <= t < t0 + k + 1 for t in starts) for k in range(SECONDS)]
    first_rate = sum(t < t0 + JUDGED for t in starts) / JUDGED
    firsts = [seq[0] - t0 for seq in by_host.values()]
    gaps = [b - a for seq in by_host.values() for a, b in pairwise(seq)]
    excess = [sum(b - a - interval for a, b in pairwise(seq)) for seq in by_host.values()]
    ends = [seq[-1] for seq in by_host.values()]
    return Ramp(limit=len(by_host) / interval, per_second=per_second, first_rate=first_rate,
                first_start=max(firsts), median_first_start=statistics.median(firsts),
                gap_median=statistics.median(gaps) if gaps else 0.0,
                gap_excess=statistics.fmean(excess), tail=max(ends) - statistics.median(ends))
