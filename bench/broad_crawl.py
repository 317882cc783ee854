"""One broad-bench crawl in its own process: ``python -m bench.broad_crawl job.json``.

The job (JSON) gives the hosts (``hosts``, ``ips``: names as
:class:`bench.broad_servers.BroadSpec` makes them), the nginx ``port``, the
start list's ``order`` (``host-major``: each host's ``pages`` together;
``page-major``: a pass over every host per page), ``settings``, ``idle``
(seconds to stay open once no response came, so that the RSS after the hosts
went idle can be read), ``nofile`` (an open-file limit, as ``ulimit -n``), ``start_done_file``
(created once the start list is in, so the bench can stop the crawl after
it) and ``out``. The start list is yielded lazily, one request at a time. Instants
are ``time.time()`` so that they compare with nginx's ``$msec``.

With ``BENCH_BROAD_PROFILE=DIR``, cProfile in the crawl's first and last fifth
(:mod:`bench.broad_profile`). With ``BENCH_BROAD_TRACEMALLOC=DIR`` in the
environment the crawl traces its allocations (``tracemalloc``, 6 frames; slow:
for profiling, not for figures)
and writes the top allocation sites, by the innermost source line and by the
plugin's or Scrapy's own line that made them, to ``DIR/start_done.txt`` (start
list in) and ``DIR/closed.txt`` (spider closed), with the raw snapshot beside
(``.snap``, for ``tracemalloc.Snapshot.load``: diff two of them) and the
interpreter's own allocator figures (``sys._debugmallocstats``: how much of
pymalloc's arenas is in used blocks; RSS beyond that is fragmentation or C-level
memory). ``BENCH_BROAD_TRACEMALLOC_AT=N[,M]`` adds a dump (``responses_N``) once
N responses came; ``BENCH_BROAD_TRACEMALLOC_FRAMES=0`` writes the allocator's
figures only (no tracing: the crawl runs at its usual speed).

``BENCH_BROAD_STALL=N:S`` blocks the crawl's event loop for ``S`` seconds in the
spider's callback of every ``N``-th response (a slow parse, a synchronous
pipeline, a long collection): released requests are held on their way to the
wire, the case the hold until the observed write is for.
``BENCH_BROAD_HOLD=N:S`` adds a downloader middleware between the plugin and
the downloader (priority 960) that takes 8 loop turns with every request (a
signing or proxy-rotating middleware awaiting its own work) and blocks the
loop ``S`` seconds after every ``N``-th: sends released more than the stall
correction's four turns before a long turn, their bytes not written yet.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Response

from .broad_marks import mark_close
from .broad_profile import WindowedProfile
from .broad_servers import BroadSpec

BASE_SETTINGS: dict[str, Any] = {
    "REMOTE_CONTROL_ENABLED": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "WARNING",
    "ROBOTSTXT_OBEY": True,
    "CONCURRENT_REQUESTS": 64,
}


TRACE_ENV = "BENCH_BROAD_TRACEMALLOC"


def _stall_setting() -> tuple[int, float] | None:
    """``BENCH_BROAD_STALL=N:S``: (every N-th response, S seconds), or None."""
    raw = os.environ.get("BENCH_BROAD_STALL")
    if not raw:
        return None
    every, seconds = raw.split(":")
    return int(every), float(seconds)


STALL = _stall_setting()


def _hold_setting() -> tuple[int, float] | None:
    """``BENCH_BROAD_HOLD=N:S``: (every N-th request, S seconds), or None."""
    raw = os.environ.get("BENCH_BROAD_HOLD")
    if not raw:
        return None
    every, seconds = raw.split(":")
    return int(every), float(seconds)


class HoldAfterGate:
    """A middleware nearer the downloader than the plugin: a few loop turns per
    request, and a long turn after every N-th (``BENCH_BROAD_HOLD``)."""

    TURNS = 8

    def __init__(self) -> None:
        hold = _hold_setting()
        assert hold is not None
        self.every, self.seconds = hold
        self.seen = 0

    async def process_request(self, request: scrapy.Request) -> None:
        import asyncio

        for _ in range(self.TURNS):
            await asyncio.sleep(0)
        self.seen += 1
        if self.seen % self.every == 0:
            time.sleep(self.seconds)


def _own_frame(trace: tracemalloc.Trace) -> str:
    """The innermost frame in the plugin or in Scrapy: whose structure holds the bytes."""
    for frame in trace.traceback:  # most recent first
        if "scrapy_politeness" in frame.filename or "/scrapy/" in frame.filename:
            return f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}"
    return "(other)"


def dump_allocations(name: str, top: int = 40) -> None:
    """Write the top allocation sites to ``$BENCH_BROAD_TRACEMALLOC/<name>.txt``."""
    where = os.environ.get(TRACE_ENV)
    if not where:
        return
    if not tracemalloc.is_tracing():  # BENCH_BROAD_TRACEMALLOC_FRAMES=0: the allocator's only
        _malloc_stats(os.path.join(where, f"{name}.malloc"))
        return
    snapshot = tracemalloc.take_snapshot()
    total = sum(s.size for s in snapshot.statistics("filename"))
    owners: dict[str, list[int]] = {}
    for trace in snapshot.traces:
        entry = owners.setdefault(_own_frame(trace), [0, 0])
        entry[0] += trace.size
        entry[1] += 1
    lines = [f"traced {total / 2**20:.1f} MiB", "", "by the plugin's or Scrapy's line:"]
    for key, (size, count) in sorted(owners.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{size / 2**20:8.2f} MiB {count:9d} blocks  {key}")
    lines += ["", "by the innermost line:"]
    for stat in snapshot.statistics("lineno")[:top]:
        lines.append(f"{stat.size / 2**20:8.2f} MiB {stat.count:9d} blocks  {stat.traceback[0]}")
    with open(os.path.join(where, f"{name}.txt"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    snapshot.dump(os.path.join(where, f"{name}.snap"))
    _malloc_stats(os.path.join(where, f"{name}.malloc"))


def _malloc_stats(path: str) -> None:
    """``sys._debugmallocstats`` (it writes to C's stderr) and the RSS, into ``path``."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "w", encoding="utf-8") as fh:
        objects = gc.get_objects()
        fh.write(f"VmRSS {_rss_kb()} kB, gc objects {len(objects)}\n")
        census: dict[str, int] = {}
        for obj in objects:
            name = type(obj).__qualname__
            census[name] = census.get(name, 0) + 1
        del objects
        for name, count in sorted(census.items(), key=lambda kv: -kv[1])[:40]:
            fh.write(f"{count:9d} {name}\n")
        fh.flush()
        os.dup2(fh.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _dumps_at(crawler: Any) -> None:
    """Dump the allocations once the response counts in ``$BENCH_BROAD_TRACEMALLOC_AT`` came."""
    from twisted.internet import task

    marks = sorted(int(n) for n in os.environ.get(TRACE_ENV + "_AT", "").split(",") if n)

    def check() -> None:
        count = crawler.stats.get_value("response_received_count", 0)
        while marks and count >= marks[0]:
            dump_allocations(f"responses_{marks.pop(0)}")
        if not marks and loop.running:
            loop.stop()

    loop = task.LoopingCall(check)
    if marks:
        loop.start(1.0)


def start_urls(spec: BroadSpec, port: int, order: str, pages: int) -> Any:
    """The start list, generated (never held whole)."""
    if order == "host-major":
        for i in range(spec.hosts):
            for p in range(pages):
                yield f"http://{spec.host(i)}:{port}/p{p}"
    elif order == "page-major":
        for p in range(pages):
            for i in range(spec.hosts):
                yield f"http://{spec.host(i)}:{port}/p{p}"
    else:
        raise ValueError(f"order {order!r}")


class BroadSpider(scrapy.Spider):
    name = "broad"

    def __init__(self, job: dict[str, Any], marks: dict[str, float], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.marks = marks
        self.parsed = 0

    async def start(self) -> AsyncIterator[Any]:
        job = self.job
        urls = start_urls(BroadSpec(job["hosts"], job["ips"]), job["port"], job["order"],
                          job["pages"])
        self.marks["start_first"] = time.time()
        for url in urls:
            yield scrapy.Request(url)
        self.marks["start_done"] = time.time()
        self.marks["start_done_cpu"] = time.process_time()
        dump_allocations("start_done")
        if job.get("start_done_file"):
            with open(job["start_done_file"], "w", encoding="utf-8"):
                pass

    def parse(self, response: Response) -> None:
        """Nothing to extract: the bench judges the requests, not the items
        (``BENCH_BROAD_STALL``: every N-th response holds the loop)."""
        if STALL is not None:
            self.parsed += 1
            if self.parsed % STALL[0] == 0:
                time.sleep(STALL[1])


class _Timeline:
    """Every second: wall, CPU, responses, and the time the garbage collector held the
    loop by generation (``gc.callbacks``, wall and CPU), and every 5 s the objects it tracks
    (the heap a full collection walks): what a crawl's windows cost, from inside."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        self.rows: list[list[float]] = []
        self.gc_seconds = [0.0, 0.0, 0.0]
        self.gc_count = [0, 0, 0]
        self._gc_start = self._gc_cpu_start = 0.0
        self.gc_cpu = [0.0, 0.0, 0.0]  # the same in CPU seconds (a loaded machine's wall is not)
        self._heap = 0
        self._loop: Any = None
        self.pops = [0, 0]  # the engine's asks of the scheduler: answered, answered None
        self.probes: list[list[float]] = []  # see _probe

    def _count_pops(self) -> None:
        """Count the engine's asks of the scheduler (this crawl's instance only)."""
        scheduler = getattr(getattr(self.crawler.engine, "_slot", None), "scheduler", None)
        if scheduler is None:
            return
        ask = scheduler.next_request
        pops = self.pops

        def next_request() -> Any:
            request = ask()
            pops[request is None] += 1
            return request
        scheduler.next_request = next_request
        # robots.txt url -> [asked, reached the downloader, answered]
        self.robots_times: dict[str, list[float]] = {}
        try:
            from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
            robots = self.crawler.get_downloader_middleware(RobotsTxtMiddleware)
        except (RuntimeError, ImportError):
            return
        parser = robots.robot_parser
        times = self.robots_times

        def robot_parser(request: Any) -> Any:
            url = request.url.split("/", 3)
            times.setdefault("/".join(url[:3]) + "/robots.txt", [time.time(), 0.0, 0.0])
            return parser(request)
        robots.robot_parser = robot_parser

        def reached(request: Any, **kwargs: Any) -> None:
            if request.url in times:
                times[request.url][1] = time.time()

        def answered(response: Any, request: Any, **kwargs: Any) -> None:
            if request.url in times:
                times[request.url][2] = time.time()
        self._handlers = (reached, answered)  # signals hold weak references
        self.crawler.signals.connect(reached, signal=signals.request_reached_downloader)
        self.crawler.signals.connect(answered, signal=signals.response_received)

    def _probe(self) -> list[float]:
        """[downloader active, scheduler len, asks answered, asks None, CPU s, run-queue
        wait s, prefetch pending,
        prefetch in flight, hosts ahead waiting, pacing target]: what the crawl waits for."""
        engine = self.crawler.engine
        active = len(engine.downloader.active) if engine is not None else 0
        scheduler = getattr(getattr(engine, "_slot", None), "scheduler", None)
        queued = len(scheduler) if scheduler is not None else 0
        try:  # seconds on a CPU and waiting for one (runnable, not running): the machine's share
            with open("/proc/self/schedstat", encoding="ascii") as fh:
                ran, waited = (int(x) / 1e9 for x in fh.read().split()[:2])
        except OSError:
            ran = waited = 0.0
        row = [active, queued, *self.pops, ran, waited]
        try:
            from scrapy_politeness.middleware import PolitenessMiddleware
            prefetch = self.crawler.get_downloader_middleware(PolitenessMiddleware).robots_prefetch
        except (RuntimeError, AttributeError, ImportError):
            prefetch = None
        pacing = None if prefetch is None else prefetch._pacing
        if prefetch is None or pacing is None:
            return [*row, 0, 0, 0, 0]
        import asyncio
        now = asyncio.get_running_loop().time()
        return [*row, len(prefetch._pending), len(prefetch._tasks), len(pacing),
                pacing.target(now)]

    def start(self) -> None:
        """At ``engine_started``: the reactor is Scrapy's by then."""
        from twisted.internet import task

        gc.callbacks.append(self._gc)
        self._count_pops()
        self._loop = task.LoopingCall(self._sample)
        self._loop.start(1.0)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
            self._gc_cpu_start = time.process_time()
            return
        gen = info["generation"]
        self.gc_seconds[gen] += time.perf_counter() - self._gc_start
        self.gc_cpu[gen] += time.process_time() - self._gc_cpu_start
        self.gc_count[gen] += 1

    def _sample(self) -> None:
        stats = self.crawler.stats
        count = stats.get_value("response_received_count", 0) if stats is not None else 0
        if len(self.rows) % 5 == 0:  # objects the collector tracks (a few ms per 100k)
            self._heap = len(gc.get_objects())
        self.rows.append([time.time(), time.process_time(), count, *self.gc_seconds,
                          *self.gc_count, self._heap, *self.gc_cpu])
        self.probes.append(self._probe())

    def close(self) -> list[list[float]]:
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        return self.rows


def _plain(value: Any) -> Any:
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def main(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        job = json.load(fh)
    if job.get("nofile"):
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (job["nofile"], hard))
    frames = int(os.environ.get(TRACE_ENV + "_FRAMES", "6"))
    if os.environ.get(TRACE_ENV) and frames:
        tracemalloc.start(frames)
    marks: dict[str, float] = {"launch": time.time()}
    settings = {**BASE_SETTINGS, **job["settings"]}
    if _hold_setting() is not None:
        settings["DOWNLOADER_MIDDLEWARES"] = {**settings.get("DOWNLOADER_MIDDLEWARES", {}),
                                              "bench.broad_crawl.HoldAfterGate": 960}
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BroadSpider)
    idle_for = float(job.get("idle", 0.0))
    seen = {"count": -1, "since": 0.0}

    def started() -> None:
        marks["engine_started"], marks["engine_started_cpu"] = time.time(), time.process_time()
        if timeline is not None:
            timeline.start()
        if os.environ.get(TRACE_ENV):
            _dumps_at(crawler)

    def idle() -> None:
        """Keep the spider open until no response came for ``idle_for`` seconds."""
        assert crawler.stats is not None
        count = crawler.stats.get_value("response_received_count", 0)
        now = time.time()
        if count != seen["count"]:
            seen["count"], seen["since"] = count, now
            marks.setdefault("first_idle", now)
        if now - seen["since"] < idle_for:
            raise DontCloseSpider

    def closed() -> None:
        marks["closed"], marks["closed_cpu"] = time.time(), time.process_time()
        for mw in getattr(getattr(crawler.engine, "downloader", None), "middleware", None) \
                .middlewares if crawler.engine else ():
            slip = getattr(mw, "slip", None)
            if slip is not None:  # the plugin: sends moved while still unwritten
                marks["held_sends"] = getattr(slip, "held_sends", -1)
        dump_allocations("closed")

    timeline = _Timeline(crawler) if job.get("timeline") else None
    expected = job["hosts"] * (job["pages"] + 1)  # robots.txt and the pages
    profile = WindowedProfile.from_env(crawler, expected)
    if profile is not None:
        crawler.signals.connect(profile.check, signal=signals.response_received)
        crawler.signals.connect(profile.dump, signal=signals.spider_closed)
    crawler.signals.connect(started, signal=signals.engine_started)
    crawler.signals.connect(idle, signal=signals.spider_idle)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    mark_close(crawler, marks)
    process.crawl(crawler, job=job, marks=marks)
    process.start()
    marks["reactor_stopped"] = time.time()
    assert crawler.stats is not None
    result = {"stats": {k: _plain(v) for k, v in crawler.stats.get_stats().items()},
              "marks": marks,
              "queue": str(crawler.settings.get("SCHEDULER_PRIORITY_QUEUE")),
              "timeline": timeline.close() if timeline is not None else None,
              "probes": timeline.probes if timeline is not None else None,
              "robots_times": getattr(timeline, "robots_times", {})}
    with open(job["out"], "w", encoding="utf-8") as fh:
        json.dump(result, fh)
    with open(job["out"] + ".done", "w", encoding="utf-8") as fh:
        fh.write(repr(time.time()))  # after this: the interpreter's own exit


if __name__ == "__main__":
    main(sys.argv[1])
