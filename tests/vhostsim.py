"""Vhosts sharing IPs, each limited by its own server-side bucket, on a fake clock.

The gate, the host and IP tables are the plugin's own; each vhost's server is a
``ratesim.TokenBucket`` (nginx ``limit_req`` keyed by server name, burst 0).
A refused page is retried at the back of its host's queue, as Scrapy's retry
middleware does. Answers come back ``latency`` after the start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fakeclock import GateSim
from ratesim import TokenBucket

from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Release, Signal


@dataclass
class VhostRun:
    wall: float = 0.0
    requests: int = 0
    refused: int = 0
    ra_violations: int = 0  # starts inside a Retry-After window the host was given
    intervals: dict[str, list[float]] = field(default_factory=dict)


def crawl_vhosts(servers: dict[str, tuple[str, TokenBucket]], pages: int, *,
                 model: str, config: Config | None = None, latency: float = 0.01,
                 status: int = 429, with_retry_after: bool = True,
                 backlog: Callable[[str, int], int] | None = None) -> VhostRun:
    """Crawl ``pages`` pages of every vhost (``servers``: host -> (ip, server)).

    ``status``: the refusal's status (429, or nginx's default 503);
    ``with_retry_after``: whether the refusal carries the server's Retry-After.
    ``backlog(host, left)``: the backlog the queue would report (default: the
    pages left to fetch of that host)."""
    config = config or Config(recovery="fast")
    gate: Gate[Any] = Gate(HostTable(config), IPTable(config.ip_floor, model))
    sim = GateSim(gate, max_steps=2_000_000)
    left = dict.fromkeys(servers, pages)
    windows: dict[str, float] = {}
    run = VhostRun(intervals={h: [] for h in servers})

    def answer(rel: Release[Any]) -> None:
        ip, server = servers[rel.key]
        code = server.answer(rel.at)
        run.requests += 1
        if rel.at < windows.get(rel.key, 0.0) - 1e-9:
            run.ra_violations += 1
        retry_after = 0.0
        if code != 200:
            run.refused += 1
            code = status
            if with_retry_after:
                retry_after = server.retry_after
        state = gate.hosts.get(rel.key)
        state.backlog = (backlog or (lambda _h, n: n))(rel.key, left[rel.key])
        explained = 0.0 < state.adaptive < state.good_at
        gate.ips.feedback(ip, rel.key, code, retry_after, explained)
        gate.hosts.feedback(rel.key, Signal(code, retry_after, latency), sim.now)
        if retry_after:
            windows[rel.key] = sim.now + retry_after
        run.intervals[rel.key].append(state.interval())
        gate.touch(rel.key)
        if code == 200:
            left[rel.key] -= 1
        else:
            sim.submit(rel.key, ip, rel.token)  # the retry, behind the host's queue

    sim.on_release = lambda rel: sim.at(rel.at + latency, lambda: answer(rel))
    for host, (ip, _) in servers.items():
        for i in range(pages):
            sim.submit(host, ip, (host, i))
    sim.run()
    starts = [r.at for r in sim.releases]
    run.wall = max(starts) - min(starts)
    assert not any(left.values()), left
    return run
