"""Real crawls against the farm's DNS server when DNS loses datagrams or fails.

A lost datagram must cost a retransmission, never a page (the farm's
``drop_first`` and ``drop`` modes); a name that does not resolve must end in
Scrapy's DNS error, retried by ``RetryMiddleware`` and logged on one line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from crawling import farm_settings, run_crawl
from test_integration import TOL

from scrapy_politeness._sitefarm import starts_by, violations

pytestmark = pytest.mark.integration

PAGES = 3
IPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def _spec(dns: dict[str, Any], names: int) -> dict[str, Any]:
    return {"ips": IPS, "dns_seed": 7, "hosts": {
        f"h{i:02d}.farm.test": {"ip": IPS[i % len(IPS)], "pages": PAGES, "dns": dns}
        for i in range(names)}}


@pytest.mark.parametrize(("dns", "names"), [
    ({"mode": "drop_first"}, 6),
    ({"mode": "drop", "fraction": 0.3}, 12),
], ids=["drop-first", "drop-30%"])
def test_every_page_is_fetched_when_dns_loses_datagrams(farm_factory: Any, dns: dict[str, Any],
                                                        names: int) -> None:
    farm = farm_factory(_spec(dns, names))
    hosts = [f"h{i:02d}.farm.test" for i in range(names)]
    urls = [farm.url(h, f"/p/{p}") for h in hosts for p in range(PAGES)]
    result = run_crawl(urls, farm_settings(farm, POLITENESS_DEFAULT=0.1, POLITENESS_FLOOR=0.1,
                                           POLITENESS_IP_FLOOR=0.05,
                                           POLITENESS_DNS_TIMEOUT=1.0),
                       follow=False)
    fetched = {(a.host, a.path) for a in farm.arrivals()}
    assert fetched == {(h, f"/p/{p}") for h in hosts for p in range(PAGES)}
    assert sum(farm.dns_dropped().values()) >= (names if dns["mode"] == "drop_first" else 1)
    assert result.stat("downloader/response_status_count/200") == len(urls)
    # Retransmitted inside the lookup, not retried by Scrapy: without the
    # retransmission every page would still come (RetryMiddleware asks again),
    # but only after a failed lookup and a retried request.
    assert result.stat("politeness/dns/failures") == 0
    assert result.stat("politeness/dns/timeout") == 0
    assert result.stat("retry/count") == 0
    assert "Traceback" not in result.log


def test_failing_names_log_one_line_each_and_no_traceback(farm_factory: Any) -> None:
    """NXDOMAIN, SERVFAIL and a silent server, with Scrapy's retries and
    robots.txt obeyed: each name ends in Scrapy's DNS error, one line per
    request given up, like a download error without a traceback."""
    failing = {"nx.farm.test": "nxdomain", "sf.farm.test": "servfail",
               "to.farm.test": "timeout"}
    hosts: dict[str, Any] = {"ok.farm.test": {"ip": IPS[0], "pages": 1}}
    hosts.update({h: {"ip": IPS[0], "dns": {"mode": m}} for h, m in failing.items()})
    farm = farm_factory({"ips": IPS, "hosts": hosts})
    result = run_crawl([farm.url(h) for h in hosts],
                       farm_settings(farm, ROBOTSTXT_OBEY=True, POLITENESS_DNS_TIMEOUT=0.4))
    log = result.log
    assert "Traceback" not in log
    for host in failing:
        url = re.escape(farm.url(host))
        assert re.search(rf"Gave up retrying <GET {url}> \(failed 3 times\): DNS lookup failed",
                         log), host
        line = re.search(rf"ERROR: Error downloading <GET {url}>: (.*)\n", log)
        assert line is not None, host
        assert "DNS lookup failed" in line.group(1)
    assert result.stat("retry/max_reached") == 2 * len(failing)  # each page and its robots.txt
    assert result.stat("downloader/response_status_count/200") >= 1


DEAD = "127.0.0.61"  # a loopback address nothing listens on: connections are refused
INTERVAL, IP_FLOOR = 0.3, 0.2


def _paced(farm: Any, **extra: Any) -> dict[str, Any]:
    return farm_settings(farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
                         POLITENESS_IP_FLOOR=IP_FLOOR, POLITENESS_LATENCY_RISE=100.0, **extra)


def _assert_fetched_politely(farm: Any, result: Any, paths: set[tuple[str, str]]) -> None:
    arrivals = farm.arrivals()
    assert {(a.host, a.path) for a in arrivals} >= paths, result.log[-3000:]
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        assert not violations(times, INTERVAL, TOL), f"host {host}"
    for ip, times in starts_by(arrivals, lambda a: a.ip).items():
        assert not violations(times, IP_FLOOR, TOL), f"IP {ip}"
    assert not [k for k in result.stats if k.startswith("politeness/backoff/")], result.stats
    assert result.stat("politeness/dead_hosts") == 0
    assert "Traceback" not in result.log


def test_a_name_with_one_dead_address_is_fetched_at_the_live_one(farm_factory: Any) -> None:
    """The name's answer lists an address that refuses connections first: each
    request that met it goes to the next address (its own IP bucket) instead
    of backing the host off, as the system's connect loop would."""
    farm = farm_factory({"ips": IPS, "hosts": {
        "two.farm.test": {"ip": IPS[1], "pages": PAGES,
                          "dns": {"mode": "several", "ips": [DEAD, IPS[1]]}},
        "other.farm.test": {"ip": IPS[1], "pages": PAGES}}})
    urls = [farm.url(h, f"/p/{p}") for h in ("two.farm.test", "other.farm.test")
            for p in range(PAGES)]
    result = run_crawl(urls, _paced(farm), follow=False)
    _assert_fetched_politely(farm, result, {(h, f"/p/{p}") for h in ("two.farm.test",
                                                                     "other.farm.test")
                                            for p in range(PAGES)})
    assert {a.ip for a in farm.arrivals() if a.host == "two.farm.test"} == {IPS[1]}
    assert result.stat("politeness/dns/address_fallback") >= 1, (
        {k: v for k, v in result.stats.items() if "/" in k}, result.log[-4000:])
    assert result.stat("downloader/response_status_count/200") == len(urls)


