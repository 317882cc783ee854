"""The DNS benchmarks: names that fail (dns-faults), datagrams lost (dns-loss).

dns-faults: healthy hosts (two per IP) plus names that answer NXDOMAIN,
SERVFAIL or nothing at all (the DNS timeout), Scrapy's default retries. The
target: the crawl closes within ``T* x 1.10 + (RETRY_TIMES + 1) x DNS timeout
+ 2 s`` (T*: the healthy hosts' politeness limit), with 0 violations on the
healthy hosts and every healthy page fetched. Stock Scrapy
(``DOWNLOAD_DELAY``, its own DNS over the same answers) runs side by side.

dns-loss: the same healthy hosts, every name healthy, the farm's DNS losing
UDP queries: the first query of 6 of the 16 names (``drop_first``), then 30 %
of all queries at random (``drop``, seeded). The target: every page fetched,
no traceback in the crawl's log, closed within ``T* x 1.10 + one DNS
timeout``, 0 host and 0 IP violations.
"""

from __future__ import annotations

from typing import Any

from scrapy_politeness._sitefarm import Farm

from .metrics import judge
from .runner import ADDON, STATIC_RESOLVER, progress, run_crawl
from .scenarios import DOMAIN, Scenario

LOSSES = (("drop-first 6/16", 6, {"mode": "drop_first"}),
          ("drop 30 %", 16, {"mode": "drop", "fraction": 0.3}))

RETRY_TIMES = 2  # Scrapy's default
CONFIGS = ("plugin", "delay")


