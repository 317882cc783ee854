"""The IP bucket's own pace (``POLITENESS_IP_MODEL``), on the fake clock.

Decoupled, a site's policy (429, Retry-After, Crawl-delay) slows its host
only, and the IP widens only from the machine's evidence: failures its hosts'
own probes do not explain, from several vhosts. Coupled keeps the reference
design: each start pushes the IP by its host's interval.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from fakeclock import GateSim

from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Signal
from scrapy_politeness.policy.ips import BACKOFF, CONFIRM, WINDOW, machine_evidence
from scrapy_politeness.settings import PolitenessSettings

IP = "127.0.9.1"


def gate_of(model: str, config: Config | None = None) -> Gate[Any]:
    config = config or Config()
    return Gate(HostTable(config), IPTable(config.ip_floor, model), margin=0.0)


@pytest.mark.parametrize(("model", "gap"), [("decoupled", 1.0), ("coupled", 2.0)])
def test_two_vhosts_at_one_second_on_one_ip(model: str, gap: float) -> None:
    """Before anything failed: decoupled, each vhost keeps its own 1 s; coupled,
    the two alternate at 2 s each (the reference design's inflation)."""
    sim = GateSim(gate_of(model))
    for i in range(6):
        sim.submit("a.test", IP, ("a", i))
        sim.submit("b.test", IP, ("b", i))
    sim.run()
    for host in ("a.test", "b.test"):
        times = sim.times(host)
        gaps = [t1 - t0 for t0, t1 in pairwise(times)]
        assert gaps == pytest.approx([gap] * 5)


def test_ip_floor_still_spaces_the_machine() -> None:
    """Decoupled, the IP floor still binds: three vhosts at 0.25 s on an IP
    floored at 0.25 s share that pace."""
    config = Config(default=0.25, floor=0.25, ip_floor=0.25)
    sim = GateSim(gate_of("decoupled", config))
    for i in range(4):
        for host in ("a.test", "b.test", "c.test"):
            sim.submit(host, IP, (host, i))
    sim.run()
    starts = sorted(r.at for r in sim.releases)
    assert min(t1 - t0 for t0, t1 in pairwise(starts)) >= 0.25 - 1e-9


def test_a_sites_policy_never_widens_its_ip() -> None:
    ips = IPTable(0.25, "decoupled")
    for host in ("a.test", "b.test", "c.test"):
        assert not ips.feedback(IP, host, 429, 0.0, explained=False)
        assert not ips.feedback(IP, host, 503, 2.0, explained=False)  # with Retry-After
    assert ips.interval(IP) == 0.25


def test_one_vhost_failing_is_its_own_limit() -> None:
    """503 without Retry-After from one vhost only (nginx limit_req's default
    answer): that site's limit; the IP keeps its floor."""
    ips = IPTable(0.25, "decoupled")
    for _ in range(10):
        assert not ips.feedback(IP, "a.test", 503, 0.0, explained=False)
        ips.feedback(IP, "b.test", 200, 0.0, explained=False)
    assert ips.interval(IP) == 0.25


@pytest.mark.parametrize("status", [0, 500, 503])
def test_several_vhosts_failing_widen_the_ip_then_it_recovers(status: int) -> None:
    ips = IPTable(0.25, "decoupled")
    assert not ips.feedback(IP, "a.test", status, 0.0, explained=False)
    assert ips.feedback(IP, "b.test", status, 0.0, explained=False)
    assert ips.interval(IP) == pytest.approx(0.25 * BACKOFF)
    assert ips.feedback(IP, "a.test", status, 0.0, explained=False)
    assert ips.interval(IP) == pytest.approx(0.25 * BACKOFF ** 2)
    ips.spend(IP, 10.0, 0.0)
    assert ips.eligible_at(IP) == pytest.approx(10.0 + 0.25 * BACKOFF ** 2)
    for _ in range(CONFIRM - 1):
        ips.feedback(IP, "a.test", 200, 0.0, explained=False)
    assert ips.interval(IP) == pytest.approx(0.25 * BACKOFF ** 2)  # not yet confirmed
    for _ in range(20):
        ips.feedback(IP, "b.test", 200, 0.0, explained=False)
    assert ips.interval(IP) == 0.25
    assert not ips._pace  # back at the floor: nothing kept


def test_failures_far_apart_or_explained_are_not_the_machine() -> None:
    ips = IPTable(0.25, "decoupled")
    ips.feedback(IP, "a.test", 0, 0.0, explained=False)
    for _ in range(WINDOW):
        ips.feedback(IP, "c.test", 301, 0.0, explained=False)
    assert not ips.feedback(IP, "b.test", 0, 0.0, explained=False)  # outside the window
    assert not ips.feedback(IP, "a.test", 503, 0.0, explained=True)  # a's own probe
    assert ips.interval(IP) == 0.25


def test_coupled_ignores_the_evidence() -> None:
    ips = IPTable(0.25, "coupled")
    ips.feedback(IP, "a.test", 0, 0.0, explained=False)
    assert not ips.feedback(IP, "b.test", 0, 0.0, explained=False)
    ips.spend(IP, 10.0, 3.0)
    assert ips.eligible_at(IP) == 13.0


def test_machine_evidence_rule() -> None:
    assert machine_evidence(200, 0.0, False) is False
    assert machine_evidence(404, 0.0, False) is False
    assert machine_evidence(429, 0.0, False) is None
    assert machine_evidence(503, 1.0, False) is None
    assert machine_evidence(503, 0.0, True) is None
    assert machine_evidence(503, 0.0, False) is True
    assert machine_evidence(0, 0.0, False) is True


def test_a_429_slows_its_host_not_its_neighbour() -> None:
    """Decoupled: a rejected vhost backs off; its neighbour on the IP keeps 1 s."""
    gate = gate_of("decoupled", Config(recovery="fast"))
    sim = GateSim(gate)
    for i in range(8):
        sim.submit("a.test", IP, ("a", i))
        sim.submit("b.test", IP, ("b", i))
    sim.run(until=2.5)
    paused = sim.now + 3.0
    gate.hosts.feedback("a.test", Signal(429, 3.0), sim.now)
    gate.ips.feedback(IP, "a.test", 429, 3.0, explained=False)
    gate.touch("a.test")
    sim.run()
    b = sim.times("b.test")  # at most one IP floor late when a starts on the same instant
    assert all(1.0 - 1e-9 <= t1 - t0 <= 1.25 + 1e-9 for t0, t1 in pairwise(b))
    assert min(sim.times("a.test")[3:]) >= paused - 1e-9


def test_setting_is_validated_and_decoupled_by_default() -> None:
    assert PolitenessSettings.from_settings({}).ip_model == "decoupled"
    s = PolitenessSettings.from_settings({"POLITENESS_IP_MODEL": "coupled"})
    assert s.ip_model == "coupled"
    with pytest.raises(ValueError, match=r"POLITENESS_IP_MODEL.*'shared'"):
        PolitenessSettings.from_settings({"POLITENESS_IP_MODEL": "shared"})
    with pytest.raises(ValueError, match="model"):
        IPTable(0.25, "shared")
