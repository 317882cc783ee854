"""The frontier's Lua scripts on a real redis-server: only the data is made up.

Each test writes the state it needs (bucket instants, leases) and reads what the
scripts did; instants come from the server's own clock, so nothing sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis_server import RedisServer, redis_server_fixture

from scrapy_politeness.distributed.frontier import FRONTIER_SCRIPTS, frontier_script
from scrapy_politeness.distributed.redis_backend import _script

P, NS = "spider:requests", "politeness:test"
INTERVAL, MARGIN, IP_FLOOR, LEAD, CLAIM = 0.3, 0.01, 0.3, 0.05, 0.2


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from redis_server_fixture()


class Frontier:
    """The scripts as a queue would call them, on one client."""

    def __init__(self, server: RedisServer) -> None:
        self.r = redis.Redis(host="127.0.0.1", port=server.port)
        self.s = {n: self.r.register_script(frontier_script(n)) for n in FRONTIER_SCRIPTS}
        self.reserve = self.r.register_script(_script("reserve.lua"))

    def now(self) -> float:
        sec, usec = self.r.time()
        return sec + usec / 1e6

    def push(self, key: str, data: str, priority: int = 0, *, ip: str = "127.2.0.1",
             hold: float = 2.0, cfg: str = "") -> None:
        self.s["push"](args=[P, data, priority, key, ip, 600, hold, cfg])

    def pop(self, pid: str = "p1", lease: float = 10.0, picks: int = 1,
            acks: tuple[str, ...] = (), *, slip: float = 0.0,
            claim: float = CLAIM, ips: dict[str, str] | None = None,
            model: tuple[str, ...] = (), interval: float = INTERVAL,
            ip_floor: float = IP_FLOOR,
            pushes: tuple[tuple[str, str, str], ...] = ()) -> list[Any]:
        """``pushes``: (host key, data, ip) queued by this very call, before it picks."""
        shared = [x for pair in (ips or {}).items() for x in pair]
        queued = [x for key, data, ip in pushes for x in (data, 0, key, ip, 2.0, "")]
        reply: list[Any] = self.s["pop"](args=[
            P, NS, pid, lease, picks, interval, interval, 60.0, ip_floor, MARGIN, 60.0, 16,
            LEAD, slip, claim, 600, len(acks), *acks, len(shared) // 2, *shared,
            len(pushes), *queued, *model])
        return [x.decode() if isinstance(x, bytes) else x for x in reply]

    def drain(self, pid: str = "p1") -> list[str]:
        """Pop, moving every bucket back into the past between pops (data, not time)."""
        out = []
        while True:
            reply = self.pop(pid)
            if reply[0] == "empty":
                return out
            if reply[0] == "req":
                out.append(reply[1])
            self.rewind()

    def rewind(self) -> None:
        """Move every bucket and host entry into the past (data, not time)."""
        for k in self.r.scan_iter(f"{NS}:*"):
            if k.endswith(b":ns"):
                continue
            if self.r.type(k) == b"hash":
                self.r.hset(k, "last_start", 0)
            else:
                self.r.set(k, 0)
        for host in self.r.zrange(f"{P}:hosts", 0, -1):
            self.r.zadd(f"{P}:hosts", {host: 0})

    def length(self) -> tuple[int, int]:
        """(queued, leased): P:len counts both; the leases are the lease hashes' fields."""
        total = int(self.r.get(f"{P}:len") or 0)
        leased = sum(self.r.hlen(k) for k in self.r.scan_iter(f"{P}:lease:*"))
        assert self.r.get(f"{P}:leased") is None  # no count of its own any more
        return total - leased, leased


