"""Three scrapy-redis processes on one Redis: the frontier queue vs the stock queue.

    .venv/bin/python -m bench.frontier [--quick] [--scenarios head-of-line,broad,shared-ip]
        [--queues frontier,stock-queue] [--batch N] [--breakdown]

Per scenario, side by side in one run, each on a fresh redis-server and farm:
``frontier`` (scrapy-redis's scheduler + the add-on, which picks
:class:`~scrapy_politeness.frontier.PolitenessFrontierQueue`) and ``stock-queue``
(the same, with ``SCHEDULER_QUEUE_CLASS = scrapy_redis.queue.PriorityQueue``:
the plugin's gate and Redis backend only). The processes run scrapy-redis's
shipped ``RedisSpider`` with its default batch (``CONCURRENT_REQUESTS``;
``--batch`` sets ``redis_batch_size``, e.g. 100000 as an extra case). Half the
URLs are pushed to its start URLs key, in the scenario's order, before the
crawl, the rest once the farm saw its first request. "share" is the smallest
fraction of the pages one process fetched. Judged on the farm's server-side
arrivals: wall / T*, host and IP violations, every URL fetched once.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from frontier_crawl import STOCK_QUEUE, CommandCounter, run_fleet, seed
from redis_server import RedisServer

from scrapy_politeness._sitefarm import Arrival, Farm

from .metrics import TOL, judge
from .scenarios import DOMAIN, Scenario, broad, head_of_line, shared_ip

DNS_TIMEOUT, RETRY_TIMES, MAX_IDLE = 1.0, 1, 1
# broad-dns: names that fail DNS (alternately time out and NXDOMAIN), seeded
# among the healthy ones; judged on the healthy pages only.
FAILING: dict[str, list[tuple[str, str]]] = {}


def broad_dns(quick: bool) -> Scenario:
    """``broad`` plus 30 % of all names failing DNS."""
    sc = broad(quick)
    n_bad = round(len(sc.spec["hosts"]) * 3 / 7)
    bad = {f"x{i:02d}.{DOMAIN}": {"ip": sc.spec["ips"][0], "pages": 2,
                                  "dns": {"mode": "timeout" if i % 2 else "nxdomain"}}
           for i in range(n_bad)}
    FAILING["broad-dns"] = [(h, f"/p/{n}") for n in range(2) for h in bad]
    return Scenario("broad-dns", sc.about + f", {n_bad} more names failing DNS",
                    {"ips": sc.spec["ips"], "hosts": {**sc.spec["hosts"], **bad}}, sc.urls,
                    interval=sc.interval, ip_floor=sc.ip_floor,
                    extra={"POLITENESS_DNS_TIMEOUT": DNS_TIMEOUT, "RETRY_TIMES": RETRY_TIMES})


SCENARIOS = {"head-of-line": head_of_line, "broad": broad, "shared-ip": shared_ip,
             "broad-dns": broad_dns}
CONFIGS = ("frontier", "stock-queue")


def settings_for(config: str, scenario: Scenario, farm: Farm, url: str) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "ADDONS": {"scrapy_politeness.Addon": 300}, "ROBOTSTXT_OBEY": False,
        "CONCURRENT_REQUESTS": scenario.concurrent_requests,
        "POLITENESS_DEFAULT": scenario.interval, "POLITENESS_FLOOR": scenario.interval,
        "POLITENESS_IP_FLOOR": scenario.ip_floor, "POLITENESS_DNS_NAMESERVERS": [farm.dns],
        "POLITENESS_BACKEND": url, "POLITENESS_NAMESPACE": f"bench:{uuid.uuid4().hex[:8]}",
        "REDIS_URL": url,
        "MAX_IDLE_TIME_BEFORE_CLOSE": MAX_IDLE, **scenario.extra}
    if config == "stock-queue":
        settings["SCHEDULER_QUEUE_CLASS"] = STOCK_QUEUE
    return settings


def _ms(gap: float | None) -> str:
    return "-" if gap is None else f"{gap * 1000:.0f}"


def script_names() -> dict[str, str]:
    """The plugin's scripts by their SHA1 (EVALSHA's first argument)."""
    import hashlib

    from scrapy_politeness.distributed.frontier import FRONTIER_SCRIPTS, frontier_script
    from scrapy_politeness.distributed.redis_backend import _SCRIPTS, _script

    sources = {f"frontier_{n}": frontier_script(n) for n in FRONTIER_SCRIPTS}
    sources.update({n: _script(n + ".lua") for n in _SCRIPTS})
    return {hashlib.sha1(src.encode()).hexdigest(): n for n, src in sources.items()}


def breakdown(name: str, counter: CommandCounter, requests: int) -> str:
    """Commands and script calls per request served, by name, most first."""
    per = max(requests, 1)
    names = script_names()
    commands = ", ".join(f"{c} {n / per:.2f}" for c, n in counter.counts.most_common())
    lines = [f"{name}: sent per request: {commands}"]
    inside = sum(counter.inner.values())
    lines.append(f"{name}: run inside scripts per request: {inside / per:.2f}")
    for sha, n in counter.shas.most_common():
        ran = Counter({c: k for (s, c), k in counter.inner.items() if s == sha})
        top = ", ".join(f"{c} {k / n:.1f}" for c, k in ran.most_common(8))
        lines.append(f"  {names.get(sha, sha[:8])}: {n / per:.2f} calls per request, "
                     f"{sum(ran.values()) / n:.1f} commands per call ({top})")
    lines.append("  frontier_pop calls per request by kind: "
                 + ", ".join(f"{k} {n / per:.2f}" for k, n in counter.pops.most_common()))
    for kind, calls in counter.pops.most_common():
        ran = Counter({c: k for (s, c), k in counter.pop_inner.items() if s == kind})
        lines.append(f"    {kind}: {sum(ran.values()) / calls:.1f} commands each: "
                     + ", ".join(f"{c} {k / calls:.2f}" for c, k in ran.most_common()))
    return "\n".join(lines)


def _booked(item: dict[str, Any] | None, arrived: float) -> str:
    """When the pop booked it, against when the server read it (one clock: monotonic)."""
    if not item:
        return "?"
    booked = item.get("booked")
    if not isinstance(booked, dict):
        return "not booked by the pop"
    return f"booked {(arrived - booked['at']) * 1000:+.0f} ms late"


def short_gaps(scenario: Scenario, arrivals: list[Arrival],
               by_url: dict[str, dict[str, Any]]) -> list[str]:
    """Every gap shorter than asked, readable: what, when after the first request, who."""
    ordered = sorted(arrivals, key=lambda a: a.t)
    if not ordered:
        return []
    out = []
    for attr, need_of in (("host", scenario.interval_of), ("ip", scenario.ip_spacing_of)):
        last: dict[str, Arrival] = {}
        for a in ordered:
            name = getattr(a, attr)
            prev = last.get(name)
            if prev is not None and a.t - prev.t < need_of(name) - TOL:
                one, two = by_url.get(f"{prev.host}{prev.path}"), by_url.get(f"{a.host}{a.path}")
                out.append(f"{attr} {name}: {prev.host}{prev.path} -> {a.host}{a.path} "
                           f"{(a.t - prev.t) * 1000:.0f} ms apart at "
                           f"t={a.t - ordered[0].t:.3f} s, processes "
                           f"{one and one['process']} ({_booked(one, prev.t)}) then "
                           f"{two and two['process']} ({_booked(two, a.t)})")
            last[name] = a
    return out


def run(scenario: Scenario, config: str, binary: str, batch: int | None = None,
        detail: bool = False) -> str:
    server = RedisServer(binary).start()
    try:
        with Farm(scenario.spec) as farm:
            pairs = list(scenario.urls)
            for i, bad in enumerate(FAILING.get(scenario.name, [])):  # spread among them
                pairs.insert(min(len(pairs), i * 3), bad)
            urls = [farm.url(h, p) for h, p in pairs]
            half = len(urls) // 2
            seed(server.url, urls[:half])

            def more(*_: Any) -> None:
                deadline = time.monotonic() + 60
                while not farm.arrivals() and time.monotonic() < deadline:
                    time.sleep(0.01)
                seed(server.url, urls[half:])

            counter = CommandCounter(server.url)
            fleet = run_fleet(settings_for(config, scenario, farm, server.url), timeout=300,
                              kill=more, batch=batch)
            sent = counter.stop()
            arrivals = [a for a in farm.arrivals() if a.path != "/robots.txt"]
            again = -1  # a second run on the same Redis: what it fetched
            if scenario.name in FAILING:
                run_fleet(settings_for(config, scenario, farm, server.url), timeout=120)
                again = len([a for a in farm.arrivals() if a.path != "/robots.txt"]) \
                    - len(arrivals)
    finally:
        server.stop()
    j = judge(scenario, arrivals)
    counts = Counter((a.host, a.path) for a in arrivals)
    twice = sum(n - 1 for n in counts.values())
    first: dict[str, float] = {}
    for a in sorted(arrivals, key=lambda a: a.t):
        first.setdefault(a.host, a.t)
    last_first = max(first.values()) - min(first.values()) if first else 0.0
    rebooked = sum(int(m) for log in fleet.logs
                   for m in re.findall(r"'politeness/frontier/rebooked': (\d+)", log))
    dispatched = max(j.requests, 1)
    scripts = (sent["EVALSHA"] + sent["EVAL"]) / dispatched
    commands = sum(sent.values()) / dispatched
    tail = fleet.ended - max(a.t for a in arrivals) if arrivals else 0.0
    ok = "ok" if fleet.codes == [0, 0, 0] else f"exit codes {fleet.codes}"
    got = [sum(int(m) for m in re.findall(r"'response_received_count': (\d+)", log))
           for log in fleet.logs]
    share = min(got) / max(sum(got), 1)
    closed = fleet.ended - min(a.t for a in arrivals) if arrivals else 0.0
    close_bound = j.bound * 1.10 + (RETRY_TIMES + 1) * DNS_TIMEOUT + MAX_IDLE + 2.0
    close = (f" closed {closed:.1f} s after the first fetch (bound {close_bound:.1f} s);"
             f" second run fetched {again}" if again >= 0 else "")
    if j.host_viol or j.ip_viol:  # which fetches, when, by which process
        by_url = {f"{urlsplit(i['url']).hostname}{urlsplit(i['url']).path}": i
                  for i in fleet.items}
        for gap in short_gaps(scenario, arrivals, by_url):
            print(f"  {scenario.name}/{config}: {gap}", file=sys.stderr)
    if detail:
        print(breakdown(f"{scenario.name}/{config}", counter, j.requests), file=sys.stderr)
        stats: Counter[str] = Counter()
        for log in fleet.logs:
            for name, n in re.findall(r"'politeness/(frontier/\w+)': (\d+)", log):
                stats[name] += int(n)
        print(f"  stats: {dict(stats)}", file=sys.stderr)
    return (f"| {scenario.name} | {config} | {j.requests} | {j.urls_ok}/{j.urls} | {twice} "
            f"| {j.host_viol} | {j.ip_viol} | {_ms(j.min_host_gap)} | {_ms(j.min_ip_gap)} "
            f"| {j.wall:.2f} | {j.bound:.2f} | {j.ratio:.2f} "
            f"| {last_first:.2f} | {rebooked} | {scripts:.2f} | {commands:.2f} | {tail:.1f} "
            f"| {share:.2f} | {ok}{close} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--queues", default=",".join(CONFIGS),
                        help="frontier, stock-queue or both (side by side)")
    parser.add_argument("--batch", type=int, default=None,
                        help="the spider's redis_batch_size (default: scrapy-redis's)")
    parser.add_argument("--breakdown", action="store_true",
                        help="also print commands and scripts per request by name (stderr)")
    args = parser.parse_args(argv)
    binary = shutil.which("redis-server")
    if binary is None:
        sys.exit("redis-server is not installed (apt-get install -y redis-server)")
    print("| scenario | queue | requests | URLs ok | fetched twice | host viol | IP viol "
          "| min host gap ms | min IP gap ms | wall s | T* s | wall/T* "
          "| last host's first start s | rebooked | scripts / request | commands / request "
          "| exit after last fetch s | share | processes |")
    print("| --- | --- |" + " ---: |" * 17 + " --- |")
    for name in args.scenarios.split(","):
        scenario = SCENARIOS[name](args.quick)
        for config in args.queues.split(","):
            print(run(scenario, config, binary, args.batch, args.breakdown), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
