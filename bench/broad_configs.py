"""The broad bench's configurations: the plugin and stock Scrapy, asking the same dnsmasq.

- ``plugin``: the add-on with its defaults, its DNS pointed at dnsmasq (no hosts file);
- ``stock``: Scrapy's defaults (``DownloaderAwarePriorityQueue``, its robots.txt
  middleware) with ``DOWNLOAD_DELAY``, names resolved by Twisted's DNS client
  (:mod:`bench.broad_dns`).

Both set the same ``TWISTED_DNS_RESOLVER``, so a name the plugin leaves to
Scrapy still reaches dnsmasq.
"""

from __future__ import annotations

import os
from typing import Any

from .broad_servers import Dnsmasq
from .runner import ADDON

__all__ = ["CONFIGS", "MIB", "settings_for"]

CONFIGS = ("plugin", "stock")
MIB = 1024.0  # kB per MiB


def settings_for(config: str, dns: Dnsmasq, stock_delay: float) -> dict[str, Any]:
    settings: dict[str, Any] = {"TWISTED_DNS_RESOLVER": "bench.broad_dns.DnsmasqResolver"}
    if config == "plugin":
        settings.update(ADDONS=ADDON, POLITENESS_DNS_NAMESERVERS=[dns.address],
                        POLITENESS_DNS_HOSTS_FILE="")
        if os.environ.get("BENCH_BROAD_TRACE"):  # the decision trace (bench.gap_paths)
            settings.update(POLITENESS_TRACE=os.environ["BENCH_BROAD_TRACE"],
                            POLITENESS_TRACE_BUFFER=10_000_000)
    elif config == "stock":
        settings.update(DOWNLOAD_DELAY=stock_delay)
    else:
        raise ValueError(f"unknown configuration {config!r}")
    return settings
