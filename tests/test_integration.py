"""Real Scrapy crawls against the farm, judged by server-side arrival times.

Every crawl runs in its own process with the add-on enabled and the farm's
DNS server as the only way to resolve ``*.farm.test``. Gaps are measured by
the farm (first byte of each request), with a tolerance of at most 15 ms.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from crawling import farm_settings, run_crawl

from scrapy_politeness._sitefarm import Arrival, starts_by, violations

TOL = 0.015
GAPS: list[tuple[str, float, float]] = []  # (what, smallest gap seen, required): printed at the end


def assert_spacing(what: str, times: list[float], required: float) -> None:
    """No two consecutive starts closer than ``required - TOL``; remember the smallest."""
    ordered = sorted(times)
    if len(ordered) > 1:
        GAPS.append((what, min(b - a for a, b in pairwise(ordered)), required))
    assert not violations(ordered, required, TOL), what


def _by_host(arrivals: list[Arrival]) -> dict[str, list[Arrival]]:
    groups: dict[str, list[Arrival]] = {}
    for a in sorted(arrivals, key=lambda a: a.t):
        groups.setdefault(a.host, []).append(a)
    return groups


def _ip_rule_violations(arrivals: list[Arrival], interval_of: dict[str, float],
                        ip_floor: float) -> list[tuple[Arrival, Arrival, float]]:
    """Consecutive starts on one IP closer than max(ip_floor, interval of the earlier host)."""
    bad = []
    by_ip: dict[str, list[Arrival]] = {}
    for a in sorted(arrivals, key=lambda a: a.t):
        by_ip.setdefault(a.ip, []).append(a)
    for seq in by_ip.values():
        for first, second in pairwise(seq):
            need = max(ip_floor, interval_of[first.host])
            GAPS.append((f"IP {first.ip} after {first.host}", second.t - first.t, need))
            if second.t - first.t < need - TOL:
                bad.append((first, second, need))
    return bad


@pytest.mark.parametrize("model", ["decoupled", "coupled"])
def test_host_and_ip_buckets_hold_with_shared_ips_and_slow_host(farm_factory: Any,
                                                                model: str) -> None:
    """Coupled, a start spaces its IP by its host's interval (b's 0.6 s);
    decoupled (the default), by the IP's own interval, the IP floor here."""
    spec = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        "a.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 6},
        "b.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 6},
        "c.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 6},
        "slow.farm.test": {"ip": "127.0.0.3", "kind": "slow", "latency": 0.7, "pages": 8},
    }}
    farm = farm_factory(spec)
    interval = {"a.farm.test": 0.3, "b.farm.test": 0.6, "c.farm.test": 0.3,
                "slow.farm.test": 0.3}
    result = run_crawl(
        [farm.url(h) for h in spec["hosts"]],
        farm_settings(farm, POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3,
                      POLITENESS_IP_FLOOR=0.3, POLITENESS_LATENCY_RISE=100.0,
                      POLITENESS_HOSTS={"b.farm.test": {"floor": 0.6}},
                      POLITENESS_IP_MODEL=model),
    )
    arrivals = farm.arrivals()
    assert len(arrivals) == 4 + 6 * 3 + 8
    assert result.stat("politeness/dispatched") == len(arrivals)
    # The connection went to the IP the plugin resolved, for every request.
    for a in arrivals:
        assert a.ip == spec["hosts"][a.host]["ip"], a
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        assert_spacing(f"shared-ip host {host}", times, interval[host])
    ip_spacing = interval if model == "coupled" else dict.fromkeys(interval, 0.3)
    assert not _ip_rule_violations(arrivals, ip_spacing, 0.3)
    # The slow host had several fetches in flight at once and still kept its spacing.
    slow = [a.t for a in arrivals if a.host == "slow.farm.test"]
    assert any(b - a < 0.7 for a, b in pairwise(sorted(slow)))


