"""A broad crawl at the usual open-file limit: idle connections must not fill it.

Scrapy's pool keeps each host's connection idle for 240 s; a crawl of 1,500
hosts, one page each, in a subprocess whose open-file limit is 1,024
(``resource.setrlimit``), ran out of open files without a bound on them. Real
crawl against the farm; about a minute on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from crawling import SCRIPT, farm_settings, open_files_limited

from scrapy_politeness.policy.idle_budget import IDLE_PER_SLOT, MIN_IDLE, idle_connection_budget

HOSTS = 1_500
IPS = [f"127.0.0.{n}" for n in range(2, 6)]
OPEN_FILES = 1024

LIMITED = open_files_limited(OPEN_FILES)  # the crawl script, in a child at that limit


def test_the_budget_is_half_the_limit_less_the_connections_in_flight() -> None:
    assert idle_connection_budget(1024, 64) == 448
    assert idle_connection_budget(1024, 2000) == MIN_IDLE


def test_the_budget_is_at_most_16_idle_connections_per_concurrent_request() -> None:
    """Not the open files alone: at 20,000 of them a broad crawl kept 9,936 idle
    connections, ~90 MiB of RSS for hosts it would never visit again."""
    assert idle_connection_budget(20_000, 64) == 64 * IDLE_PER_SLOT
    assert idle_connection_budget(1024, 16) == 16 * IDLE_PER_SLOT
    assert idle_connection_budget(None, 16) == 16 * IDLE_PER_SLOT
    assert idle_connection_budget(0, 16) == 16 * IDLE_PER_SLOT
    assert idle_connection_budget(None, 0) == IDLE_PER_SLOT


@pytest.mark.integration
def test_a_crawl_of_1500_hosts_at_1024_open_files_fetches_every_page(
        farm_factory: Any, tmp_path: Path) -> None:
    names = [f"i{i:04d}.farm.test" for i in range(HOSTS)]
    farm = farm_factory({"ips": IPS, "hosts": {
        name: {"ip": IPS[i % len(IPS)], "pages": 1} for i, name in enumerate(names)}})
    hosts_file = tmp_path / "hosts"
    hosts_file.write_text("".join(f"{IPS[i % len(IPS)]} {n}\n" for i, n in enumerate(names)))
    spec = {"urls": [farm.url(name, "/p/0") for name in names], "follow": False,
            "spider_args": {}, "spider_attrs": {},
            "settings": farm_settings(
                farm, CONCURRENT_REQUESTS=64, POLITENESS_DEFAULT=0.2, POLITENESS_FLOOR=0.2,
                POLITENESS_IP_FLOOR=0.0, LOG_LEVEL="INFO", RETRY_ENABLED=False,
                POLITENESS_DNS_HOSTS_FILE=str(hosts_file),
                REMOTE_CONTROL_ENABLED=False, TELNETCONSOLE_ENABLED=False),
            "stats_out": str(tmp_path / "stats.json"),
            "items_out": str(tmp_path / "items.jsonl")}
    (tmp_path / "job.json").write_text(json.dumps(spec))
    try:  # without a bound the crawl stalls once the open files run out
        proc = subprocess.run([sys.executable, "-c", LIMITED, str(SCRIPT),
                               str(tmp_path / "job.json")],
                              capture_output=True, text=True, timeout=100, check=False)
    except subprocess.TimeoutExpired as stalled:
        pytest.fail(f"the crawl did not end: {len(farm.arrivals())} of {HOSTS} pages "
                    f"fetched\n{str(stalled.stderr or '')[-3000:]}")
    log = proc.stderr
    assert "Too many open files" not in log, log[-3000:]
    assert proc.returncode == 0, log[-3000:]
    fetched = {a.host for a in farm.arrivals() if a.path == "/p/0"}
    assert fetched == set(names), f"{len(fetched)} of {HOSTS} fetched"


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def loseConnection(self) -> None:  # Twisted's name
        self.closed = True


class _Idle:
    """A connection as the pool sees it when its answer is done."""

    state = "QUIESCENT"

    def __init__(self) -> None:
        self.transport = _Transport()


def _bounded_pool(budget: int) -> Any:
    from scrapy.utils.test import get_crawler
    from twisted.internet.task import Clock

    from scrapy_politeness.downloader.http_handler import BoundedIdleHTTP11DownloadHandler
    from scrapy_politeness.scrapy_internals import bound_idle_connections

    handler = BoundedIdleHTTP11DownloadHandler(get_crawler())
    assert bound_idle_connections(handler, budget)
    pool = handler._pool
    pool._reactor = Clock()  # the 240 s closes on a clock of the test's own
    return pool


def test_over_the_budget_the_least_recently_used_idle_connection_closes() -> None:
    pool = _bounded_pool(2)
    a, b, c = _Idle(), _Idle(), _Idle()
    pool._putConnection("a", a)
    pool._putConnection("b", b)
    pool.getConnection("a", None)  # host a is still being crawled: takes its connection
    pool._putConnection("a", a)  # and puts it back: now the most recent
    pool._putConnection("c", c)
    assert (a.transport.closed, b.transport.closed, c.transport.closed) == (False, True, False)
    reused = pool.getConnection("a", None)  # no endpoint: opening a new one would raise
    assert reused.called
    assert not a.transport.closed


def test_a_connection_closed_over_the_budget_has_no_240_s_close_left() -> None:
    """Its timed close, left pending, raised ValueError in Twisted's pool 240 s later
    (thousands of tracebacks in a 100,000-host crawl) and kept a timer per connection."""
    pool = _bounded_pool(1)
    a, b = _Idle(), _Idle()
    pool._putConnection("a", a)
    pool._putConnection("b", b)  # over the budget: a closes now
    assert a.transport.closed
    assert len(pool._reactor.getDelayedCalls()) == 1  # b's close only
    pool._reactor.advance(pool.cachedConnectionTimeout)  # b's close runs; none raises
    assert b.transport.closed
    assert pool._reactor.getDelayedCalls() == []


def test_the_addon_bounds_http_and_https_unless_the_user_chose_a_handler() -> None:
    from scrapy.settings import Settings

    from scrapy_politeness import Addon

    settings = Settings({"DOWNLOAD_HANDLERS": {"https": "my.Handler"}})
    Addon().update_settings(settings)
    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    assert handlers["http"].endswith("BoundedIdleHTTP11DownloadHandler")
    assert handlers["https"] == "my.Handler"


def test_a_host_without_idle_connections_leaves_nothing_in_the_pool() -> None:
    """Twisted keeps an empty list, with its key, for every host ever fetched."""
    pool = _bounded_pool(1)
    a, b = _Idle(), _Idle()
    pool._putConnection("a", a)
    pool.getConnection("a", None)  # taken again: a's list is empty
    assert "a" not in pool._connections
    pool._putConnection("a", a)
    pool._putConnection("b", b)  # over the budget: a closes
    assert list(pool._connections) == ["b"]
    pool._reactor.advance(pool.cachedConnectionTimeout)  # b's own 240 s close
    assert pool._connections == {}
