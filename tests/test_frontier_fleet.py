"""Three scrapy-redis crawler processes on one Redis, the frontier queue, the farm.

Real scrapy-redis (scheduler, dupefilter, RedisSpider fed through its start URLs
key), real redis-server, server-side arrival times. The stock scrapy-redis queue
runs the same crawl for the Redis command count it is held to.
"""

from __future__ import annotations

import collections
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from crawling import farm_settings
from frontier_crawl import STOCK_QUEUE, CommandCounter, CommandStats, run_fleet, seed
from redis_server import RedisServer, redis_server_fixture
from test_multiprocess import INTERVAL, SPEC, count_violations, describe_violations

from scrapy_politeness._sitefarm import Farm

pytest.importorskip("scrapy_redis")

# Per request served, INFO commandstats (see docs/usage/redis.md for the figures).
COMMANDS_PER_REQUEST = 75.0
SCRIPTS_PER_REQUEST = 4.0


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    yield from redis_server_fixture()


def fleet_settings(farm: Farm, server: RedisServer, **extra: Any) -> dict[str, Any]:
    return farm_settings(
        farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
        POLITENESS_IP_FLOOR=INTERVAL, POLITENESS_LATENCY_RISE=100.0,
        POLITENESS_BACKEND=server.url, POLITENESS_NAMESPACE=f"fl:{uuid.uuid4().hex[:8]}",
        REDIS_URL=server.url,
        MAX_IDLE_TIME_BEFORE_CLOSE=1, **extra)


def all_urls(farm: Farm, per_host: int) -> list[str]:
    return [farm.url(h, f"/p/{n}") for n in range(per_host) for h in SPEC["hosts"]]


def fetched(farm: Farm) -> collections.Counter[str]:
    return collections.Counter(f"{a.host}{a.path}" for a in farm.arrivals()
                               if a.path != "/robots.txt")


def wanted(urls: list[str]) -> collections.Counter[str]:
    """``host/path`` per URL, as the farm's arrival log names them."""
    return collections.Counter(f"{urlsplit(u).hostname}{urlsplit(u).path}" for u in urls)


def test_three_processes_fetch_every_url_once_within_one_budget(
        farm_factory: Any, redis_server: RedisServer) -> None:
    farm = farm_factory(SPEC)
    urls = all_urls(farm, per_host=6)
    seed(redis_server.url, urls)
    fleet = run_fleet(fleet_settings(farm, redis_server))
    assert fleet.codes == [0, 0, 0], fleet.logs
    arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
    assert fetched(farm) == wanted(urls)
    assert count_violations(arrivals) == (0, 0), describe_violations(arrivals)
    assert sorted(i["url"] for i in fleet.items) == sorted(urls)
    assert sum("frontier/popped" in log for log in fleet.logs) >= 1
    # Booked by the pop (only a host nobody had resolved yet may go out host-only).
    assert sum(bool(i["booked"]) for i in fleet.items) >= len(urls) - len(SPEC["hosts"])


def _late_fleet(farm_factory: Any, redis_server: RedisServer, *,
                after_politeness: bool, slow_news: float = 0.0) -> tuple[Any, list[str]]:
    """Three processes where every even page is held 80 ms (``tests/late_send.py``)
    after the politeness middleware (960: the send slips) or before it (940:
    the request reaches the gate late); every URL once, no short gap."""
    farm = farm_factory(SPEC)
    urls = all_urls(farm, per_host=8)
    seed(redis_server.url, urls)
    priority = 960 if after_politeness else 940
    fleet = run_fleet(fleet_settings(
        farm, redis_server, DOWNLOADER_MIDDLEWARES={"late_send.LateSend": priority}),
        slow_news=slow_news, barrier=True)
    assert fleet.codes == [0, 0, 0], fleet.logs
    arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
    assert fetched(farm) == wanted(urls)
    assert count_violations(arrivals) == (0, 0), describe_violations(arrivals)
    return fleet, urls


def test_a_booked_request_sent_late_spaces_the_next_pop_of_every_process(
        farm_factory: Any, redis_server: RedisServer) -> None:
    """The send slips after the gate's release (here: 80 ms for every even page,
    after the politeness middleware): the pop of another process must space
    from the real start, not from the booked one, as ``reserve`` does."""
    fleet, urls = _late_fleet(farm_factory, redis_server, after_politeness=True)
    assert sum(bool(i["booked"]) for i in fleet.items) >= len(urls) - len(SPEC["hosts"])


def _stat(logs: list[str], name: str) -> int:
    return sum(int(m) for log in logs for m in re.findall(rf"'politeness/{name}': (\d+)", log))