def test_retry_after_window_is_respected(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "limited.farm.test": {"ip": "127.0.0.2", "kind": "rate_limited",
                              "rate_interval": 0.8, "retry_after": 2, "pages": 5},
    }}
    farm = farm_factory(spec)
    result = run_crawl([farm.url("limited.farm.test")],
                       farm_settings(farm, POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3))
    arrivals = _by_host(farm.arrivals())["limited.farm.test"]
    throttled = [a for a in arrivals if a.status == 429]
    assert throttled, "the farm never rate-limited: the test proves nothing"
    for first, second in pairwise(arrivals):
        if first.status == 429:
            GAPS.append(("after a 429 with Retry-After 2", second.t - first.t, 2.0))
            assert second.t - first.t >= 2 - TOL, (first, second)
    assert result.stat("politeness/retry_after") == len(throttled)
    assert result.stat("politeness/backoff/429") == len(throttled)
    # Everything was fetched in the end: the backoff slowed the crawl, lost nothing.
    assert {a.path for a in arrivals if a.status == 200} == {"/"} | {f"/p/{i}" for i in range(5)}


def test_crawl_delay_spaces_the_first_fetch_after_robots_txt(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "polite.farm.test": {"ip": "127.0.0.2", "kind": "normal", "crawl_delay": 1.2,
                             "pages": 3},
    }}
    farm = farm_factory(spec)
    result = run_crawl([farm.url("polite.farm.test")],
                       farm_settings(farm, ROBOTSTXT_OBEY=True, POLITENESS_DEFAULT=0.3,
                                     POLITENESS_FLOOR=0.3))
    arrivals = _by_host(farm.arrivals())["polite.farm.test"]
    assert [a.path for a in arrivals][:2] == ["/robots.txt", "/"]
    assert len(arrivals) == 5
    assert_spacing("crawl-delay host (robots.txt included)", [a.t for a in arrivals], 1.2)
    assert result.stat("politeness/crawl_delay_hosts") == 1


def test_dead_host_is_dropped_early(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "broken.farm.test": {"ip": "127.0.0.2", "kind": "always_503", "pages": 10},
    }}
    farm = farm_factory(spec)
    urls = [farm.url("broken.farm.test", f"/p/{i}") for i in range(10)]
    result = run_crawl(urls, farm_settings(
        farm, POLITENESS_DEFAULT=0.2, POLITENESS_FLOOR=0.1, POLITENESS_CEILING=0.8,
        POLITENESS_DEAD_AFTER=2, POLITENESS_ON_CEILING="dead"), follow=False)
    arrivals = farm.arrivals()
    # 0.2 -> 0.4 -> 0.8 (ceiling, streak 1) -> 0.8 (streak 2: dead). Without the
    # plugin the 10 URLs with 2 retries each would hit the server 30 times.
    assert len(arrivals) <= 5
    assert result.stat("politeness/dead_hosts") == 1
    assert result.stat("politeness/dropped/dead") >= 10 - len(arrivals)
    assert len(re.findall(r"Host broken\.farm\.test declared dead", result.log)) == 1


def test_retry_after_above_max_parks_the_host(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "sleepy.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 6,
                             "status_script": [503] * 20, "retry_after_header": "3600"},
    }}
    farm = farm_factory(spec)
    urls = [farm.url("sleepy.farm.test", f"/p/{i}") for i in range(6)]
    result = run_crawl(urls, farm_settings(farm, POLITENESS_MAX_RETRY_AFTER=30,
                                           POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3),
                       follow=False)
    assert len(farm.arrivals()) == 1
    assert result.stat("politeness/dropped/parked") >= 5
    assert "above POLITENESS_MAX_RETRY_AFTER=30s" in result.log
    assert result.stat("finish_reason") == "finished"


def test_cache_hits_are_neither_delayed_nor_counted(farm_factory: Any, tmp_path: Path) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "cached.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 5},
    }}
    farm = farm_factory(spec)
    settings = farm_settings(farm, POLITENESS_DEFAULT=2.0, POLITENESS_FLOOR=2.0,
                             HTTPCACHE_ENABLED=True, HTTPCACHE_DIR=str(tmp_path / "cache"))
    first = run_crawl([farm.url("cached.farm.test")], settings)
    assert first.stat("politeness/dispatched") == 6
    farm.reset()
    second = run_crawl([farm.url("cached.farm.test")], settings)
    assert farm.arrivals() == []
    assert second.stat("httpcache/hit") == 6
    assert second.stat("politeness/dispatched") == 0
    assert second.stat("politeness/waits") == 0
    # Six pages at a 2 s interval took >= 10 s live; from the cache they are not spaced.
    assert all(item["waited"] is None for item in second.items)


