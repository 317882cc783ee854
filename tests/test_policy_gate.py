"""The gate on a fake clock: host and IP spacing, FIFO, caps, dropped, Retry-After."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any

import pytest
from fakeclock import EPS, GateSim, check_host_spacing, check_ip_spacing

from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Release, Signal

IP = "127.0.9.1"


def make_gate(config: Config | None = None, *, margin: float = 0.0, max_in_flight: int = 0,
              overrides: dict[str, Config] | None = None,
              ip_floor: float | None = None) -> Gate[Any]:
    config = config or Config()
    hosts = HostTable(config, overrides=overrides)
    ips = IPTable(config.ip_floor if ip_floor is None else ip_floor)
    return Gate(hosts, ips, margin=margin, max_in_flight=max_in_flight)


# -- basics ------------------------------------------------------------------

def test_empty_gate_has_no_event() -> None:
    gate = make_gate()
    assert gate.next_event() is None
    assert gate.poll(0.0) == []
    assert gate.waiting == 0


def test_first_request_of_fresh_host_is_released_immediately() -> None:
    gate = make_gate(margin=0.01)
    gate.submit("a.com", IP, "t1", 5.0)
    assert gate.waiting == 1
    assert gate.waiting_for("a.com") == 1
    ev = gate.next_event()
    assert ev is not None
    assert ev <= 5.0
    rels = gate.poll(5.0)
    assert rels == [Release("t1", "a.com", IP, 1.0, 5.0)]
    assert gate.waiting == 0
    assert gate.next_event() is None


def test_single_host_spacing_is_exact() -> None:
    gate = make_gate(margin=0.01)
    sim = GateSim(gate)
    for i in range(5):
        sim.submit("a.com", IP, i)
    sim.run()
    assert sim.tokens() == [0, 1, 2, 3, 4]
    assert sim.times("a.com") == pytest.approx([0.0, 1.01, 2.02, 3.03, 4.04])
    assert gate.waiting == 0
    assert gate.next_event() is None


def test_nothing_is_released_before_its_time() -> None:
    gate = make_gate()
    gate.submit("a.com", IP, 1, 0.0)
    gate.submit("a.com", IP, 2, 0.0)
    assert [r.token for r in gate.poll(0.0)] == [1]
    assert gate.next_event() == 1.0
    assert gate.poll(0.999) == []
    assert [r.token for r in gate.poll(1.0)] == [2]


def test_fifo_per_host() -> None:
    gate = make_gate(margin=0.01)
    sim = GateSim(gate)
    for i in range(10):
        sim.submit_at(i * 0.1, "a.com", IP, ("a", i))
        sim.submit_at(i * 0.1, "b.com", "127.0.9.2", ("b", i))
    sim.run()
    for host in ("a", "b"):
        assert [t[1] for t in sim.tokens() if t[0] == host] == list(range(10))
    check_host_spacing(sim, 0.01)


def test_hosts_on_different_ips_proceed_in_parallel() -> None:
    gate = make_gate(margin=0.01)
    sim = GateSim(gate)
    for i in range(3):
        sim.submit("a.com", "127.0.9.1", ("a", i))
        sim.submit("b.com", "127.0.9.2", ("b", i))
    sim.run()
    assert sim.times("a.com") == pytest.approx([0.0, 1.01, 2.02])
    assert sim.times("b.com") == pytest.approx([0.0, 1.01, 2.02])


def test_ip_none_means_no_ip_bucket() -> None:
    gate = make_gate(margin=0.0)
    sim = GateSim(gate)
    for i in range(3):
        sim.submit("a.com", None, ("a", i))
        sim.submit("b.com", None, ("b", i))
    sim.run()
    assert sim.times("a.com") == [0.0, 1.0, 2.0]
    assert sim.times("b.com") == [0.0, 1.0, 2.0]
    assert len(gate.ips) == 0


# -- shared IP ---------------------------------------------------------------

def test_two_hosts_on_one_ip_alternate_at_ip_spacing() -> None:
    gate = make_gate(margin=0.01)
    sim = GateSim(gate)
    for i in range(3):
        sim.submit("a.com", IP, ("a", i))
        sim.submit("b.com", IP, ("b", i))
    sim.run()
    # The IP spacing is max(ip_floor, interval of the host) = 1.0 (+ margin).
    assert [r.at for r in sim.releases] == pytest.approx([0.0, 1.01, 2.02, 3.03, 4.04, 5.05])
    assert [r.key for r in sim.releases] == ["a.com", "b.com"] * 3
    check_ip_spacing(sim, 0.25, 0.01)
    check_host_spacing(sim, 0.01)


def test_ip_spacing_follows_the_interval_of_the_earlier_release() -> None:
    fast = Config(default=0.5)
    slow = Config(default=3.0)
    gate = make_gate(overrides={"fast.com": fast, "slow.com": slow})
    sim = GateSim(gate)
    for i in range(2):
        sim.submit("fast.com", IP, ("f", i))
        sim.submit("slow.com", IP, ("s", i))
    sim.run()
    got = [(r.key, r.at) for r in sim.releases]
    # fast@0 blocks the IP for 0.5; slow@0.5 blocks it for 3.0.
    assert got == [("fast.com", 0.0), ("slow.com", 0.5), ("fast.com", 3.5), ("slow.com", 4.0)]
    check_ip_spacing(sim, 0.25, 0.0)


def test_ip_floor_spaces_fast_hosts_on_one_ip() -> None:
    cfg = Config(default=0.25, floor=0.25, ip_floor=2.0)
    gate = make_gate(cfg)
    sim = GateSim(gate)
    for k in ("a.com", "b.com", "c.com"):
        sim.submit(k, IP, k)
    sim.run()
    assert [r.at for r in sim.releases] == [0.0, 2.0, 4.0]
    assert [r.key for r in sim.releases] == ["a.com", "b.com", "c.com"]


def test_ip_with_idle_host_is_round_robin() -> None:
    # Ten vhosts with a backlog on one IP: each gets a turn before any gets a second.
    gate = make_gate(Config(default=0.25), ip_floor=1.0)
    sim = GateSim(gate)
    keys = [f"h{i}.com" for i in range(10)]
    for _ in range(3):
        for k in keys:
            sim.submit(k, IP, k)
    sim.run()
    assert [r.key for r in sim.releases] == keys * 3
    assert [r.at for r in sim.releases] == [float(i) for i in range(30)]


# -- max_in_flight -----------------------------------------------------------

def test_max_in_flight_holds_until_done_after_eligibility() -> None:
    gate = make_gate(margin=0.01, max_in_flight=1)
    gate.submit("a.com", IP, 1, 0.0)
    gate.submit("a.com", IP, 2, 0.0)
    assert [r.token for r in gate.poll(0.0)] == [1]
    assert gate.in_flight("a.com") == 1
    assert gate.next_event() is None  # nothing can happen before done()
    assert gate.poll(10.0) == []
    gate.done("a.com")  # at t=10, long past eligibility (1.01)
    ev = gate.next_event()
    assert ev is not None
    assert ev <= 10.0
    rels = gate.poll(10.0)
    assert [(r.token, r.at) for r in rels] == [(2, 10.0)]


def test_max_in_flight_done_before_eligibility_waits_for_the_bucket() -> None:
    gate = make_gate(margin=0.01, max_in_flight=1)
    sim = GateSim(gate)
    sim.submit("a.com", IP, 1)
    sim.submit("a.com", IP, 2)
    sim.submit("a.com", IP, 3)
    sim.on_release = lambda rel: sim.at(rel.at + 0.3, lambda: gate.done(rel.key))
    sim.run()
    assert sim.times("a.com") == pytest.approx([0.0, 1.01, 2.02])
    assert gate.in_flight("a.com") == 0


def test_max_in_flight_slow_responses_delay_releases() -> None:
    gate = make_gate(margin=0.0, max_in_flight=1)
    sim = GateSim(gate)
    for i in range(3):
        sim.submit("a.com", IP, i)
    sim.on_release = lambda rel: sim.at(rel.at + 2.5, lambda: gate.done(rel.key))
    sim.run()
    assert sim.times("a.com") == [0.0, 2.5, 5.0]


def test_max_in_flight_two() -> None:
    gate = make_gate(Config(default=0.25), max_in_flight=2)
    sim = GateSim(gate)
    for i in range(4):
        sim.submit("a.com", None, i)
    sim.on_release = lambda rel: sim.at(rel.at + 10.0, lambda: gate.done(rel.key))
    sim.run()
    assert sim.times("a.com") == [0.0, 0.25, 10.0, 10.25]


def test_max_in_flight_with_shared_ip() -> None:
    gate = make_gate(margin=0.0, max_in_flight=1)
    sim = GateSim(gate)
    for i in range(3):
        sim.submit("a.com", IP, ("a", i))
        sim.submit("b.com", IP, ("b", i))
    sim.on_release = lambda rel: sim.at(rel.at + 1.5, lambda: gate.done(rel.key))
    sim.run()
    assert Counter(r.key for r in sim.releases) == {"a.com": 3, "b.com": 3}
    check_ip_spacing(sim, 0.25, 0.0)
    for times in (sim.times("a.com"), sim.times("b.com")):
        assert all(b - a >= 1.5 - EPS for a, b in itertools.pairwise(times))


# -- drop / drain ------------------------------------------------------------

def test_drop_host_returns_waiting_tokens_in_order_and_never_releases_them() -> None:
    gate = make_gate(margin=0.01)
    sim = GateSim(gate)
    for i in range(4):
        sim.submit("a.com", IP, ("a", i))
    sim.submit("b.com", IP, ("b", 0))
    sim.poll()
    assert sim.tokens() == [("a", 0)]
    assert gate.waiting == 4
    assert gate.drop_host("a.com") == [("a", 1), ("a", 2), ("a", 3)]
    assert gate.waiting == 1
    assert gate.waiting_for("a.com") == 0
    assert gate.drop_host("a.com") == []
    sim.run()
    assert sim.tokens() == [("a", 0), ("b", 0)]
    assert gate.waiting == 0
    assert gate.next_event() is None


def test_drop_host_in_line_behind_a_busy_ip() -> None:
    gate = make_gate()
    sim = GateSim(gate)
    sim.submit("a.com", IP, ("a", 0))
    sim.submit("a.com", IP, ("a", 1))
    sim.submit("b.com", IP, ("b", 0))
    sim.submit("b.com", IP, ("b", 1))
    sim.poll()  # a0 goes, b waits for the IP
    assert gate.drop_host("b.com") == [("b", 0), ("b", 1)]
    sim.run()
    assert sim.tokens() == [("a", 0), ("a", 1)]
    assert sim.times("a.com") == [0.0, 1.0]
    assert gate.waiting == 0
    assert gate.next_event() is None


def test_drop_of_the_only_parked_host_leaves_no_event() -> None:
    gate = make_gate()
    gate.submit("a.com", IP, 1, 0.0)
    gate.submit("b.com", IP, 2, 0.0)
    assert [r.token for r in gate.poll(0.0)] == [1]  # b parked behind the IP
    assert gate.drop_host("b.com") == [2]
    assert gate.waiting == 0
    assert gate.next_event() is None  # no stale IP timer for a dropped host


def test_drop_of_a_parked_host_between_others() -> None:
    gate = make_gate(Config(default=0.25), ip_floor=1.0)
    sim = GateSim(gate)
    for k in ("a.com", "b.com", "c.com", "d.com"):
        sim.submit(k, IP, k)
    sim.poll()  # a goes; b, c, d parked in that order
    assert gate.drop_host("c.com") == ["c.com"]
    sim.run()
    assert [(r.key, r.at) for r in sim.releases] == [
        ("a.com", 0.0), ("b.com", 1.0), ("d.com", 2.0)]
    assert gate.next_event() is None


def test_resubmit_after_drop_of_parked_host_is_released() -> None:
    gate = make_gate()
    sim = GateSim(gate)
    sim.submit("a.com", IP, ("a", 0))
    sim.submit("a.com", IP, ("a", 1))
    sim.submit("b.com", IP, ("b", 0))
    sim.poll()
    gate.drop_host("b.com")
    sim.submit_at(0.5, "b.com", IP, ("b", 9))
    sim.run()
    assert Counter(sim.tokens()) == {("a", 0): 1, ("a", 1): 1, ("b", 9): 1}
    check_ip_spacing(sim, 0.25, 0.0)
    assert gate.waiting == 0


def test_drain_returns_everything() -> None:
    gate = make_gate()
    for i in range(3):
        gate.submit("a.com", IP, ("a", i), 0.0)
        gate.submit("b.com", IP, ("b", i), 0.0)
        gate.submit("c.com", None, ("c", i), 0.0)
    released = [r.token for r in gate.poll(0.0)]
    assert sorted(released) == [("a", 0), ("c", 0)]
    tokens = gate.drain()
    assert sorted(tokens) == sorted(
        [("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2), ("c", 1), ("c", 2)])
    assert [t for t in tokens if t[0] == "b"] == [("b", 0), ("b", 1), ("b", 2)]  # FIFO kept
    assert gate.waiting == 0
    assert gate.next_event() is None
    assert gate.poll(1000.0) == []
    assert gate.drain() == []


# -- Retry-After, crawl-delay, touch ----------------------------------------

def test_retry_after_delays_next_release() -> None:
    gate = make_gate(margin=0.01)
    sim = GateSim(gate)
    for i in range(3):
        sim.submit("a.com", IP, i)

    def feedback() -> None:
        gate.hosts.feedback("a.com", Signal(429, retry_after=10.0), sim.now)
        gate.touch("a.com")

    sim.at(0.2, feedback)
    sim.run()
    times = sim.times("a.com")
    assert times[0] == 0.0
    assert times[1] == pytest.approx(10.2 + 0.01)  # not_before = 0.2 + 10
    assert times[1] >= 0.2 + 10.0
    # The interval itself was floored at 10 by the Retry-After.
    assert times[2] == pytest.approx(times[1] + 10.0 + 0.01)


def test_retry_after_applies_to_a_host_parked_on_its_ip() -> None:
    gate = make_gate()
    sim = GateSim(gate)
    sim.submit("a.com", IP, ("a", 0))
    sim.submit("b.com", IP, ("b", 0))
    sim.submit("b.com", IP, ("b", 1))
    sim.poll()  # a0 at 0; b parked behind the IP until 1.0

    def feedback() -> None:
        gate.hosts.feedback("b.com", Signal(503, retry_after=30.0), sim.now)
        gate.touch("b.com")

    sim.at(0.5, feedback)
    sim.run()
    assert sim.times("b.com")[0] >= 30.5 - EPS
    assert sim.times("b.com")[0] == pytest.approx(30.5)


def test_crawl_delay_then_touch_spaces_next_release() -> None:
    gate = make_gate(margin=0.01)
    sim = GateSim(gate)
    for i in range(3):
        sim.submit("a.com", IP, i)

    def learn() -> None:
        gate.hosts.get("a.com").crawl_delay = 2.0
        gate.touch("a.com")

    sim.at(0.1, learn)
    sim.run()
    assert sim.times("a.com") == pytest.approx([0.0, 2.01, 4.02])
    assert [r.interval for r in sim.releases] == [1.0, 2.0, 2.0]
    check_ip_spacing(sim, 0.25, 0.01)


def test_touch_moves_the_event_earlier_when_the_interval_shrinks() -> None:
    gate = make_gate()
    gate.hosts.get("a.com").crawl_delay = 5.0
    sim = GateSim(gate)
    sim.submit("a.com", None, 0)
    sim.submit("a.com", None, 1)
    sim.poll()
    assert gate.next_event() == 5.0

    def forget() -> None:
        gate.hosts.get("a.com").crawl_delay = 0.0
        gate.touch("a.com")

    sim.at(0.5, forget)
    sim.run()
    assert sim.times("a.com") == [0.0, 1.0]


def test_touch_of_unknown_or_idle_host_is_harmless() -> None:
    gate = make_gate()
    gate.touch("nobody.com")
    gate.done("nobody.com")
    assert gate.next_event() is None
    gate.submit("a.com", IP, 0, 0.0)
    gate.poll(0.0)
    gate.touch("a.com")
    assert gate.next_event() is None


# -- randomized: many vhosts on one IP --------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_many_vhosts_on_one_ip_random(seed: int) -> None:
    rng = random.Random(seed)
    margin = 0.01
    ip_floor = rng.choice([0.25, 0.5, 1.0])
    keys = [f"v{i}.example" for i in range(20)]
    overrides = {k: Config(default=rng.choice([0.25, 0.5, 1.0, 2.0, 3.0])) for k in keys[:10]}
    gate = make_gate(margin=margin, overrides=overrides, ip_floor=ip_floor)
    sim = GateSim(gate)
    submitted: list[tuple[str, int]] = []
    submit_time: dict[tuple[str, int], float] = {}
    for n in range(300):
        key = rng.choice(keys)
        t = round(rng.uniform(0, 60), 3)
        token = (key, n)
        submitted.append(token)
        submit_time[token] = t
        sim.submit_at(t, key, IP, token)
    sim.run()
    # Every token released exactly once: none lost, none duplicated.
    assert Counter(sim.tokens()) == Counter(submitted)
    assert gate.waiting == 0
    assert gate.next_event() is None
    for rel in sim.releases:
        assert rel.at >= submit_time[rel.token]
    # FIFO per host in submit order.
    for key, rels in sim.by_host().items():
        order = sorted((submit_time[r.token], r.token[1]) for r in rels)
        assert [r.token[1] for r in rels] == [n for _, n in order], key
    check_host_spacing(sim, margin)
    check_ip_spacing(sim, ip_floor, margin)


@pytest.mark.parametrize("seed", range(4))
def test_random_with_feedback_caps_and_two_ips(seed: int) -> None:
    rng = random.Random(1000 + seed)
    margin = 0.01
    keys = [f"h{i}.example" for i in range(12)]
    ip_of = {k: ("127.0.9.1" if i % 3 else ("127.0.9.2" if i % 2 else None))
             for i, k in enumerate(keys)}
    gate = make_gate(Config(ceiling=20.0), margin=margin, max_in_flight=1)
    sim = GateSim(gate)
    submitted = []
    finished: dict[str, float] = {}

    def on_release(rel: Release[Any]) -> None:
        # In flight at most one per host: this start is after the previous done.
        assert rel.at >= finished.get(rel.key, 0.0) - EPS
        finished[rel.key] = float("inf")
        latency = rng.uniform(0.05, 3.0)

        def done() -> None:
            finished[rel.key] = sim.now
            # Only widening feedback, so the interval never shrinks between releases.
            if rng.random() < 0.2:
                ra = rng.choice([0.0, 0.0, 5.0])
                gate.hosts.feedback(rel.key, Signal(503, retry_after=ra), sim.now)
            gate.done(rel.key)
            gate.touch(rel.key)

        sim.at(rel.at + latency, done)

    sim.on_release = on_release
    for n in range(200):
        key = rng.choice(keys)
        token = (key, n)
        submitted.append(token)
        sim.submit_at(round(rng.uniform(0, 30), 3), key, ip_of[key], token)
    sim.run()
    assert Counter(sim.tokens()) == Counter(submitted)
    assert gate.waiting == 0
    check_host_spacing(sim, margin)
    check_ip_spacing(sim, 0.25, margin)
    assert not any(r.ip == "127.0.9.2" and ip_of[r.key] != "127.0.9.2" for r in sim.releases)


# -- efficiency --------------------------------------------------------------

def test_poll_count_stays_small() -> None:
    n_hosts, per_host = 50, 20
    total = n_hosts * per_host
    gate = make_gate(margin=0.01)
    sim = GateSim(gate)
    for j in range(per_host):
        for i in range(n_hosts):
            sim.submit(f"h{i}.example", IP, (i, j))
    sim.run()
    assert len(sim.releases) == total
    check_ip_spacing(sim, 0.25, 0.01)
    # One event-driven poll per release, give or take: no busy polling.
    assert sim.polls <= total + n_hosts
    assert sim.empty_polls <= n_hosts
    assert len(gate._heap) <= 2 * n_hosts + 2


def test_crawl_delay_stays_with_its_site_and_does_not_space_the_ip() -> None:
    """A Crawl-delay is one site's wish; backoff is the machine's distress.

    The IP is spaced by the host's clamped adaptive interval without the
    crawl-delay, so a vhost asking for 2 s does not slow its neighbours.
    """
    gate = make_gate(Config(default=0.25, floor=0.25, ip_floor=0.25))
    gate.hosts.get("slow.com").crawl_delay = 2.0
    sim = GateSim(gate)
    for i in range(3):
        sim.submit("slow.com", IP, ("s", i))
        sim.submit("fast.com", IP, ("f", i))
    sim.run()
    assert sim.times("slow.com") == pytest.approx([0.0, 2.0, 4.0])
    assert sim.times("fast.com") == pytest.approx([0.25, 0.5, 0.75])


def test_backoff_of_one_vhost_spaces_its_ip() -> None:
    gate = make_gate(Config(default=0.25, floor=0.25, ip_floor=0.25))
    gate.hosts.feedback("sick.com", Signal(503), 0.0)  # 0.25 -> 0.5
    sim = GateSim(gate)
    sim.submit("sick.com", IP, "s")
    sim.submit("fine.com", IP, "f")
    sim.run()
    assert sim.times("fine.com")[0] == pytest.approx(0.5)
