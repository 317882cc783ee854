"""A million hosts on a simulated clock: memory per structure, eviction cost.

``python -X tracemalloc=3 -m bench.memory --hosts 1000000`` (``bench/memory.py``
runs this). No network, no reactor: new hosts arrive at ``RATE`` per simulated
second, each with ``PAGES`` requests (robots.txt and a page), through the gate,
the host and IP tables, the bucket keys, the DNS cache (fed synthetic answers,
TTL ``DNS_TTL``: longer than the idle time, so it is use that evicts, not the
TTL) and its pins; a share of the hosts turn dead, ask a Crawl-delay, are
parked or are suspended by the breaker (a probe that fails too), so the
compact verdicts and the suspensions are in. Every ``EVERY`` simulated seconds the
middleware's eviction pass runs (and the live line's count), timed. After the
last host, the clock runs on until every host is idle past
``POLITENESS_IDLE_TTL`` and the verdicts' lifetimes.

Traced memory (``tracemalloc``) is read after the first 10,000 hosts, at the
peak (the largest traced heap seen at a pass, its split per structure taken
at the last pass before the last host) and after the hosts went idle, each
split per structure by the first frame of the allocation that is in one of
the structures' modules. Prints one JSON object.
"""

from __future__ import annotations

import gc
import inspect
import itertools
import time
import tracemalloc
from typing import Any

from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.downloader.host_keys import HostKeys
from scrapy_politeness.observe.live_line import PeriodWaits, snapshot
from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Signal
from scrapy_politeness.policy.breaker import Breaker

RATE = 100.0  # new hosts per simulated second (about 200 requests/s)
PAGES = 2  # requests per host: robots.txt and one page
TICK = 0.1  # simulated seconds between two polls of the gate
EVERY = 30.0  # simulated seconds between two eviction passes (the middleware's)
IDLE_TTL = 300.0  # POLITENESS_IDLE_TTL's default
MARGIN = 0.01  # POLITENESS_SEND_MARGIN
DNS_TTL = 900.0
LATENCY = 0.05
FIRST = 10_000  # "after the first 10,000 hosts"
CONFIG = Config(default=1.0, floor=0.25, ceiling=60.0, ip_floor=0.1)

# Which structure an allocation belongs to: the first frame (newest first) in one of these.
STRUCTURES = {"tables.py": "host table", "host_state.py": "host table",
              "verdicts.py": "verdicts", "ips.py": "IP table", "gate.py": "gate",
              "eligibility.py": "gate", "cache.py": "DNS answers and pins",
              "host_keys.py": "host keys", "keys.py": "host keys",
              "breaker.py": "suspensions"}
PASS_THROUGH = ("idle_maps.py",)  # helpers: the caller's structure


def host_name(i: int) -> str:
    return f"www.site{i}.example{i % 7}.com"


def ip_of(i: int, n_ips: int) -> str:
    j = i % n_ips
    return f"127.{(j >> 16) & 255}.{(j >> 8) & 255}.{j & 255}"


class SyntheticDns(DnsCache):
    """The DNS cache with answers made up on the spot: every name has an address."""

    n_ips = 1000

    async def _query(self, hostname: str) -> tuple[tuple[str, ...], float, None]:
        return (ip_of(int(hostname[8:hostname.index(".", 8)]), self.n_ips),), DNS_TTL, None


def _resolve(dns: DnsCache, name: str) -> str | None:
    """The answer, synchronously: the synthetic query never suspends."""
    found = dns.lookup(name)
    if found is not DnsCache.MISS:
        return found  # type: ignore[return-value]
    coro = dns._lookup_and_cache(name)
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    raise AssertionError("the synthetic lookup suspended")


def _bench_lines() -> dict[tuple[str, int], str]:
    """This file's lines that make structures' memory: host names are the keys."""
    lines: dict[tuple[str, int], str] = {}
    for fn, label in ((host_name, "host names"), (ip_of, "IP names")):
        src, start = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or ""
        lines.update({(filename, n): label for n in range(start, start + len(src))})
    return lines


