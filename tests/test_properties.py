"""Invariants under any order of events (hypothesis, simulated clock).

The gate and tables are driven by arbitrary interleavings of arrivals,
responses, errors, Retry-After, crawl-delays, drops and clock jumps across
hosts that share IPs. Whatever happens, a politeness layer must hold:

- the clamped interval stays within [max(floor, crawl_delay), ceiling];
- no two starts of one host are closer than its interval, none before a
  Retry-After window ends;
- no two starts on one IP break the IP rule;
- IP next-eligible instants never move backwards;
- every request handed to the gate is released or dropped, exactly once.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Signal

EPS = 1e-9
HOSTS = [f"h{i}.example" for i in range(6)]
IP_OF = {h: (None if i == 5 else f"127.0.1.{i % 3}") for i, h in enumerate(HOSTS)}

configs = st.builds(
    lambda floor, extra, ceil_extra, backoff, widen, narrow: Config(
        default=floor + extra, floor=floor, ceiling=floor + extra + ceil_extra,
        ip_floor=floor / 2, backoff=backoff, soft_widen=widen, narrow=narrow,
        latency_rise=1.5, latency_min_rise=0.01),
    st.floats(0.0, 2.0), st.floats(0.0, 2.0), st.floats(0.01, 30.0),
    st.floats(1.0, 4.0), st.floats(1.0, 2.0), st.floats(0.0, 1.0),
)
signals = st.builds(
    Signal,
    status=st.sampled_from([0, 200, 200, 200, 301, 404, 429, 500, 503]),
    retry_after=st.one_of(st.just(0.0), st.floats(0.0, 50.0)),
    latency=st.floats(0.0, 5.0),
    prev_latency=st.floats(0.0, 5.0),
)
events = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.sampled_from(HOSTS), st.integers(1, 3)),
        st.tuples(st.just("feedback"), st.sampled_from(HOSTS), signals),
        st.tuples(st.just("crawl_delay"), st.sampled_from(HOSTS), st.floats(0.0, 5.0)),
        st.tuples(st.just("drop"), st.sampled_from(HOSTS), st.just(0)),
        st.tuples(st.just("done"), st.sampled_from(HOSTS), st.just(0)),
        st.tuples(st.just("advance"), st.just(""), st.floats(0.0, 3.0)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(config=configs, crawl_delay=st.floats(0.0, 100.0), seq=st.lists(signals, max_size=60))
def test_clamped_interval_stays_in_band(config: Config, crawl_delay: float,
                                        seq: list[Signal]) -> None:
    table = HostTable(config, dead_after=3)
    table.get("h").crawl_delay = crawl_delay
    low = max(config.floor, crawl_delay)
    for i, sig in enumerate(seq):
        table.feedback("h", sig, float(i))
        interval = table.get("h").interval()
        assert low - EPS <= interval
        assert interval <= max(config.ceiling, low) + EPS
        assert config.floor - EPS <= table.get("h").adaptive <= config.ceiling + EPS


@settings(max_examples=300, deadline=None)
@given(config=configs, margin=st.sampled_from([0.0, 0.01]), cap=st.sampled_from([0, 1, 2]),
       script=events)
def test_gate_invariants_under_any_interleaving(config: Config, margin: float, cap: int,
                                                script: list[tuple[str, str, Any]]) -> None:
    hosts = HostTable(config, dead_after=3)
    ips = IPTable(config.ip_floor)
    gate: Gate[int] = Gate(hosts, ips, margin=margin, max_in_flight=cap)
    now = 0.0
    submitted: list[int] = []
    released: list[int] = []
    dropped: list[int] = []
    in_flight: dict[str, int] = {}
    last_start: dict[str, float] = {}
    ip_next: dict[str, float] = {}
    token = 0

    def check_and_record(rels: list[Any]) -> None:
        for rel in rels:
            assert rel.at == now
            state = hosts.get(rel.key)
            # Host: spaced by its interval (evaluated now), after any Retry-After window.
            if rel.key in last_start:
                assert now - last_start[rel.key] >= state.interval() + margin - EPS
            assert now >= state.not_before - EPS
            # IP: never before the instant the previous starts pushed it to.
            ip = rel.ip
            if ip is not None:
                assert now >= ip_next.get(ip, -math.inf) - EPS
                before = ips.eligible_at(ip)
                spacing = max(config.ip_floor, state.ip_interval())
                ip_next[ip] = max(ip_next.get(ip, -math.inf), now + spacing + margin)
                assert ips.eligible_at(ip) >= before - EPS  # never backwards
            last_start[rel.key] = now
            in_flight[rel.key] = in_flight.get(rel.key, 0) + 1
            released.append(rel.token)

    for kind, host, arg in script:
        if kind == "submit":
            for _ in range(arg):
                token += 1
                submitted.append(token)
                gate.submit(host, IP_OF[host], token, now)
        elif kind == "feedback":
            hosts.feedback(host, arg, now)
            gate.touch(host)
        elif kind == "crawl_delay":
            hosts.get(host).crawl_delay = arg
            gate.touch(host)
        elif kind == "drop":
            dropped.extend(gate.drop_host(host))
        elif kind == "done" and in_flight.get(host):
            in_flight[host] -= 1
            gate.done(host)
        elif kind == "advance":
            now += arg
        check_and_record(gate.poll(now))
    # Let every response come back and run the clock until the gate is empty.
    for _ in range(10_000):
        for host, n in list(in_flight.items()):
            for _ in range(n):
                gate.done(host)
            in_flight[host] = 0
        at = gate.next_event()
        if at is None:
            break
        now = max(now, at)
        check_and_record(gate.poll(now))
    dropped.extend(gate.drain())
    assert gate.waiting == 0
    assert sorted(released + dropped) == submitted  # none lost, none twice