def test_priorities_then_first_in_first_out_within_a_host(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    for data, prio in (("low1", -1), ("mid1", 0), ("high", 5), ("mid2", 0), ("low2", -1)):
        f.push("a.test", data, prio)
    assert f.drain() == ["high", "mid1", "mid2", "low1", "low2"]


def test_pop_books_host_and_ip_on_the_keys_reserve_reads(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    before = f.now()
    reply = f.pop()
    assert reply[:2] == ["req", "r1"]
    assert reply[3:5] == ["127.2.0.1", 1]
    start = float(f.r.hget(f"{NS}:host:a.test", "last_start"))
    assert before <= start <= f.now()
    assert float(f.r.get(f"{NS}:ip:127.2.0.1")) == pytest.approx(start + IP_FLOOR, abs=1e-9)
    # reserve.lua (the middleware's booking) sees the pop's start: next slot one
    # interval plus the margin after it, never earlier.
    delay = float(f.reserve(keys=[f"{NS}:host:a.test", f"{NS}:ns", f"{NS}:ip:127.2.0.1"],
                            args=[INTERVAL, INTERVAL, 60.0, IP_FLOOR, MARGIN, 60.0, "", "e",
                                  1.0])[0])
    assert delay > INTERVAL + MARGIN - (f.now() - start) - 1e-6


def test_a_host_due_within_the_lead_is_booked_at_its_instant(
        redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("b.test", "r2", ip="127.2.0.2")
    due = f.now() + 0.03  # within the lead: handed out now, booked for then
    f.r.hset(f"{NS}:host:a.test", "last_start", repr(due - INTERVAL - MARGIN))
    f.r.hset(f"{NS}:host:b.test", "last_start", repr(due + 0.1 - INTERVAL - MARGIN))
    reply = f.pop()
    assert reply[1] == "r1"
    assert float(f.r.hget(f"{NS}:host:a.test", "last_start")) == pytest.approx(due, abs=1e-6)
    assert 0.0 < float(reply[5]) <= 0.03
    kind, wait = f.pop()  # b is due in 0.13 s: asked again 0.08 s from now
    assert kind == "wait"
    assert 0.05 < float(wait) <= 0.13 - LEAD


def test_both_buckets_are_spent_at_the_start_plus_the_slip(redis_server: RedisServer) -> None:
    """As reserve.lua: the process's expected send slip is spent, so the next
    pop of any process is spaced from when the bytes leave, not from the plan."""
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("a.test", "r2")
    before = f.now()
    reply = f.pop(slip=0.04)
    start = float(f.r.hget(f"{NS}:host:a.test", "last_start"))
    assert float(reply[5]) <= 0.0 + 1e-6  # handed out for now ...
    assert before + 0.04 <= start <= f.now() + 0.04  # ... spent 40 ms later
    assert float(f.r.get(f"{NS}:ip:127.2.0.1")) == pytest.approx(start + IP_FLOOR, abs=1e-9)
    assert f.r.zscore(f"{P}:hosts", "a.test") == pytest.approx(start + INTERVAL + MARGIN,
                                                               abs=1e-6)


def test_a_host_booked_elsewhere_is_not_handed_out(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    booked = f.now() + 100.0  # another process's reserve booked far ahead
    f.r.hset(f"{NS}:host:a.test", "last_start", repr(booked))
    kind, wait = f.pop()
    assert kind == "wait"
    assert float(wait) == pytest.approx(booked + INTERVAL + MARGIN - LEAD - f.now(), abs=0.05)
    assert f.r.zscore(f"{P}:hosts", "a.test") == pytest.approx(booked + INTERVAL + MARGIN)
    assert f.length() == (1, 0)


def test_a_busy_ip_holds_every_host_on_it(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "a1")
    f.push("b.test", "b1")  # same IP
    f.push("c.test", "c1", ip="127.2.0.9")
    first = f.pop()
    second = f.pop()
    assert {first[1], second[1]} in ({"a1", "c1"}, {"b1", "c1"})
    kind, wait = f.pop()  # the other host on 127.2.0.1 waits for the IP
    assert kind == "wait"
    assert 0.2 < float(wait) <= IP_FLOOR + MARGIN - LEAD


def test_an_unresolved_host_waits_for_its_ip_then_books_it(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1", ip="?", hold=30.0)
    kind, wait = f.pop()
    assert kind == "wait"
    assert 29.0 < float(wait) <= 30.0 - LEAD
    f.s["ip"](args=[P, "a.test", "127.2.0.7", 600])
    reply = f.pop()
    assert reply[1] == "r1"
    assert reply[3:5] == ["127.2.0.7", 1]
    assert f.r.exists(f"{NS}:ip:127.2.0.7")


def test_a_resolved_ip_rides_on_the_pop_and_frees_its_host_in_it(
        redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1", ip="?", hold=30.0)
    f.push("b.test", "r2", ip="?", hold=30.0)
    assert f.pop()[0] == "wait"
    reply = f.pop(acks=("x",), ips={"a.test": "127.2.0.7", "b.test": ""})
    assert reply[1] == "r1"
    assert reply[3:5] == ["127.2.0.7", 1]
    assert f.r.get(f"{P}:ip:b.test") == b""
    assert 0 < f.r.pttl(f"{P}:ip:a.test") <= 600_000
    assert f.pop()[1] == "r2"  # held for its IP no longer


@pytest.mark.parametrize(("model", "spacing"), [((), 1.0), (("coupled",), 1.0),
                                                (("decoupled",), 0.1)])
def test_the_ip_model_decides_what_a_pop_spends_on_the_ip(
        redis_server: RedisServer, model: tuple[str, ...], spacing: float) -> None:
    """Coupled (and without the argument, as before): the host's interval;
    decoupled: the IP floor, the IP's own interval (IPTable.spacing)."""
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    assert f.pop(model=model, interval=1.0, ip_floor=0.1)[1] == "r1"
    start = float(f.r.hget(f"{NS}:host:a.test", "last_start"))
    assert float(f.r.get(f"{NS}:ip:127.2.0.1")) == pytest.approx(start + spacing, abs=1e-9)


def test_no_ip_bucket_books_the_host_only(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1", ip="")
    assert f.pop()[3:5] == ["", 0]
    assert f.r.exists(f"{NS}:host:a.test")
    assert not list(f.r.scan_iter(f"{NS}:ip:*"))


def test_a_host_override_paces_at_its_own_interval(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("slow.test", "s1", cfg="5.0 5.0 60.0")
    f.push("slow.test", "s2")
    f.pop()
    kind, wait = f.pop()
    assert kind == "wait"
    assert 4.9 < float(wait) <= 5.0 + MARGIN - LEAD


def test_a_dead_process_gives_its_requests_back(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("b.test", "r2", ip="127.2.0.2")
    assert f.pop("dying", lease=-1.0)[0] == "req"  # its heartbeat is already over
    assert f.length() == (1, 1)
    got = f.drain("alive")  # the next pop anywhere reclaims it
    assert sorted(got) == ["r1", "r2"]
    assert f.length() == (0, 2)
    assert not f.r.exists(f"{P}:lease:dying")


def test_only_a_beating_pop_looks_for_dead_processes(redis_server: RedisServer) -> None:
    """A pop without a heartbeat (lease 0: the client beats every few seconds,
    not every pop) neither renews its own deadline nor reclaims a dead process;
    the next beating pop does."""
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("b.test", "r2", ip="127.2.0.2")
    assert f.pop("dying", lease=-1.0)[0] == "req"
    deadline = f.r.zscore(f"{P}:procs", "dying")
    f.rewind()
    assert f.pop("alive", lease=0)[:2] == ["req", "r2"]
    assert f.length() == (0, 2)  # r1 still leased to the dead process
    assert f.r.zscore(f"{P}:procs", "alive") is None  # no beat: not registered
    assert f.r.zscore(f"{P}:procs", "dying") == deadline
    f.rewind()
    assert f.pop("alive")[:2] == ["req", "r1"]  # a beat: reclaimed first, then handed out
    assert not f.r.exists(f"{P}:lease:dying")
    assert f.r.zscore(f"{P}:procs", "alive") is not None


def test_finished_requests_are_not_given_back(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    reply = f.pop("p1")
    assert f.pop("p1", lease=-1.0, picks=0, acks=(reply[2],)) == ["beat"]
    assert f.length() == (0, 0)
    assert f.pop("p2")[0] == "empty"


def test_a_closing_process_returns_what_it_holds(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    for data in ("r1", "r2"):
        f.push("a.test", data)
    done = f.pop()[2]
    f.rewind()
    assert f.pop()[0] == "req"
    assert f.s["release"](args=[P, "p1", 1, done]) == 1
    assert f.length() == (1, 0)
    assert f.drain("p2") == ["r2"]


def test_the_grace_window_after_a_state_loss_holds_pops(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.r.hset(f"{NS}:ns", "hold", repr(f.now() + 50))
    kind, wait = f.pop()
    assert kind == "wait"
    assert 49 < float(wait) <= 50
    assert f.r.zrange(f"{P}:q:a.test", 0, -1)  # nothing handed out


def test_a_pop_that_books_nothing_does_not_read_the_grace_window(
        redis_server: RedisServer) -> None:
    """Only a booking needs the grace window: a pop told to wait for a host's
    bucket reads the index, not the namespace hash."""
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("a.test", "r2")
    assert f.pop()[0] == "req"
    f.r.config_resetstat()
    assert f.pop("p2")[0] == "claimed"
    stats = f.r.info("commandstats")
    assert "cmdstat_hget" not in stats, stats
    assert f.r.zrange(f"{P}:q:a.test", 0, -1)


def test_one_round_trip_per_push_and_per_pop(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "warm")
    f.pop()
    f.r.config_resetstat()
    for i in range(10):
        f.push(f"h{i}.test", f"r{i}", ip=f"127.2.1.{i}")
    for _ in range(10):
        assert f.pop()[0] == "req"
    stats = f.r.info("commandstats")
    sent = {k: v["calls"] for k, v in stats.items()
            if k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_script|load")}
    assert sent == {"cmdstat_evalsha": 20}


def test_pushes_ride_on_a_pop_and_are_picked_in_it(redis_server: RedisServer) -> None:
    """A process's pushes since its last pop go with the pop, in the same atomic
    step as its acks: one round trip for a batch, and the pop may hand one out."""
    f = Frontier(redis_server)
    f.push("a.test", "warm")
    f.pop()
    f.r.config_resetstat()
    reply = f.pop(pushes=(("b.test", "r1", "127.2.1.1"), ("b.test", "r2", "127.2.1.1"),
                          ("c.test", "r3", "127.2.1.2")))
    assert reply[:2] == ["req", "r1"]
    assert f.length() == (2, 2)
    stats = f.r.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == 1


def test_clear_drops_queued_and_leased(redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("b.test", "r2", ip="127.2.0.2")
    f.pop()
    f.s["clear"](args=[P])
    assert f.length() == (0, 0)
    assert not [k for k in f.r.scan_iter(f"{P}:*") if not k.startswith(f"{P}:ip:".encode())
                and k != f"{P}:seq".encode()]


def test_the_process_told_to_wait_claims_the_bucket(redis_server: RedisServer) -> None:
    """N processes told the same instant would all ask at it: the first one told
    claims the bucket (here the IP), the others pass over its hosts."""
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("a2.test", "r2")  # the same IP as a.test
    f.r.hset(f"{NS}:host:a.test", "last_start", repr(f.now()))  # due in 0.31 s
    f.r.set(f"{NS}:ip:127.2.0.1", repr(f.now() + 0.2))
    assert f.pop("p1")[0] == "wait"
    kind, lapse = f.pop("p2")
    assert kind == "claimed"
    assert 0.2 < float(lapse) <= INTERVAL + MARGIN + CLAIM
    f.push("b.test", "r3", ip="127.2.0.2")  # another IP: not claimed, handed to p2
    assert f.pop("p2")[:2] == ["req", "r3"]
    assert f.pop("p2", claim=0)[0] == "wait"  # claims off: the seed's free-for-all


def test_the_process_handed_a_request_claims_the_next_instant(
        redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("a.test", "r2")
    reply = f.pop("p1")
    assert reply[:2] == ["req", "r1"]
    assert 0 < float(reply[6]) <= INTERVAL + MARGIN  # p1 asks again for r2 ...
    assert f.pop("p2")[0] == "claimed"  # ... so p2 does not


def test_a_lapsed_claim_lets_another_process_take_the_bucket(
        redis_server: RedisServer) -> None:
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("a.test", "r2")
    f.pop("p1")
    f.rewind()
    assert f.pop("p2")[0] == "claimed"
    f.r.set(f"{P}:claim:127.2.0.1", f"p1 {f.now() - 0.001!r}")  # p1 did not come
    assert f.pop("p2")[:2] == ["req", "r2"]


def _any_key_expiring(f: Frontier) -> bool:
    """Whether a key with a TTL is still there (one pipelined pass)."""
    pipe = f.r.pipeline(transaction=False)
    for k in f.r.scan_iter(count=1000):
        pipe.pttl(k)
    return any(ms > 0 for ms in pipe.execute())


def _crawl_hosts(f: Frontier, n: int) -> int:
    """Push one request for each of ``n`` hosts (each on its own IP), pop and
    acknowledge them all, with every TTL short; once all expired, the keys and
    their fields (a hash's, a sorted set's) added up."""
    f.r.flushall()
    ttl, idle, ceiling = 0.2, 0.05, 0.3
    pipe = f.r.pipeline(transaction=False)
    for i in range(n):
        ip = f"127.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}"
        f.s["push"](args=[P, f"r{i}", 0, f"h{i}.test", ip, ttl, 2.0, ""], client=pipe)
    pipe.execute()
    ids: list[str] = []
    for _ in range(0, n, 500):
        pipe = f.r.pipeline(transaction=False)
        for _ in range(500):
            f.s["pop"](args=[P, NS, "p1", 10.0, 1, INTERVAL, INTERVAL, ceiling, IP_FLOOR, MARGIN,
                             idle, 16, LEAD, 0.0, CLAIM, ttl, 0, 0], client=pipe)
        ids += [r[2].decode() for r in pipe.execute() if r[0] == b"req"]
    assert len(ids) == n
    for at in range(0, n, 500):
        acks = ids[at:at + 500]
        f.s["pop"](args=[P, NS, "p1", 10.0, 0, INTERVAL, INTERVAL, ceiling, IP_FLOOR, MARGIN,
                         idle, 16, LEAD, 0.0, CLAIM, ttl, len(acks), *acks, 0])
    f.s["release"](args=[P, "p1", 0])
    deadline = f.now() + 60  # a generous bound: one pass over 20k keys is slow on a busy machine
    while f.now() < deadline and _any_key_expiring(f):
        time.sleep(0.1)  # the bucket keys, IP map and claims expire with their TTLs
    sizes = {b"hash": f.r.hlen, b"zset": f.r.zcard, b"set": f.r.scard, b"list": f.r.llen}
    return sum(sizes[t](k) if (t := f.r.type(k)) in sizes else 1 for k in f.r.scan_iter())


def test_redis_keys_once_idle_do_not_grow_with_the_hosts(redis_server: RedisServer) -> None:
    """Every key a host leaves (claims, IP map, buckets, overrides) goes with it:
    keys and fields after 20k hosts are those after 2k (``P:claims`` once kept a
    field per bucket ever claimed)."""
    f = Frontier(redis_server)
    small = _crawl_hosts(f, 2000)
    keys_small = sorted(f.r.keys())
    assert _crawl_hosts(f, 20000) == small, (keys_small, sorted(f.r.keys())[:20])
    assert small <= 3, keys_small  # P:seq, P:len (P:leased is gone)


def test_next_in_counts_the_ip_just_booked(redis_server: RedisServer) -> None:
    """Two hosts on one IP: after a hand-out the other host waits for the IP's
    next start, so the reply says when (not 0: a pop that would find nothing)."""
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("b.test", "r2")
    reply = f.pop("p1")
    assert reply[:2] == ["req", "r1"]
    assert IP_FLOOR - 0.05 < float(reply[6]) <= IP_FLOOR + MARGIN


def test_next_in_of_a_host_not_resolved_yet(redis_server: RedisServer) -> None:
    """Its bucket is the host key, with no IP instant: next_in from the host's own."""
    f = Frontier(redis_server)
    f.push("a.test", "r1", ip="?", hold=0.0)
    f.push("a.test", "r2", ip="?", hold=0.0)
    reply = f.pop("p1")
    assert reply[:2] == ["req", "r1"]
    assert reply[4] == 2, reply
    assert 0 < float(reply[6]) <= INTERVAL + MARGIN


def test_a_process_served_less_takes_a_claim_over(redis_server: RedisServer) -> None:
    """p1 was handed 3 more requests than p2: p2 takes the claim on the IP's next
    instant over (told to wait for it); p1, coming for it, passes over it."""
    f = Frontier(redis_server)
    for i in range(5):
        f.push("a.test", f"r{i}")
    assert f.pop("p2")[0] == "req"
    f.r.zadd(f"{P}:served", {"p1": 4, "p2": 1})
    f.rewind()
    f.r.set(f"{P}:claim:127.2.0.1", f"p1 {f.now() + 5!r}")
    f.r.hset(f"{NS}:host:a.test", "last_start", repr(f.now()))
    assert f.pop("p2")[0] == "wait"
    assert f.r.get(f"{P}:claim:127.2.0.1").startswith(b"p2 ")
    assert f.pop("p1")[0] == "claimed"


def test_a_hand_out_says_when_the_next_host_is_truly_due_and_claims_it(
        redis_server: RedisServer) -> None:
    """The index entry of the host due next is a lower bound (another process
    booked its IP since): the pop that hands a request out reads it, re-files it
    at its real instant and claims its bucket, so this process asks again then
    and finds it ready, instead of at once to be told "wait" (a round trip)."""
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    f.push("b.test", "r2", ip="127.2.0.2")
    ip_due = f.now() + 1.0  # another process booked b's IP for then
    f.r.set(f"{NS}:ip:127.2.0.2", repr(ip_due))
    reply = f.pop("p1")
    assert reply[:2] == ["req", "r1"]
    next_in = float(reply[6])
    assert next_in == pytest.approx(ip_due + MARGIN - LEAD - f.now(), abs=0.05)
    filed = f.r.zscore(f"{P}:hosts", "b.test")
    assert filed is not None
    assert filed == pytest.approx(ip_due + MARGIN, abs=0.002)
    claim = f.r.get(f"{P}:claim:127.2.0.2")
    assert claim is not None
    assert claim.decode().startswith("p1 ")
    assert f.pop("p2")[0] == "claimed"  # the others pass over it


def test_pushes_riding_on_a_pop_write_each_host_entry_once(redis_server: RedisServer) -> None:
    """A batch of pushes takes its push numbers with one INCRBY and writes a
    host's IP and index entry once, however many of its requests it carries
    (counted by the server); the order within the host stays first in, first out."""
    f = Frontier(redis_server)

    def calls() -> dict[str, int]:
        return {k.removeprefix("cmdstat_"): int(v["calls"])
                for k, v in f.r.info("commandstats").items()}

    before = calls()
    f.pop(picks=0, pushes=(("a.test", "r1", "127.2.0.1"), ("a.test", "r2", "127.2.0.1"),
                           ("a.test", "r3", "127.2.0.1"), ("b.test", "r4", "127.2.0.2")))
    after = calls()
    ran = {k: after.get(k, 0) - before.get(k, 0) for k in ("incr", "incrby", "zadd", "set")}
    # zadd: 4 requests, 2 index entries, the heartbeat; set: 2 hosts' IPs
    assert ran == {"incr": 0, "incrby": 2, "zadd": 7, "set": 2}
    assert f.length() == (4, 0)
    out = f.drain()
    assert sorted(out) == ["r1", "r2", "r3", "r4"]
    assert [x for x in out if x != "r4"] == ["r1", "r2", "r3"]


def test_go_late_says_the_start_it_put_in_force_and_goes_again_from_there(
        redis_server: RedisServer) -> None:
    """A booked request that reached the gate late moves both buckets to its real
    start before it goes (go_late.lua), and answers that start on the server's
    clock. A fleet's first requests showed why: the reply reached a busy loop
    200-300 ms after the script ran, the bytes left then, and another process's
    next booking on the IP, spaced from the start the script had put in force,
    came 116-184 ms short. The client puts it in force again from the start
    the first call answered; a booking behind it meanwhile refuses (0)."""
    f = Frontier(redis_server)
    go_late = f.r.register_script(_script("go_late.lua"))
    keys = [f"{NS}:host:a.test", f"{NS}:ip:127.2.0.1", f"{NS}:late:127.2.0.1"]
    f.push("a.test", "a1")
    f.push("b.test", "b1")  # the same IP
    reply = f.pop()
    assert reply[1] == "a1"
    booked = float(reply[7])
    before = f.now()
    started = float(go_late(keys=keys, args=[booked, 0.0, 0.02, INTERVAL, IP_FLOOR, 60.0]))
    assert before + 0.02 <= started <= f.now() + 0.02  # the script's now + starts_in
    assert float(f.r.get(keys[1])) == pytest.approx(started + IP_FLOOR, abs=1e-9)
    # Its reply came 0.2 s late: in force again from that start, the bytes 0.2 s on.
    before = f.now()
    again = float(go_late(keys=keys, args=[started, 0.0, 0.2, INTERVAL, IP_FLOOR, 60.0]))
    assert before + 0.2 <= again <= f.now() + 0.2
    assert float(f.r.hget(keys[0], "last_start")) == pytest.approx(again, abs=1e-9)
    assert float(f.r.get(keys[1])) == pytest.approx(again + IP_FLOOR, abs=1e-9)
    # Another process's pop of the IP's other host is spaced from that start.
    kind, wait = f.pop("p2", claim=0)
    assert kind == "wait"
    assert float(wait) >= again + IP_FLOOR + MARGIN - LEAD - f.now() - 1e-6
    # Booked behind it (the IP spent one more spacing on): a late start from the
    # old one would crowd that booking, so nothing moves and it is booked afresh.
    f.r.set(keys[1], repr(again + 2 * IP_FLOOR + MARGIN))
    assert go_late(keys=keys, args=[again, 0.0, 0.02, INTERVAL, IP_FLOOR, 60.0]) == 0
    assert float(f.r.hget(keys[0], "last_start")) == pytest.approx(again, abs=1e-9)


def test_a_process_told_claimed_comes_when_it_may_take_the_claim_over(
        redis_server: RedisServer) -> None:
    """A process passed over is told WHEN it may take the bucket over and book,
    not to ask again at each lapse: after the hand-outs the claimant still needs
    to be 3 ahead of it, one per its step (the claim says the hand-out's start
    to its instant), when the next is due."""
    f = Frontier(redis_server)
    for i in range(4):
        f.push("a.test", f"r{i}")
    reply = f.pop("p1")
    assert reply[0] == "req"
    start = float(reply[7])
    claim = f.r.get(f"{P}:claim:127.2.0.1").decode().split()
    assert claim[0] == "p1"
    instant = float(claim[1]) - CLAIM
    step = float(claim[2])
    assert step == pytest.approx(instant - start, abs=1e-6)
    assert step == pytest.approx(INTERVAL + MARGIN, abs=0.002)
    for counts, d in (({"p1": 5, "p2": 3}, 1), ({"p1": 2, "p2": 5}, 6)):  # p1 needs d more
        f.r.zadd(f"{P}:served", counts)
        due = instant + d * step - LEAD
        before = f.now()
        kind, come = f.pop("p2")
        assert kind == "claimed"
        assert due - f.now() - 1e-6 <= float(come) <= due - before + 1e-6


def test_a_wait_claim_without_a_step_is_asked_for_at_its_lapse(
        redis_server: RedisServer) -> None:
    """A claim not made by a hand-out says no cadence: the others ask at its lapse."""
    f = Frontier(redis_server)
    f.push("a.test", "r1")
    lapse = f.now() + 0.5
    f.r.set(f"{P}:claim:127.2.0.1", f"p1 {lapse!r}")
    f.r.zadd(f"{P}:served", {"p1": 2, "p2": 2})
    before = f.now()
    kind, come = f.pop("p2")
    assert kind == "claimed"
    assert lapse - f.now() - 1e-6 <= float(come) <= lapse - before + 1e-6


def test_a_busy_host_hash_is_kept_alive_without_a_pexpire_per_write(
        redis_server: RedisServer) -> None:
    """The host hash says until when its TTL was set (``exp``, a minute more than
    needed): a booking while that covers the need writes no TTL (one command
    each saved), and the hash never lives shorter than it needs. An outcome,
    which may change a verdict, sets it exactly (ceiling + idle), so a dead or
    paused host is forgotten when JOBDIR's saved state forgets it."""
    f = Frontier(redis_server)
    feedback = f.r.register_script(_script("feedback.lua"))
    hkey = f"{NS}:host:a.test"
    for i in range(3):
        f.push("a.test", f"r{i}")
    assert f.pop()[0] == "req"  # the first booking sets the TTL and exp
    exp = float(f.r.hget(hkey, "exp"))
    assert exp == pytest.approx(f.now() + 60.0 + 2 * 60.0, abs=1.0)  # ceiling + 2 idle
    assert f.r.pttl(hkey) / 1000 == pytest.approx(exp - f.now(), abs=1.0)
    f.rewind()
    f.r.config_resetstat()
    assert f.pop()[0] == "req"
    assert "cmdstat_pexpire" not in f.r.info("commandstats")
    assert float(f.r.hget(hkey, "exp")) == exp
    feedback(keys=[hkey], args=[200, 0, 0.1, INTERVAL, INTERVAL, 60.0, 2.0, 1.5, 0.1, 2.0,
                                0.05, 5, 0.3, 60.0, "additive", *[1] * 12, 0, -1])
    assert f.r.pttl(hkey) / 1000 == pytest.approx(60.0 + 60.0, abs=1.0)  # ceiling + idle
    exp = float(f.r.hget(hkey, "exp"))
    assert exp == pytest.approx(f.now() + 120.0, abs=1.0)
    f.r.hset(hkey, "exp", repr(f.now() + 100.0))  # no longer covers a ceiling + idle
    f.rewind()
    assert f.pop()[0] == "req"
    assert f.r.pttl(hkey) / 1000 == pytest.approx(60.0 + 2 * 60.0, abs=1.0)
    assert float(f.r.hget(hkey, "exp")) == pytest.approx(f.now() + 180.0, abs=1.0)


def test_a_booking_keeps_the_namespace_hash_alive_without_reading_its_ttl(
        redis_server: RedisServer) -> None:
    """The namespace hash (epoch, hold) outlives every booking. It notes until
    when its TTL holds (``exp``), read with the grace window by one HMGET: the
    first booking reads the TTL (PTTL) and notes it, the next ones neither read
    nor write it while it covers them. A hash nobody wrote yet is created with
    its ``exp`` alone (no epoch: reserve.lua still finds none)."""
    f = Frontier(redis_server)
    ns = f"{NS}:ns"
    for i in range(4):
        f.push("a.test", f"r{i}")
    assert f.pop()[0] == "req"
    assert f.r.hkeys(ns) == [b"exp"]
    f.r.delete(ns)
    f.r.hset(ns, "epoch", "e1")
    f.rewind()
    assert f.pop()[0] == "req"
    assert f.r.hget(ns, "epoch") == b"e1"
    assert f.r.pttl(ns) / 1000 == pytest.approx(2 * 60.0 + INTERVAL + MARGIN, abs=1.0)
    exp = float(f.r.hget(ns, "exp"))
    assert exp == pytest.approx(f.now() + f.r.pttl(ns) / 1000, abs=0.5)
    f.rewind()
    f.r.config_resetstat()
    assert f.pop()[0] == "req"
    stats = f.r.info("commandstats")
    assert "cmdstat_pttl" not in stats, stats
    assert "cmdstat_pexpire" not in stats, stats
    assert float(f.r.hget(ns, "exp")) == exp