def test_every_address_of_a_hosts_file_name_is_tried(farm_factory: Any, tmp_path: Path) -> None:
    """Two IPv4 addresses that refuse, then the IPv6 one the farm listens on:
    the page is fetched there, after one fallback per dead address."""
    farm = farm_factory({"ips": [IPS[0], "::1"], "hosts": {
        "multi.test": {"ip": "::1", "pages": PAGES}}})
    hosts = tmp_path / "hosts"
    hosts.write_text(f"::1 multi.test\n{DEAD} multi.test\n127.0.0.62 multi.test\n")
    result = run_crawl([farm.url("multi.test", "/p/0")],
                       _paced(farm, POLITENESS_DNS_HOSTS_FILE=str(hosts)), follow=False)
    _assert_fetched_politely(farm, result, {("multi.test", "/p/0")})
    assert [a.ip for a in farm.arrivals()] == ["::1"]
    assert result.stat("politeness/dns/address_fallback") == 2


def test_a_single_label_name_resolves_with_the_search_list(farm_factory: Any,
                                                           tmp_path: Path) -> None:
    """``search farm.test`` in a resolv.conf: ``intranet`` has fewer dots than
    ndots (1), so getaddrinfo asks intranet.farm.test first (127.0.0.3), not
    the bare name (which the farm answers with 127.0.0.2)."""
    farm = farm_factory({"ips": IPS, "hosts": {
        "intranet": {"ip": IPS[0], "pages": PAGES},
        "intranet.farm.test": {"ip": IPS[1], "pages": 0}}})
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 192.0.2.1\nsearch farm.test\noptions ndots:1\n")
    result = run_crawl([farm.url("intranet", f"/p/{p}") for p in range(PAGES)],
                       _paced(farm, POLITENESS_DNS_RESOLV_CONF=str(conf)), follow=False)
    _assert_fetched_politely(farm, result, {("intranet", f"/p/{p}") for p in range(PAGES)})
    assert {a.ip for a in farm.arrivals()} == {IPS[1]}
    assert farm.dns_queries().get("intranet", 0) == 0
