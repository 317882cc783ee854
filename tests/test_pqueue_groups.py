"""The queue's IP groups (``hostheap.IPGroup``): many vhosts behind one IP, cheaply and fairly."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from fakeclock import Clock
from scrapy import Request
from test_pqueue import INTERVAL, _queue, clock, mw, on_ip, reached, take, url

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy.eligibility import Eligibility
from scrapy_politeness.scheduler.queue import PolitenessAwarePriorityQueue

__all__ = ["clock", "mw"]  # the fixtures this module uses


def serve(mw: PolitenessMiddleware, q: PolitenessAwarePriorityQueue, clock: Clock
          ) -> tuple[str, str]:
    """Take the next request and start it as the gate would; its (host, IP)."""
    r = take(q)
    assert r is not None
    host = r.url.split("/")[2]
    ip = mw.dns._cache[host][0]
    assert ip is not None
    reached(mw, r)
    mw.ips.spend(ip, clock.now, mw.hosts.get(host).ip_interval())
    mw.hosts.start(host, clock.now)
    return host, ip


def counting(mw: PolitenessMiddleware, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the gate's look-ups and IP table reads the queue makes."""
    calls = {"readiness_for": 0, "ip_ready": 0}
    owners = {"readiness_for": mw.buckets, "ip_ready": Eligibility}  # slotted: patch its class
    for name, owner in owners.items():
        real = getattr(owner, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls[_name] += 1
            return _real(*args)

        monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize("n_ips", [5, 1])
def test_a_start_on_a_busy_ip_moves_one_entry_not_every_vhost(
        mw: PolitenessMiddleware, clock: Clock, monkeypatch: pytest.MonkeyPatch,
        n_ips: int) -> None:
    """500 hosts on 5 IPs (or all on one: shared hosting), 2 requests each, the
    IPs the bottleneck. Each start used to leave the IP's other hosts' heap
    entries behind, to be moved one IP read at a time (up to ``MAX_BUMPS`` a
    pop); the group moves as one."""
    q = _queue(mw.crawler)
    hosts = [(f"h{i}.test", f"127.0.7.{i % n_ips}") for i in range(500)]
    for n in range(2):
        for host, ip in hosts:
            on_ip(mw, host, ip)
            q.push(Request(url(host, n)))
    calls = counting(mw, monkeypatch)
    starts: dict[str, list[float]] = {}
    served: dict[str, int] = {}
    for _ in range(2 * len(hosts)):
        host, ip = serve(mw, q, clock)
        starts.setdefault(ip, []).append(clock.now)
        served[host] = served.get(host, 0) + 1
    assert q.pop() is None
    assert served == {host: 2 for host, _ in hosts}
    assert all(b - a >= INTERVAL - 1e-9 for s in starts.values() for a, b in itertools.pairwise(s))
    per_take = {name: n / (2 * len(hosts)) for name, n in calls.items()}
    print(f"per take: {per_take}")
    # Before the groups, 11 look-ups and 54 IP reads a take on 5 IPs, 76 and 382 on
    # one (a look-up reads its IP too).
    assert per_take["readiness_for"] <= 4, per_take
    assert per_take["ip_ready"] <= 10, per_take


def test_hosts_of_one_ip_take_turns_in_the_order_they_became_ready(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    q = _queue(mw.crawler)
    names = ["e.test", "b.test", "d.test", "a.test", "c.test"]
    for host in names:
        on_ip(mw, host, "127.0.7.9")
        for n in range(4):
            q.push(Request(url(host, n)))
        clock.now += 0.001
    order = [serve(mw, q, clock)[0] for _ in range(10)]
    assert order == names * 2  # each has two left: none is finishing yet


def test_a_host_down_to_its_last_page_finishes_first(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    """Two pages a host, every host ready whenever the IP is: a host's second
    page follows its first (on the connection still open) instead of waiting
    for every other host of the IP to be opened."""
    q = _queue(mw.crawler)
    names = [f"h{i}.test" for i in range(6)]
    for n in range(2):
        for host in names:
            on_ip(mw, host, "127.0.7.8")
            q.push(Request(url(host, n)))
    order = [serve(mw, q, clock)[0] for _ in range(12)]
    assert order == [host for host in names for _ in range(2)]


def test_a_host_whose_name_moves_to_another_ip_follows_it(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    q = _queue(mw.crawler)
    for host in ("a.test", "b.test"):
        on_ip(mw, host, "127.0.7.1")
        q.push(Request(url(host)))
    mw.ips.set_eligible("127.0.7.1", clock.now + 100.0)  # busy for 100 s
    assert q.pop() is None
    on_ip(mw, "a.test", "127.0.7.2")  # its answer expired; the new one is elsewhere
    r = q.pop()
    assert r is not None
    assert r.url == url("a.test")
    assert q.pop() is None  # b.test still waits for its IP
    assert q.next_eligible() >= clock.now + 100.0 - 1e-9


def test_a_crawl_delay_host_does_not_hold_back_its_neighbours(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    """A host whose robots.txt asks 10 s shares its IP with two at 1 s. A
    Crawl-delay stays with its site (a backoff would slow the whole IP): the
    IP's turns it cannot take go to its neighbours, and its own starts wait."""
    q = _queue(mw.crawler)
    for host in ("slow.test", "b.test", "c.test"):
        on_ip(mw, host, "127.0.7.3")
        for n in range(20):
            q.push(Request(url(host, n)))
    mw.hosts.set_crawl_delay("slow.test", 10.0)
    start = clock.now
    starts: dict[str, list[float]] = {}
    while clock.now < start + 29.5:
        host, _ = serve(mw, q, clock)
        starts.setdefault(host, []).append(clock.now)
    gaps = [b - a for a, b in itertools.pairwise(starts["slow.test"])]
    assert gaps
    assert min(gaps) >= 10.0 - 1e-9
    assert len(starts["slow.test"]) == 3
    every = sorted(t for s in starts.values() for t in s)  # the IP never idles
    assert every == [start + i for i in range(len(every))]


def test_an_ip_moved_earlier_is_seen_once_its_host_is_retimed(
        mw: PolitenessMiddleware, clock: Clock) -> None:
    """An answer can move an IP's next start EARLIER (the send slip, step 5 of
    docs/usage/how-it-works.md). The group's entry was a lower bound of the old
    instant; the re-time the slip sends lets the queue hand the host out now
    instead of at the old instant."""
    q = _queue(mw.crawler)
    for host, ip in (("a.test", "127.0.7.4"), ("b.test", "127.0.7.5")):
        on_ip(mw, host, ip)
        q.push(Request(url(host)))
    mw.ips.spend("127.0.7.4", clock.now, 50.0)
    mw.ips.spend("127.0.7.5", clock.now, 40.0)
    assert q.pop() is None  # the groups now sit at their IPs' instants, 50 and 40 s on
    mw.ips.lower("127.0.7.4", clock.now - 50.0, 50.0)  # the answer: a.test's IP is free
    assert q.pop() is None  # unheard of: b.test's group (40 s) is the top, a.test's stale
    mw.driver.retime("a.test")
    r = q.pop()
    assert r is not None
    assert r.url == url("a.test")
