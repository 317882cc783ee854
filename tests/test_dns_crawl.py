"""Real crawls against the farm's DNS server when DNS loses datagrams or fails.

A lost datagram must cost a retransmission, never a page (the farm's
``drop_first`` and ``drop`` modes); a name that does not resolve must end in
Scrapy's DNS error, retried by ``RetryMiddleware`` and logged on one line.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from crawling import farm_settings, run_crawl

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