@pytest.mark.parametrize("queue", ["politeness", "scrapy"])
def test_closing_with_requests_waiting_finishes_promptly(farm_factory: Any, queue: str) -> None:
    """With the plugin's queue, requests wait in the scheduler; with Scrapy's default
    queue they wait in the gate, which drops them as soon as the engine closes."""
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "big.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 40},
    }}
    farm = farm_factory(spec)
    urls = [farm.url("big.farm.test", f"/p/{i}") for i in range(40)]
    extra = {} if queue == "politeness" else {
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"}
    # 40 URLs 5 s apart would take over 3 minutes: the subprocess timeout is the hang guard.
    result = run_crawl(urls, farm_settings(farm, POLITENESS_DEFAULT=5.0, POLITENESS_FLOOR=5.0,
                                           CLOSESPIDER_TIMEOUT=1.5, **extra), follow=False,
                       timeout=60)
    assert result.stat("finish_reason") == "closespider_timeout"
    if queue == "politeness":
        assert result.stat("scheduler/enqueued") - result.stat("scheduler/dequeued") >= 10
        assert result.stat("politeness/dropped/closing") == 0
    else:
        assert result.stat("politeness/dropped/closing") >= 10
    assert len(farm.arrivals()) == 1


def test_a_name_that_does_not_resolve_fails_at_once_with_a_dns_error(
        farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "ok.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 1},
        "nodns.farm.test": {"ip": "127.0.0.2", "kind": "normal", "dns": {"mode": "servfail"}},
    }}
    farm = farm_factory(spec)
    result = run_crawl([farm.url("ok.farm.test"), farm.url("nodns.farm.test")],
                       farm_settings(farm, RETRY_ENABLED=False), errback=True)
    errors = [item for item in result.items if "error" in item]
    assert errors == [{"url": farm.url("nodns.farm.test"), "error": "NameNotResolvedError",
                       "dns_error": True}]  # the errback saw Twisted's DNSLookupError
    assert result.stat("politeness/dns/servfail") == 1
    assert result.stat("politeness/dispatched") == 2  # the failing name never reached the gate
    assert not [k for k in result.stats if k.startswith("politeness/backoff/")]
    assert {a.host for a in farm.arrivals()} == {"ok.farm.test"}