def test_a_booked_request_that_reaches_the_gate_late_goes_and_is_reported(
        farm_factory: Any, redis_server: RedisServer) -> None:
    """Every even page reaches the politeness middleware 80 ms after the pop
    (about 30-80 ms after its booked start): within the allowance it is sent
    at once and its real start pushed to the shared buckets, instead of being
    booked afresh (a second slot spent); no gap gets short either way."""
    fleet, _urls = _late_fleet(farm_factory, redis_server, after_politeness=False)
    late, rebooked = _stat(fleet.logs, "frontier/sent_late"), _stat(fleet.logs, "frontier/rebooked")
    assert late > 0
    assert rebooked * 10 <= late  # all but a few go at once instead of being booked again


def test_a_late_booked_start_is_in_force_before_it_goes(
        farm_factory: Any, redis_server: RedisServer) -> None:
    """As above, but every late start reaches Redis 0.25 s after the process
    reported it (a loop too busy to run the report, as when a fleet starts):
    reported after the send, the news lost the race with the other processes'
    next bookings (short gaps); put in force before the send, it cannot."""
    fleet, _urls = _late_fleet(farm_factory, redis_server, after_politeness=False,
                               slow_news=0.25)
    # Late requests there were; each went once in force, or was booked afresh when
    # another process had booked behind it meanwhile.
    assert _stat(fleet.logs, "frontier/sent_late") + _stat(fleet.logs, "frontier/rebooked") > 0


def _pid_of(log: Path) -> str | None:
    found = re.search(r"frontier queue \S+ on Redis, process id (\w+)", log.read_text())
    return found.group(1) if found else None


def test_a_killed_process_loses_nothing(farm_factory: Any, redis_server: RedisServer) -> None:
    """SIGKILL one process while it holds requests: the others fetch them (at least once)."""
    farm = farm_factory(SPEC)
    urls = all_urls(farm, per_host=8)
    seed(redis_server.url, urls)
    client = redis.Redis.from_url(redis_server.url)
    held: dict[bytes, bytes] = {}
    victim: list[int] = []

    def kill(procs: list[subprocess.Popen[str]], logs: list[Path]) -> None:
        """Kill whichever process first holds a request once the crawl is under way
        (a process may hold none: the others' claims can cover every bucket)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for i, log in enumerate(logs):
                pid = _pid_of(log)
                lease = client.hgetall(f"frontier:requests:lease:{pid}") if pid else {}
                if lease and len(farm.arrivals()) >= 4:
                    procs[i].send_signal(signal.SIGKILL)
                    procs[i].wait()
                    held.update(client.hgetall(f"frontier:requests:lease:{pid}"))
                    victim.append(i)
                    return
            time.sleep(0.005)

    fleet = run_fleet(fleet_settings(farm, redis_server), kill=kill)
    assert held, "the victim was killed without holding a request: nothing was tested"
    assert [c for i, c in enumerate(fleet.codes) if i in victim] == [-signal.SIGKILL]
    assert [c for i, c in enumerate(fleet.codes) if i not in victim] == [0, 0], fleet.logs
    counts = fetched(farm)
    assert set(counts) == set(wanted(urls))  # every URL, the victim's too
    # At least once: only what the victim held may have been fetched twice.
    assert sum(counts.values()) - len(urls) <= len(held)
    arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
    assert count_violations(arrivals) == (0, 0), describe_violations(arrivals)
    assert not list(client.scan_iter("frontier:requests:lease:*"))
    assert client.mget("frontier:requests:len", "frontier:requests:leased") == [b"0", None]


def test_a_process_killed_during_its_callbacks_loses_no_page(
        farm_factory: Any, redis_server: RedisServer) -> None:
    """A lease ends once the request's callback has run, not at its response:
    SIGKILL one process while its callbacks run (each takes 1.5 s), and every
    page's callback still completes in the fleet (the victim's unfinished ones
    are fetched again by the others once its heartbeat stops)."""
    farm = farm_factory(SPEC)
    urls = all_urls(farm, per_host=4)
    seed(redis_server.url, urls)
    victim: list[int] = []

    def kill(procs: list[subprocess.Popen[str]], logs: list[Path]) -> None:
        """Kill the first process 1 s into its second callback (the response's
        end long reported: its next pops went meanwhile)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for i, log in enumerate(logs):
                calls = log.with_name(f"callbacks{i}.txt")
                if calls.exists() and len(calls.read_text().splitlines()) >= 2:
                    time.sleep(1.0)
                    procs[i].send_signal(signal.SIGKILL)
                    procs[i].wait()
                    victim.append(i)
                    return
            time.sleep(0.005)

    fleet = run_fleet(fleet_settings(farm, redis_server), kill=kill, callback_s=1.5)
    assert victim, "no process ran a callback: nothing was tested"
    (v,) = victim
    started = {line for line in fleet.callbacks[v] if not line.startswith("done ")}
    finished = {line.removeprefix("done ") for lines in fleet.callbacks for line in lines
                if line.startswith("done ")}
    assert started - {line.removeprefix("done ") for line in fleet.callbacks[v]
                      if line.startswith("done ")}, "the victim was in no callback"
    assert finished == set(urls)  # every page's callback ran to its end somewhere
    assert [c for i, c in enumerate(fleet.codes) if i != v] == [0, 0], fleet.logs
    arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
    assert count_violations(arrivals) == (0, 0), describe_violations(arrivals)
    client = redis.Redis.from_url(redis_server.url)
    assert client.mget("frontier:requests:len", "frontier:requests:leased") == [b"0", None]


