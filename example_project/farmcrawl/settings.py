"""Scrapy settings for the farmcrawl example project.

The only line the plugin needs is ``ADDONS``: the add-on installs the
politeness downloader middleware and switches off AutoThrottle and
DOWNLOAD_DELAY (their delays would hold requests in Scrapy's downloader after
the plugin let them go). Everything else here is ordinary
Scrapy configuration, plus demo values for the main POLITENESS_* settings.
"""

import os

BOT_NAME = "farmcrawl"

SPIDER_MODULES = ["farmcrawl.spiders"]
NEWSPIDER_MODULE = "farmcrawl.spiders"

# --- scrapy-politeness -------------------------------------------------------
ADDONS = {"scrapy_politeness.Addon": 300}

# Main knobs (seconds between request starts, per host unless noted). The
# plugin's defaults are in scrapy_politeness/settings.py (DEFAULTS); the values
# below are small so that the local demo finishes quickly.
POLITENESS_DEFAULT = 0.5  # starting interval for a host never seen before
POLITENESS_FLOOR = 0.3  # never closer than this, however fast the host answers
POLITENESS_CEILING = 4.0  # backoff (429 / 5xx / errors) widens up to this
POLITENESS_IP_FLOOR = 0.3  # minimum spacing per server IP, across all its hosts
POLITENESS_DEAD_AFTER = 2  # fetches at the ceiling before a host is suspended (probed later)
POLITENESS_MAX_RETRY_AFTER = 30  # a longer Retry-After parks the host instead

# Name servers the plugin resolves host names with ("ip" or "ip:port").
# In real use leave this unset: the plugin then uses the system resolver
# (/etc/resolv.conf and /etc/hosts). The demo and the tests set FARM_DNS to the
# site farm's loopback DNS server, the only place the *.farm.test names exist.
POLITENESS_DNS_NAMESERVERS = [os.environ["FARM_DNS"]] if os.environ.get("FARM_DNS") else []

# --- ordinary Scrapy settings ------------------------------------------------
ROBOTSTXT_OBEY = True  # also feeds Crawl-delay / Request-rate to the plugin
CONCURRENT_REQUESTS = 16
# Let error pages (429 / 503 once retries are exhausted) reach the spider, so
# every page the crawl ends with becomes an item.
HTTPERROR_ALLOW_ALL = True
REMOTE_CONTROL_ENABLED = False
TELNETCONSOLE_ENABLED = False

# Write the final stats as JSON when
# STATS_JSON_PATH is set; the extension disables itself otherwise.
EXTENSIONS = {"farmcrawl.extensions.StatsToJson": 500}
STATS_JSON_PATH = os.environ.get("STATS_JSON_PATH")
