"""Run N scrapy-redis crawler processes on one Redis against the farm (tests, bench)."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

SCRIPT = Path(__file__).with_name("redis_crawl_script.py")
# The checkout these tests belong to, first on the crawlers' path: run as a file,
# the script would import the package the venv's editable install points at,
# which may be another checkout (a git worktree sharing one venv).
_CHECKOUT = str(Path(__file__).resolve().parents[1])
STOCK_QUEUE = "scrapy_redis.queue.PriorityQueue"


@dataclass
class Fleet:
    """What the processes of one distributed crawl fetched and logged."""

    items: list[dict[str, Any]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    codes: list[int | None] = field(default_factory=list)
    wall: float = 0.0
    ended: float = 0.0  # time.monotonic() once every process exited (the farm's clock)
    callbacks: list[list[str]] = field(default_factory=list)  # per process: its callback log


def seed(redis_url: str, urls: list[str], key: str = "frontier:start_urls") -> None:
    """Put the start URLs in scrapy-redis's start key, first URL popped first, as
    JSON (``{"url": ...}``: a bare URL string makes scrapy-redis warn per URL)."""
    client = redis.Redis.from_url(redis_url)
    client.rpush(key, *(json.dumps({"url": url}) for url in urls))
    client.close()


def run_fleet(settings: dict[str, Any], processes: int = 3, *, timeout: float = 120.0,
              kill: Callable[[list[subprocess.Popen[str]], list[Path]], None] | None = None,
              batch: int | None = None, spider: str = "redis",
              barrier: bool = False, slow_news: float = 0.0,
              callback_s: float = 0.0) -> Fleet:
    """Start ``processes`` crawlers at once; ``kill(procs, logs)`` (in this thread) may
    SIGKILL some (or push more start URLs). ``batch``: the spider's
    ``redis_batch_size`` (None: scrapy-redis's default, ``CONCURRENT_REQUESTS``);
    ``spider``: ``"redis"`` (``RedisSpider``) or ``"crawl"`` (``RedisCrawlSpider``);
    ``barrier``: every process, once open, waits for all the others, so their
    first requests start at the same instant; ``slow_news``: every late start
    reaches Redis that many seconds after the process reported it; ``callback_s``:
    each callback takes that long (each process appends the URL of each callback
    it starts to ``callbacks<i>.txt`` next to its log)."""
    fleet = Fleet()
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        procs, outs, log_paths = [], [], []
        start = time.monotonic()
        gate = None
        if barrier:
            Path(tmp, "barrier").mkdir()
            gate = {"folder": str(Path(tmp, "barrier")), "n": processes}
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [_CHECKOUT, os.environ.get("PYTHONPATH")]))}
        for i in range(processes):
            items_out = str(Path(tmp, f"items{i}.jsonl"))
            job = {"settings": settings, "items_out": items_out, "batch": batch,
                   "spider": spider, "barrier": gate, "slow_news": slow_news,
                   "callback_s": callback_s,
                   "callback_log": str(Path(tmp, f"callbacks{i}.txt"))}
            job_path = Path(tmp, f"job{i}.json")
            job_path.write_text(json.dumps(job), encoding="utf-8")
            log_paths.append(Path(tmp, f"log{i}.txt"))
            log = open(log_paths[-1], "w+", encoding="utf-8")  # noqa: SIM115
            procs.append(subprocess.Popen([sys.executable, str(SCRIPT), str(job_path)],
                                          stdout=subprocess.DEVNULL, stderr=log, text=True,
                                          env=env))
            outs.append((items_out, log))
        if kill is not None:
            kill(procs, log_paths)
        for p in procs:
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()
        fleet.ended = time.monotonic()
        fleet.wall = fleet.ended - start
        for i, (p, (items_out, log)) in enumerate(zip(procs, outs, strict=True)):
            fleet.codes.append(p.returncode)
            log.seek(0)
            fleet.logs.append(log.read())
            log.close()
            calls = Path(tmp, f"callbacks{i}.txt")
            fleet.callbacks.append(calls.read_text().splitlines() if calls.exists() else [])
            path = Path(items_out)
            if path.exists():
                fleet.items += [{**json.loads(line), "process": i}
                                for line in path.read_text().splitlines() if line.strip()]
    return fleet


class CommandStats:
    """Commands the server ran between ``__init__`` and ``stop()``, by name, from
    ``INFO commandstats`` (those a script runs included, unlike MONITOR's
    client-sent count). Our own INFO calls are left out."""

    def __init__(self, redis_url: str) -> None:
        self._client = redis.Redis.from_url(redis_url)
        self._before = self._read()

    def _read(self) -> collections.Counter[str]:
        raw = self._client.info("commandstats")
        return collections.Counter({name.removeprefix("cmdstat_").upper(): int(v["calls"])
                                    for name, v in raw.items()})

    def stop(self) -> collections.Counter[str]:
        after = self._read()
        self._client.close()
        counts = after - self._before
        counts["INFO"] -= 1  # the first read's (the second is not counted in its own answer)
        for name in ("INFO", "PING", "CLIENT|SETINFO", "CLIENT|SETNAME", "HELLO", "SCRIPT|LOAD"):
            counts.pop(name, None)  # connection set-up and checks: not per request
        return counts

    @staticmethod
    def scripts(counts: collections.Counter[str]) -> int:
        return counts["EVALSHA"] + counts["EVAL"]


class CommandCounter:
    """Counts the commands clients send to Redis (MONITOR; not those run inside scripts).

    Reads MONITOR's raw lines on a plain socket: every argument is quoted and
    escaped there, so one line is one command whatever the (pickled) payload,
    where a parsing client can choke on it and stop counting.
    """

    def __init__(self, redis_url: str) -> None:
        import socket
        import threading
        from urllib.parse import urlsplit

        parts = urlsplit(redis_url)
        self.counts: collections.Counter[str] = collections.Counter()
        self.shas: collections.Counter[str] = collections.Counter()  # EVALSHA by script
        # (script SHA1, command) run inside it: MONITOR shows a script's
        # commands right after the EVALSHA line that ran it
        self.inner: collections.Counter[tuple[str, str]] = collections.Counter()
        self._script = ""
        # frontier_pop calls by kind: 'beat' (picks 0), 'req' (handed one out), 'none'
        self.pops: collections.Counter[str] = collections.Counter()
        self._pop = ""
        self.pop_inner: collections.Counter[tuple[str, str]] = collections.Counter()  # by kind
        self._ran: list[str] = []
        self._sock = socket.create_connection((parts.hostname, parts.port or 6379))
        self._sock.sendall(b"MONITOR\r\n")
        self._buf = b""
        while b"\r\n" not in self._buf:  # +OK: monitoring from here on
            self._buf += self._sock.recv(4096)
        self._buf = self._buf.split(b"\r\n", 1)[1]
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        buf = self._buf
        while True:
            try:
                chunk = self._sock.recv(1 << 16)
            except OSError:  # closed by stop()
                return
            if not chunk:
                return
            *lines, buf = (buf + chunk).split(b"\r\n")
            for line in lines:
                # +<time> [<db> <client>] "COMMAND" ...; <client> is "lua" inside a script
                head, _, rest = line.partition(b"] ")
                if not rest.startswith(b'"'):
                    continue
                command = rest[1:].partition(b'"')[0].decode().upper()
                if head.endswith(b" lua"):
                    self.inner[self._script, command] += 1
                    if command == "ZINCRBY" and self._pop:
                        self._pop = "req"
                    self._ran.append(command)
                    continue
                if self._pop:
                    self.pops[self._pop] += 1
                    for ran in self._ran:
                        self.pop_inner[self._pop, ran] += 1
                self._ran = []
                self._pop = ""
                self.counts[command] += 1
                self._script = rest.split(b'"')[3].decode() if command == "EVALSHA" else ""
                if self._script:
                    self.shas[self._script] += 1
                    parts = rest.split(b'"')
                    if len(parts) > 15 and parts[7].endswith(b":requests"):
                        self._pop = "beat" if parts[15] == b"0" else "none"
            if self._stop:
                return

    def stop(self) -> collections.Counter[str]:
        import socket
        import time as _time

        _time.sleep(0.2)  # let the last lines arrive
        self._stop = True
        client = redis.Redis.from_url(f"redis://{self._sock.getpeername()[0]}:"
                                      f"{self._sock.getpeername()[1]}")
        client.ping()  # one more line so the reader sees the flag
        client.close()
        self._thread.join(5)
        self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self.counts.pop("PING", None)  # ours (and the clients' connection checks)
        return self.counts