def test_a_crawl_where_30_percent_of_names_fail_dns_closes_promptly(farm_factory: Any) -> None:
    """7 healthy hosts (2 per IP), 3 names failing DNS three ways, Scrapy's default retries.

    The crawl must close, not stall in back-off: the closing time is checked
    against a deliberately generous bound (a stall check, not a speed target;
    the ratio against stock Scrapy is measured in bench/, scenario dns_faults).
    """
    interval, pages, dns_timeout = 0.3, 4, 1.0
    ips = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    hosts: dict[str, Any] = {
        f"h{n}.farm.test": {"ip": ips[n // 2], "kind": "normal", "pages": pages}
        for n in range(7)}
    failing = {"nx.farm.test": "nxdomain", "sf.farm.test": "servfail", "to.farm.test": "timeout"}
    for host, mode in failing.items():
        hosts[host] = {"ip": "127.0.0.2", "kind": "normal", "dns": {"mode": mode}}
    farm = farm_factory({"ips": ips, "dns_negative_ttl": 30, "hosts": hosts})
    result = run_crawl(
        [farm.url(h) for h in hosts],
        farm_settings(farm, POLITENESS_DEFAULT=interval, POLITENESS_FLOOR=interval,
                      POLITENESS_IP_FLOOR=interval, POLITENESS_DNS_TIMEOUT=dns_timeout),
        errback=True)
    # Every healthy page fetched, politely; nothing of the failing names reached a server.
    arrivals = farm.arrivals()
    healthy = [h for h in hosts if h not in failing]
    assert sorted({a.host for a in arrivals}) == sorted(healthy)
    for host, starts in _by_host(arrivals).items():
        assert len(starts) == pages + 1, host
        assert_spacing(f"host {host} (dns faults)", [a.t for a in starts], interval)
    for ip in ips:
        assert_spacing(f"IP {ip} (dns faults)", [a.t for a in arrivals if a.ip == ip], interval)
    # Each failing request ended in Scrapy's DNS error after its retries, seen by the errback.
    errors = [item for item in result.items if "error" in item]
    assert sorted(e["url"] for e in errors) == sorted(farm.url(h) for h in failing)
    assert all(e["dns_error"] for e in errors)
    assert result.stat("retry/count") == 2 * len(failing)
    assert result.stat("politeness/dns/nxdomain") == 3
    assert result.stat("politeness/dns/servfail") == 3
    assert result.stat("politeness/dns/timeout") == 3
    # The queue resolved each name while its first request waited there, and asked
    # again for each retry after SERVFAIL or a timeout (transient; NXDOMAIN is the
    # zone's answer), so every attempt failed from the cache, at once, in the middleware.
    assert result.stat("politeness/dns/from_negative_cache") == 3 * 3
    queries = farm.dns_queries()
    assert queries["nx.farm.test"] == 1
    assert queries["sf.farm.test"] == 3
    assert queries["to.farm.test"] >= 2 * 3  # each of the 3 lookups sent its query again
    # No host backed off because of DNS.
    assert not [k for k in result.stats if k.startswith("politeness/backoff/")]
    limit = (2 * (pages + 1) - 1) * interval  # two hosts' starts on one IP, back to back
    bound = limit * 1.10 + (2 + 1) * dns_timeout + 2.0  # RETRY_TIMES = 2
    assert result.stat("elapsed_time_seconds") < 3 * bound  # stalled crawls took > 120 s


def test_a_bad_setting_stops_the_crawl_naming_setting_and_value(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {"x.farm.test": {"ip": "127.0.0.2"}}}
    farm = farm_factory(spec)
    result = run_crawl([farm.url("x.farm.test")], farm_settings(farm, POLITENESS_BACKOFF=0.5),
                       check=False)
    assert "POLITENESS_BACKOFF must be >= 1, got 0.5" in result.log
    assert farm.arrivals() == []


def test_domain_grouping_shares_one_budget_across_subdomains(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        "a.example.co.uk": {"ip": "127.0.0.2", "kind": "normal", "pages": 4},
        "b.example.co.uk": {"ip": "127.0.0.3", "kind": "normal", "pages": 4},
    }}
    farm = farm_factory(spec)
    run_crawl([farm.url(h) for h in spec["hosts"]],
              farm_settings(farm, POLITENESS_HOST_GROUPING="domain",
                            POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3))
    arrivals = farm.arrivals()
    assert len(arrivals) == 10
    # Two IPs, yet one budget: every start of the group 0.3 s from the previous one.
    assert_spacing("domain group example.co.uk", [a.t for a in arrivals], 0.3)


def test_exempt_network_has_no_ip_bucket_but_hosts_keep_theirs(farm_factory: Any) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        f"v{i}.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 3} for i in range(4)
    }}
    farm = farm_factory(spec)
    run_crawl([farm.url(h) for h in spec["hosts"]],
              farm_settings(farm, POLITENESS_IP_EXEMPT=["127.0.0.2/32"],
                            POLITENESS_DEFAULT=0.5, POLITENESS_FLOOR=0.5))
    arrivals = farm.arrivals()
    assert len(arrivals) == 16
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        assert_spacing(f"exempt-ip host {host}", times, 0.5)
    # The CDN-style exemption is real: starts on the shared IP come closer than 0.5 s.
    ip_times = sorted(a.t for a in arrivals)
    assert min(b - a for a, b in pairwise(ip_times)) < 0.2