def split(snap: tracemalloc.Snapshot | None,
          baseline: tracemalloc.Snapshot | None) -> dict[str, int]:
    """Traced bytes above ``baseline`` per structure (none when not tracing)."""
    if snap is None or baseline is None:
        return {}
    ours = _bench_lines()
    out: dict[str, int] = {}
    for stat in snap.compare_to(baseline, "traceback"):
        label = "other"
        for frame in reversed(stat.traceback):  # newest first
            name = frame.filename.rsplit("/", 1)[-1]
            if name in PASS_THROUGH:
                continue
            if frame.filename == __file__:  # the simulation's own (its names: the keys)
                label = ours.get((frame.filename, frame.lineno), "simulation")
                break
            if name in STRUCTURES:
                label = STRUCTURES[name]
                break
        out[label] = out.get(label, 0) + stat.size_diff
    return {k: v for k, v in sorted(out.items()) if v}


class World:
    """The structures of one crawler, as the middleware builds them."""

    def __init__(self, n_ips: int, idle_ttl: float) -> None:
        self.idle_ttl = idle_ttl
        self.hosts = HostTable(CONFIG, dead_after=5)
        self.ips = IPTable(CONFIG.ip_floor, "decoupled")
        self.gate: Gate[int] = Gate(self.hosts, self.ips, margin=MARGIN, max_in_flight=8)
        self.keys = HostKeys("host")
        self.dns = SyntheticDns(hosts_file=None, max_ttl=DNS_TTL, clock=lambda: self.now)
        self.dns.n_ips = n_ips
        self.n_ips = n_ips
        self.breaker = Breaker()  # POLITENESS_ON_CEILING = "suspend" (suspended_hosts.py)
        self.now = 0.0
        self.names: dict[str, str] = {}  # key -> host name, while its requests wait
        self.requests = 0

    def arrive(self, i: int) -> None:
        name = host_name(i)
        key = self.keys.key(name)
        ip = _resolve(self.dns, name)
        self.names[key] = name
        for _ in range(PAGES):
            self.gate.submit(key, self.keys.ip_bucket(ip), i, self.now)

    def poll(self) -> None:
        now = self.now
        hosts, gate = self.hosts, self.gate
        for rel in gate.poll(now):
            key, i = rel.key, rel.token
            name = self.names[key]
            state = hosts.get(key)
            if state.dead or now < state.parked_until:  # dropped (DroppedHosts.check)
                hosts.touch(key, now)
                gate.done(key)
                continue
            self.dns.pin(name, _resolve(self.dns, name) or "")
            self.requests += 1
            if i % 100 == 7:  # robots.txt asked for a Crawl-delay (CrawlDelays.parsed)
                state.crawl_delay = 2.0
            if i % 500 == 13:  # down: suspended, and its probe fails too (SuspendedHosts)
                self.breaker.sent(key, state, now)
                hosts.feedback(key, Signal(503, 0.0, LATENCY), now + LATENCY)
                self.breaker.judge(key, state, tripped=True, sent_at=now, failed=True,
                                   now=now + LATENCY)
                gate.done(key)
                if not gate.waiting_for(key):
                    del self.names[key]
                continue
            status = 503 if i % 200 == 3 else 200
            hosts.feedback(key, Signal(status, 0.0, LATENCY), now + LATENCY)
            if i % 200 == 3:
                state.dead = True  # as dead_after fetches at the ceiling would
            elif i % 1000 == 11:
                state.parked_until = now + 3600.0  # a Retry-After above the maximum
            gate.done(key)
            if not gate.waiting_for(key):
                del self.names[key]

    def evict(self) -> tuple[float, float]:
        """The middleware's pass (downloader/periodic.py) and the live line's
        count, each timed; seconds."""
        t0 = time.perf_counter()
        now = self.now
        self.hosts.evict(now - self.idle_ttl)
        hosts, gate = self.hosts, self.gate
        self.breaker.prune(now - self.idle_ttl, lambda key: hosts.whole(key) is not None
                           or gate.waiting_for(key) > 0)
        self.ips.evict(now - MARGIN)
        self.dns.evict(now - self.idle_ttl)
        self.keys.trim()
        t1 = time.perf_counter()
        snapshot(self.hosts, PeriodWaits(), self.gate.waiting, 0.0)
        return t1 - t0, time.perf_counter() - t1


def _mean_ms(passes: list[tuple[int, float, float]], field: int) -> float:
    return round(1e3 * sum(p[field] for p in passes) / len(passes), 3)


def _snapshot() -> tracemalloc.Snapshot | None:
    return tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None


