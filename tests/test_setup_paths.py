"""Every way a user sets the plugin up keeps both rules, judged by the farm.

Scrapy's own throttles (``DOWNLOAD_DELAY``, a ``DOWNLOAD_SLOTS`` delay,
AutoThrottle, a spider's ``download_delay``) delay a request inside Scrapy's
downloader, after the politeness gate released it: two hosts on one IP then
reach the server closer than the IP rule. On 18 hosts on 6 IPs, 3 hosts per
IP, each host at 0.5 s: the IPs are the bottleneck, so a request held back
there lands next to another host's start. Each set-up path crawls the farm
with 0 host and 0 IP gaps under the rule (first byte at the server, 15 ms
tolerance), every page fetched, and the setting named in a warning.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from crawling import ADDON, run_crawl

from scrapy_politeness._sitefarm import starts_by, violations

pytestmark = pytest.mark.integration

TOL = 0.015
INTERVAL = 0.5
IP_FLOOR = 0.25
PAGES = 6
IPS = [f"127.0.0.{i}" for i in range(2, 8)]
HOSTS = {f"h{n}.farm.test": {"ip": IPS[n % len(IPS)], "kind": "normal", "pages": PAGES}
         for n in range(18)}
MW = {"scrapy_politeness.PolitenessMiddleware": 950}
SLOW = "h0.farm.test"  # its DOWNLOAD_SLOTS delay becomes its floor
BANDED = "h6.farm.test"  # its DOWNLOAD_SLOTS delay yields to its POLITENESS_HOSTS band
SLOT_DELAY = 2.0

# (id, settings beside the farm's, spider class attributes, what the log must name)
PATHS: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("addon", {"ADDONS": ADDON, "DOWNLOAD_DELAY": 1}, {},
     ["DOWNLOAD_DELAY = 1 (from project) is set to 0"]),
    ("middleware-only-download-delay", {"DOWNLOADER_MIDDLEWARES": MW, "DOWNLOAD_DELAY": 1}, {},
     ["DOWNLOAD_DELAY = 1 (from project) is set to 0"]),
    ("middleware-only-autothrottle",
     {"DOWNLOADER_MIDDLEWARES": MW, "AUTOTHROTTLE_ENABLED": True}, {},
     ["AUTOTHROTTLE_ENABLED = True (from project) is overridden, AutoThrottle is off"]),
    ("download-slots-delays",
     {"ADDONS": ADDON, "DOWNLOAD_SLOTS": {SLOW: {"delay": SLOT_DELAY},
                                          BANDED: {"delay": SLOT_DELAY}},
      "POLITENESS_HOSTS": {BANDED: {"floor": INTERVAL, "default": INTERVAL}}}, {},
     [f"DOWNLOAD_SLOTS['{SLOW}'] delay 2s is set to 0",
      f"it becomes the floor of '{SLOW}'",
      f"DOWNLOAD_SLOTS['{BANDED}'] delay 2s is set to 0",
      f"POLITENESS_HOSTS gives '{BANDED}' its band already"]),
    ("spider-custom-settings", {},
     {"custom_settings": {"DOWNLOADER_MIDDLEWARES": MW, "DOWNLOAD_DELAY": 1,
                          "DOWNLOAD_SLOTS": {BANDED: {"delay": SLOT_DELAY}},
                          "POLITENESS_HOSTS": {BANDED: {"floor": INTERVAL}}}},
     ["DOWNLOAD_DELAY = 1 (from spider) is set to 0",
      f"DOWNLOAD_SLOTS['{BANDED}'] delay 2s is set to 0"]),
    ("spider-download-delay-attribute-with-addon", {"ADDONS": ADDON}, {"download_delay": 1},
     ["DOWNLOAD_DELAY = 1 (from spider) is set to 0"]),
]


@pytest.mark.parametrize(("settings", "attrs", "named"), [p[1:] for p in PATHS],
                         ids=[p[0] for p in PATHS])
def test_each_set_up_path_keeps_host_and_ip_spacing(
        farm_factory: Any, settings: dict[str, Any], attrs: dict[str, Any],
        named: list[str]) -> None:
    farm = farm_factory({"ips": IPS, "hosts": HOSTS})
    result = run_crawl(
        [farm.url(h) for h in HOSTS],
        {"POLITENESS_DNS_NAMESERVERS": [farm.dns], "ROBOTSTXT_OBEY": False,
         "CONCURRENT_REQUESTS": 16, "POLITENESS_DEFAULT": INTERVAL, "POLITENESS_FLOOR": INTERVAL,
         "POLITENESS_IP_FLOOR": IP_FLOOR, **settings},
        spider_attrs=attrs)
    arrivals = farm.arrivals()
    assert len(arrivals) == len(HOSTS) * (PAGES + 1), result.log[-3000:]
    floors = {SLOW: SLOT_DELAY} if SLOW in settings.get("DOWNLOAD_SLOTS", {}) else {}
    host_bad = {host: violations(times, floors.get(host, INTERVAL), TOL)
                for host, times in starts_by(arrivals, lambda a: a.host).items()}
    ip_bad = {ip: violations(times, IP_FLOOR, TOL)
              for ip, times in starts_by(arrivals, lambda a: a.ip).items()}
    assert not any(host_bad.values()), host_bad
    assert not any(ip_bad.values()), ip_bad
    for text in named:
        assert text in result.log, text
    if BANDED in str(settings) + str(attrs):
        # The slot delay really is gone: the banded host went faster than it asked for.
        banded = sorted(a.t for a in arrivals if a.host == BANDED)
        assert min(b - a for a, b in pairwise(banded)) < SLOT_DELAY - 0.5