def _commands_per_request(farm: Farm, server: RedisServer, **extra: Any) -> float:
    client = redis.Redis.from_url(server.url)
    client.flushall()
    urls = all_urls(farm, per_host=6)
    seed(server.url, urls)
    counter = CommandCounter(server.url)
    fleet = run_fleet(fleet_settings(farm, server, **extra))
    counts = counter.stop()
    assert fleet.codes == [0, 0, 0], fleet.logs
    print(extra or "frontier", dict(counts))
    return sum(counts.values()) / len(urls)


def test_redis_commands_per_request_at_most_one_more_than_the_stock_queue(
        farm_factory: Any, redis_server: RedisServer) -> None:
    """Side by side in one run: the stock scrapy-redis queue + the plugin's backend
    (reserve and feedback per request) against the frontier (push, pop, feedback)."""
    stock = _commands_per_request(farm_factory(SPEC), redis_server,
                                  SCHEDULER_QUEUE_CLASS=STOCK_QUEUE)
    ours = _commands_per_request(farm_factory(SPEC), redis_server)
    print(f"Redis commands per dispatched request: stock queue {stock:.2f}, frontier {ours:.2f}")
    assert ours <= stock + 1


def test_redis_cost_per_request_counted_by_the_server(
        farm_factory: Any, redis_server: RedisServer) -> None:
    """The Redis commands (those the scripts run included: ``INFO commandstats``)
    and script calls per request served, in a real three-process crawl. A pop
    carries the process's pushes and acks; the index head, its IPs and claims
    are read once per pop (they were read again per host: 60 GETs a request)."""
    farm = farm_factory(BROAD)
    urls = [farm.url(h, f"/p/{n}") for n in range(4) for h in BROAD["hosts"]]
    seed(redis_server.url, urls)
    counter = CommandStats(redis_server.url)
    fleet = run_fleet(fleet_settings(farm, redis_server))
    counts = counter.stop()
    assert fleet.codes == [0, 0, 0], fleet.logs
    served = len([a for a in farm.arrivals() if a.path != "/robots.txt"])
    assert served == len(urls)
    commands, scripts = sum(counts.values()) / served, CommandStats.scripts(counts) / served
    print(f"per request served: {commands:.1f} commands, {scripts:.2f} scripts; {dict(counts)}")
    assert counts["GET"] / served < 10, counts
    assert commands <= COMMANDS_PER_REQUEST, counts
    assert scripts <= SCRIPTS_PER_REQUEST, counts


BROAD: dict[str, Any] = {"ips": ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"],
                         "hosts": {f"h{i:02d}.farm.test": {"ip": f"127.0.0.{2 + i % 4}",
                                                           "pages": 8} for i in range(12)}}


def test_default_batch_every_process_works(farm_factory: Any, redis_server: RedisServer) -> None:
    """The shipped RedisSpider with its default batch (CONCURRENT_REQUESTS = 4 here),
    half the URLs pushed before the crawl and half during it: a process whose
    queued hosts all wait reads the start URLs itself (scrapy-redis reads them only
    when a process idles), and a process that was handed fewer requests than a
    claimant takes its claim over, so the buckets do not stay with the process
    that served them first: a fifth of the pages each, or close (counted by the
    pages each process fetched; a sixth leaves room for a noisy machine)."""
    farm = farm_factory(BROAD)
    urls = [farm.url(h, f"/p/{n}") for n in range(8) for h in BROAD["hosts"]]
    seed(redis_server.url, urls[:48])

    def more(procs: list[subprocess.Popen[str]], logs: list[Path]) -> None:
        deadline = time.monotonic() + 30
        while len(farm.arrivals()) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        seed(redis_server.url, urls[48:])

    fleet = run_fleet(fleet_settings(farm, redis_server, CONCURRENT_REQUESTS=4), kill=more)
    assert fleet.codes == [0, 0, 0], fleet.logs
    assert fetched(farm) == wanted(urls)
    arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
    assert count_violations(arrivals) == (0, 0), describe_violations(arrivals)
    per_process = [_stat([log], "frontier/popped") for log in fleet.logs]
    assert sum(per_process) == len(urls), per_process
    assert min(per_process) * 6 >= len(urls), per_process  # at least 16 of the 96 each