def simulate(n_hosts: int, n_ips: int = 1000, idle_ttl: float = IDLE_TTL, *,
             trace: bool = True) -> dict[str, Any]:
    """The run's figures; ``trace=False`` times it without tracemalloc (no bytes)."""
    if trace and not tracemalloc.is_tracing():
        tracemalloc.start(3)
    world = World(n_ips, idle_ttl)
    gc.collect()
    base = _snapshot()
    base_bytes = tracemalloc.get_traced_memory()[0]
    first: dict[str, int] = {}
    at_peak: dict[str, int] = {}
    peak = first_bytes = suspended_peak = 0
    passes: list[tuple[int, float, float]] = []  # (hosts seen, eviction s, live line s)
    windows: list[tuple[int, float]] = []  # (requests, CPU seconds) between two passes
    arrived = 0
    next_pass = EVERY
    cpu = time.process_time()
    done_at = 0.0
    while arrived < n_hosts or world.gate.waiting:
        world.now = round(world.now + TICK, 6)
        due = min(n_hosts, int(world.now * RATE))
        while arrived < due:
            world.arrive(arrived)
            arrived += 1
        world.poll()
        if not first and arrived >= FIRST:
            gc.collect()
            first_bytes = tracemalloc.get_traced_memory()[0]
            first = split(_snapshot(), base) or {"untraced": 0}
        if world.now >= next_pass:
            next_pass += EVERY
            windows.append((world.requests, time.process_time() - cpu))
            timed = world.evict()
            if world.now > 2 * idle_ttl or arrived >= n_hosts:  # the window is full
                passes.append((arrived, *timed))
            current = tracemalloc.get_traced_memory()[0]
            peak = max(peak, current)
            suspended_peak = max(suspended_peak, len(world.breaker))
            if arrived < n_hosts and n_hosts - arrived <= RATE * EVERY:
                at_peak = split(_snapshot(), base)
            cpu = time.process_time()
        done_at = world.now
    # Idle: the clock runs on past the idle time and the verdicts' lifetimes.
    idle_until = world.now + idle_ttl + CONFIG.ceiling + 3600.0 + 2 * EVERY
    while world.now < idle_until:
        world.now += EVERY
        world.evict()
    gc.collect()
    idle_bytes = tracemalloc.get_traced_memory()[0]
    idle = split(_snapshot(), base)
    tenth = max(1, len(passes) // 10)
    first_passes, last_passes = passes[:tenth], passes[-tenth:]
    rates = [(b[0] - a[0], b[1]) for a, b in itertools.pairwise(windows)]
    steady = rates[-len(passes):]
    early, late = steady[:tenth], steady[-tenth:]

    def per_request(window: list[tuple[int, float]]) -> float:
        n = sum(r for r, _ in window)
        return sum(s for _, s in window) / n * 1e6 if n else 0.0

    dead, delays, parks = world.hosts.verdicts.counts()
    return {
        "hosts": n_hosts, "ips": n_ips, "requests": world.requests,
        "simulated_seconds": round(done_at, 1),
        "baseline_bytes": base_bytes, "after_first_bytes": first_bytes - base_bytes,
        "peak_bytes": peak - base_bytes, "after_idle_bytes": idle_bytes - base_bytes,
        "idle_minus_first_bytes": idle_bytes - first_bytes,
        "after_first": first, "at_peak": at_peak, "after_idle": idle,
        "left_after_idle": {"host states": len(world.hosts), "ips": len(world.ips),
                            "dns names": len(world.dns), "dead records": dead,
                            "crawl-delay records": delays, "park records": parks,
                            "suspensions": len(world.breaker)},
        "suspensions_at_peak": suspended_peak,
        "hosts_seen_first_tenth": first_passes[-1][0],
        "hosts_seen_last_tenth": last_passes[-1][0],
        "eviction_ms_first_tenth": _mean_ms(first_passes, 1),
        "eviction_ms_last_tenth": _mean_ms(last_passes, 1),
        "live_line_ms_first_tenth": _mean_ms(first_passes, 2),
        "live_line_ms_last_tenth": _mean_ms(last_passes, 2),
        "cpu_us_per_request_first_tenth": round(per_request(early), 2),
        "cpu_us_per_request_last_tenth": round(per_request(late), 2),
    }
