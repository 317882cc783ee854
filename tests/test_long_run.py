"""A simulated day: 100,000 hosts over 1,000 IPs through the gate.

Memory must follow the active working set (eviction), no invariant may break,
and the cost per decision must stay flat from the first hour to the last.
"""

from __future__ import annotations

import random
import time

from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Signal

DAY = 86_400.0
HOSTS = 100_000
IPS = 1_000
EPS = 1e-9


def test_a_simulated_day_stays_bounded_correct_and_flat() -> None:
    rng = random.Random(7)
    config = Config(default=1.0, floor=0.5, ceiling=30.0, ip_floor=0.1)
    hosts = HostTable(config, dead_after=5)
    ips = IPTable(config.ip_floor)
    gate: Gate[int] = Gate(hosts, ips, margin=0.01, max_in_flight=2)
    # Each host is crawled in one burst of 1-4 requests at a random time of the day.
    bursts = sorted((rng.uniform(0, DAY), h, rng.randint(1, 4)) for h in range(HOSTS))
    ip_of = [f"127.1.{(h % IPS) // 250}.{h % 250}" for h in range(HOSTS)]
    last_start: dict[str, float] = {}
    pending_done: list[tuple[float, str]] = []
    now = 0.0
    released = submitted = 0
    peak_hosts = peak_ips = 0
    next_evict = 300.0
    hour_cost: dict[int, list[float]] = {}
    i = 0
    while i < len(bursts) or gate.waiting:
        at = gate.next_event()
        nxt = bursts[i][0] if i < len(bursts) else float("inf")
        if pending_done:
            nxt = min(nxt, pending_done[0][0])
        now = max(now, min(nxt, at) if at is not None else nxt)
        while i < len(bursts) and bursts[i][0] <= now:
            _, h, n = bursts[i]
            for _ in range(n):
                gate.submit(f"h{h}.example", ip_of[h], h, now)
                submitted += 1
            i += 1
        while pending_done and pending_done[0][0] <= now:
            _, key = pending_done.pop(0)
            status = 503 if rng.random() < 0.05 else 200
            hosts.feedback(key, Signal(status, 0.0, 0.05, 0.05), now)
            gate.done(key)
            gate.touch(key)
        t0 = time.perf_counter()
        rels = gate.poll(now)
        cost = time.perf_counter() - t0
        for rel in rels:
            prev = last_start.get(rel.key)
            if prev is not None:
                assert now - prev >= hosts.get(rel.key).interval() + 0.01 - EPS
            last_start[rel.key] = now
            pending_done.append((now + 0.2, rel.key))
            released += 1
        if rels:
            hour_cost.setdefault(int(now // 3600), []).append(cost / len(rels))
        if now >= next_evict:
            next_evict = now + 300.0
            peak_hosts = max(peak_hosts, len(hosts))
            peak_ips = max(peak_ips, len(ips))
            hosts.evict(now - 300.0)
            ips.evict(now - 0.01)
            last_start = {k: v for k, v in last_start.items() if k in hosts}
    assert released == submitted
    # The working set: ~100k hosts over a day is ~350 per 5 minutes, plus the
    # backed-off ones that eviction must keep.
    assert peak_hosts < 3_000, peak_hosts
    assert peak_ips < 1_000, peak_ips
    hosts.evict(now + DAY)
    ips.evict(now + DAY)
    assert len(hosts) == 0
    assert len(ips) == 0
    # Time per decision stays flat: the last hours cost about what the first did.
    first = sorted(c for h in range(0, 3) for c in hour_cost.get(h, []))
    last = sorted(c for h in range(21, 24) for c in hour_cost.get(h, []))
    median_first, median_last = first[len(first) // 2], last[len(last) // 2]
    assert median_last < 3 * median_first + 2e-6, (median_first, median_last)