def scenario(quick: bool) -> tuple[Scenario, dict[str, str], float]:
    """(the healthy hosts' scenario, failing name -> DNS mode, DNS timeout)."""
    n_ips, pages = (4, 4) if quick else (12, 16)
    ips = [f"127.0.0.{2 + i}" for i in range(n_ips)]
    healthy: dict[str, Any] = {
        f"h{i:02d}.{DOMAIN}": {"ip": ips[i // 2], "kind": "normal", "pages": pages}
        for i in range(2 * n_ips - (1 if quick else 0))}
    modes = (["nxdomain", "servfail", "timeout"] if quick
             else ["nxdomain"] * 6 + ["servfail"] * 2 + ["timeout"] * 2)
    failing = {f"x{i:02d}.{DOMAIN}": mode for i, mode in enumerate(modes)}
    urls = [(h, f"/p/{p}") for p in range(pages) for h in healthy]
    about = (f"{len(healthy)} healthy hosts (2 per IP) x {pages} URLs, and {len(failing)} names "
             f"failing DNS ({', '.join(sorted(set(modes)))}) x 2 URLs")
    s = Scenario("dns-faults", about, {"ips": ips, "hosts": healthy}, urls,
                 interval=0.5, ip_floor=0.25)
    return s, failing, 2.0


def run_dns_faults(quick: bool) -> list[str]:
    healthy, failing, dns_timeout = scenario(quick)
    spec = {**healthy.spec, "dns_negative_ttl": 60, "hosts": {
        **healthy.spec["hosts"],
        **{h: {"ip": healthy.spec["ips"][0], "kind": "normal", "dns": {"mode": m}}
           for h, m in failing.items()}}}
    limit, what = healthy.lower_bound()
    bound = limit * 1.10 + (RETRY_TIMES + 1) * dns_timeout + 2.0
    rows = []
    with Farm(spec) as farm:
        urls = [farm.url(h, p) for h, p in healthy.urls]
        bad = [farm.url(h, f"/p/{n}") for h in failing for n in range(2)]
        all_urls = [u for pair in zip(urls, bad, strict=False) for u in pair]
        all_urls += urls[len(bad):]
        for config in CONFIGS:
            farm.reset()
            progress(f"dns-faults: {config} ({len(urls)} healthy + {len(bad)} failing URLs, "
                     f"bound {bound:.2f} s)")
            settings: dict[str, Any] = {"CONCURRENT_REQUESTS": 16, "DNS_TIMEOUT": dns_timeout}
            static = None
            if config == "plugin":
                settings.update(ADDONS=ADDON, POLITENESS_DEFAULT=healthy.interval,
                                POLITENESS_FLOOR=healthy.interval,
                                POLITENESS_IP_FLOOR=healthy.ip_floor,
                                POLITENESS_DNS_TIMEOUT=dns_timeout,
                                POLITENESS_DNS_NAMESERVERS=[farm.dns])
            else:  # stock: the same answers through Scrapy's own resolver path
                settings.update(TWISTED_DNS_RESOLVER=STATIC_RESOLVER,
                                DOWNLOAD_DELAY=healthy.interval, DOWNLOAD_DELAY_JITTER=0)
                static = dict(healthy.host_ip())
                static.update({h: f"timeout:{dns_timeout:g}"
                               for h, m in failing.items() if m == "timeout"})
            run = run_crawl(all_urls, settings, static_hosts=static, timeout=300.0)
            if not run.ok:
                progress(f"  FAILED: {run.error[-300:]}")
                rows.append(f"| {config} | crawl failed | | | | | | | | |")
                continue
            stats = run.result["stats"]
            j = judge(healthy, [a for a in farm.arrivals() if a.host not in failing])
            dns_errors = sum(v for k, v in stats.items()
                             if k.startswith("downloader/exception_type_count/")
                             and any(n in k for n in ("DNSLookup", "NotResolved", "Resolve")))
            causes = {k.rsplit("/", 1)[1]: v for k, v in stats.items()
                      if k.startswith("politeness/backoff/")}
            backoffs = f"{sum(causes.values())}" + (
                " (" + ", ".join(f"{c} {n}" for c, n in sorted(causes.items())) + ")"
                if causes else "")
            wall = float(run.result["crawl_wall"])
            progress(f"  closed after {wall:.2f} s (bound {bound:.2f} s), host/IP violations "
                     f"{j.host_viol}/{j.ip_viol}, healthy URLs {j.urls_ok}/{j.urls}, "
                     f"backoffs {backoffs}")
            rows.append(
                f"| {config} | {wall:.2f} | {bound:.2f} | {wall / bound:.2f} | {j.host_viol} "
                f"| {j.ip_viol} | {j.urls_ok}/{j.urls} | {dns_errors} "
                f"| {stats.get('retry/max_reached', 0)} | {backoffs} |")
    return [
        "## DNS faults", "",
        f"{healthy.about}; DNS timeout {dns_timeout:g} s, RETRY_TIMES={RETRY_TIMES}, "
        f"target interval {healthy.interval:g} s, IP floor {healthy.ip_floor:g} s. "
        f"T* (healthy hosts) = {limit:.2f} s (set by {what}); bound = T* x 1.10 + "
        f"{RETRY_TIMES + 1} x {dns_timeout:g} s + 2 s = **{bound:.2f} s**. *closed*: engine "
        "start to spider_closed.", "",
        "| config | closed s | bound s | closed/bound | host viol. | IP viol. | healthy URLs 200 "
        "| DNS errors | gave up | backoffs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows, "",
    ]


def _lossy(quick: bool) -> tuple[Scenario, float]:
    """(16 healthy hosts, 2 per IP, 16 pages each; the DNS timeout)."""
    n_ips, pages = (4, 4) if quick else (8, 16)
    ips = [f"127.0.0.{2 + i}" for i in range(n_ips)]
    hosts: dict[str, Any] = {f"h{i:02d}.{DOMAIN}": {"ip": ips[i // 2], "pages": pages}
                             for i in range(2 * n_ips)}
    urls = [(h, f"/p/{p}") for p in range(pages) for h in hosts]
    about = f"{len(hosts)} hosts (2 per IP) x {pages} URLs"
    return Scenario("dns-loss", about, {"ips": ips, "hosts": hosts}, urls, interval=0.5,
                    ip_floor=0.25), 2.0


def run_dns_loss(quick: bool) -> list[str]:
    healthy, dns_timeout = _lossy(quick)
    limit, what = healthy.lower_bound()
    bound = limit * 1.10 + dns_timeout
    rows = []
    for label, lossy, fault in LOSSES:
        names = list(healthy.spec["hosts"])
        spec = {**healthy.spec, "dns_seed": 1, "hosts": {
            h: {**raw, "dns": fault} if names.index(h) < lossy else raw
            for h, raw in healthy.spec["hosts"].items()}}
        with Farm(spec) as farm:
            urls = [farm.url(h, p) for h, p in healthy.urls]
            progress(f"dns-loss: {label} ({len(urls)} URLs, bound {bound:.2f} s)")
            settings: dict[str, Any] = {
                "CONCURRENT_REQUESTS": 16, "ADDONS": ADDON,
                "POLITENESS_DEFAULT": healthy.interval, "POLITENESS_FLOOR": healthy.interval,
                "POLITENESS_IP_FLOOR": healthy.ip_floor, "POLITENESS_DNS_TIMEOUT": dns_timeout,
                "POLITENESS_DNS_NAMESERVERS": [farm.dns]}
            run = run_crawl(urls, settings, timeout=300.0)
            dropped = sum(farm.dns_dropped().values())
            asked = sum(farm.dns_queries().values())
            if not run.ok:
                progress(f"  FAILED: {run.error[-300:]}")
                rows.append(f"| {label} | crawl failed | | | | | | | |")
                continue
            j = judge(healthy, farm.arrivals())
        stats = run.result["stats"]
        wall = float(run.result["crawl_wall"])
        tracebacks = run.log.count("Traceback")
        progress(f"  closed after {wall:.2f} s (bound {bound:.2f} s), URLs {j.urls_ok}/{j.urls}, "
                 f"violations {j.host_viol}/{j.ip_viol}, DNS queries lost {dropped}/{asked}, "
                 f"tracebacks {tracebacks}")
        rows.append(
            f"| {label} | {dropped}/{asked} | {wall:.2f} | {bound:.2f} | {wall / bound:.2f} "
            f"| {j.urls_ok}/{j.urls} | {j.host_viol} | {j.ip_viol} "
            f"| {stats.get('retry/count', 0)} | {tracebacks} |")
    return [
        "## DNS losing datagrams", "",
        f"{healthy.about}; every name healthy, the farm's DNS losing UDP queries; DNS timeout "
        f"{dns_timeout:g} s (a query unanswered for a quarter of it is sent again), target "
        f"interval {healthy.interval:g} s, IP floor {healthy.ip_floor:g} s. T* = {limit:.2f} s "
        f"(set by {what}); bound = T* x 1.10 + one DNS timeout = **{bound:.2f} s**. *closed*: "
        "engine start to spider_closed.", "",
        "| DNS loss | queries lost/sent | closed s | bound s | closed/bound | URLs 200 "
        "| host viol. | IP viol. | retries | tracebacks |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows, "",
    ]
