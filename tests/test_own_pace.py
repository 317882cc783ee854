"""Paces are the intervals the host's controller chose, never gaps another bucket made.

A host held back by its IP (busy with other vhosts) did not prove that its own
pace was needed: the recovery judges the gap its own bucket allowed.
"""

from __future__ import annotations

from typing import Any

import pytest
from fakeclock import GateSim
from ratesim import TokenBucket
from vhostsim import crawl_vhosts

from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Signal

IP = "127.0.9.3"


def test_a_start_held_by_its_ip_keeps_its_own_gap() -> None:
    """Coupled, a slow vhost (2 s) holds its fast neighbour's starts on the IP:
    the fast one's recorded gap is still its own 0.5 s."""
    hosts = HostTable(Config(default=0.5, floor=0.25))
    hosts.get("slow.test").adaptive = 2.0
    sim = GateSim(Gate(hosts, IPTable(0.25, "coupled")))
    for i in range(4):
        sim.submit("fast.test", IP, ("f", i))
        sim.submit("slow.test", IP, ("s", i))
    sim.run(until=3.0)
    fast = sim.times("fast.test")
    assert fast[-1] - fast[-2] > 1.0  # the IP held it ...
    assert hosts.get("fast.test").gap == pytest.approx(0.5)  # ... its own pace was 0.5 s


def test_an_idle_host_keeps_the_idle_gap() -> None:
    """Nothing waiting: the gap is idle time, not a pace (AT_PACE ignores it)."""
    hosts = HostTable(Config(default=0.5, floor=0.25))
    gate: Gate[Any] = Gate(hosts, IPTable(0.25, "decoupled"))
    gate.submit("a.test", IP, 1, 0.0)
    gate.poll(0.0)
    gate.submit("a.test", IP, 2, 3.0)
    gate.poll(3.0)
    assert hosts.get("a.test").gap == pytest.approx(3.0)


def test_the_queue_says_since_when_a_host_waited() -> None:
    """With the scheduler queue the gate gets the request only when it may go;
    the queue's ``queued_since`` says the host was waiting all along."""
    hosts = HostTable(Config(default=0.5, floor=0.25))
    hosts.start("a.test", 0.0)
    state = hosts.get("a.test")
    state.queued_since = 0.1
    hosts.start("a.test", 1.7, 1.7)  # handed out late: its IP was busy
    assert state.gap == pytest.approx(0.5)
    assert state.queued_since == float("inf")  # one hand-out, one start
    hosts.start("a.test", 2.2 + 1.0, 3.2)  # not queued before: an idle gap
    assert state.gap == pytest.approx(1.5)


def test_a_held_host_probes_down_after_its_failure() -> None:
    """Coupled, after a 429 the fast recovery holds the known-good pace; its
    starts held by the IP still count as fetches at that pace, so it probes
    down instead of holding for the rest of the crawl."""
    config = Config(recovery="fast", ip_floor=0.1)
    hosts = HostTable(config)
    gate: Gate[Any] = Gate(hosts, IPTable(0.1, "coupled"))
    state = hosts.get("a.test")
    state.adaptive, state.fail_at, state.good_at, state.fail_cost = 0.9, 0.6, 0.9, 1.0
    state.healthy_run = 2
    hosts.get("b.test").adaptive = 1.2  # the neighbour that holds the IP
    sim = GateSim(gate)

    def fed(rel: Any) -> None:
        if rel.key == "a.test":
            hosts.feedback("a.test", Signal(200, 0.0, 0.01), sim.now)
            gate.touch("a.test")

    sim.on_release = lambda rel: sim.at(rel.at + 0.01, lambda: fed(rel))
    for i in range(30):
        sim.submit("a.test", IP, ("a", i))
        sim.submit("b.test", IP, ("b", i))
    sim.run(until=30.0)
    assert state.adaptive < 0.85  # probed below the known-good 0.9 s


@pytest.mark.parametrize(("status", "retry_after"), [(429, True), (503, False)])
def test_four_vhosts_on_two_ips_settle_at_their_own_limit(status: int, retry_after: bool) -> None:
    """The nginx scenario on the fake clock: 2 r/s per server name, 4 vhosts on
    2 IPs, 40 pages each. Decoupled, each host learns its own 0.5 s."""
    servers = {f"v{i}.test": (f"127.0.0.{1 + i // 2}", TokenBucket(0.5, retry_after=1.0))
               for i in range(4)}
    run = crawl_vhosts(servers, 40, model="decoupled", status=status,
                       with_retry_after=retry_after, config=Config(recovery="fast", ip_floor=0.1))
    assert run.wall / (39 * 0.5) <= 1.15
    assert run.refused <= 0.05 * run.requests
    assert run.ra_violations == 0
