"""One rule for "may it go now": the gate releases where the queue's estimate says."""

from __future__ import annotations

import random

import pytest
from test_pqueue import mw, on_ip

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Config, Eligibility, HostTable, IPTable

__all__ = ["mw"]  # the fixture, imported for its name

IP = "127.0.9.1"


def test_a_fresh_host_and_ip_may_go_at_once() -> None:
    rule = Eligibility(HostTable(Config(default=1.0)), IPTable(0.5), margin=0.01)
    assert rule.host_ready("a.test") == 0.0
    assert rule.ip_ready(IP) == 0.0
    assert rule.ip_ready(None) == 0.0


def test_a_host_waits_its_interval_or_its_pause_plus_the_margin() -> None:
    hosts = HostTable(Config(default=1.0, floor=0.5))
    rule = Eligibility(hosts, IPTable(0.5), margin=0.01)
    hosts.start("a.test", 10.0)
    assert rule.host_ready("a.test") == pytest.approx(11.01)
    hosts.get("a.test").not_before = 20.0  # a Retry-After pause ends later
    assert rule.host_ready("a.test") == pytest.approx(20.01)
    assert rule.state_ready(hosts.peek("a.test")) == rule.host_ready("a.test")


def test_an_ip_waits_its_spacing_plus_the_margin() -> None:
    ips = IPTable(0.5)
    rule = Eligibility(HostTable(Config()), ips, margin=0.01)
    ips.spend(IP, 3.0, 0.5)
    assert rule.ip_ready(IP) == pytest.approx(3.51)


def test_the_gate_releases_exactly_when_the_queue_estimates(mw: PolitenessMiddleware) -> None:
    """Random host and IP states: the readiness the scheduler queue reads for a
    host says when the gate lets its request go, to the instant."""
    rng = random.Random(7)
    gate, buckets = mw.gate, mw.buckets
    gate.eligibility.margin = 0.01  # a send margin pads both buckets
    for trial in range(200):
        host = f"h{trial}.test"
        ip = f"127.0.8.{rng.randrange(4)}"
        on_ip(mw, host, ip)
        now = 100.0 * (trial + 1)
        state = mw.hosts.get(host)
        state.last_start = now - rng.uniform(0.0, 2.0)
        if rng.random() < 0.3:
            state.not_before = now + rng.uniform(-1.0, 3.0)
        if rng.random() < 0.5:
            mw.ips.spend(ip, now - rng.uniform(0.0, 2.0), rng.uniform(0.1, 2.0))
        readiness = buckets.readiness_for(host, host)
        expected = max(readiness.host_ready, readiness.ip_ready, now)
        gate.submit(host, readiness.ip, trial, now)
        if expected > now:
            assert gate.poll(expected - 1e-6) == [], (trial, expected)
        released = gate.poll(expected)
        assert [r.token for r in released] == [trial], (trial, expected)
