"""A name's next address when the one in use refuses the connection (fast tier)."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest_twisted
from scrapy import Request
from scrapy.exceptions import DownloadConnectionRefusedError, DownloadTimeoutError
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler
from twisted.internet import error
from twisted.internet.defer import Deferred

from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.downloader.address_fallback import TRIED, AddressFallback
from scrapy_politeness.downloader.failure_kinds import not_connected
from scrapy_politeness.policy import next_address


def test_next_address_is_the_first_not_tried() -> None:
    answer = ("10.0.0.1", "10.0.0.2", "::1")
    assert next_address(answer, ("10.0.0.1",)) == "10.0.0.2"
    assert next_address(answer, ("10.0.0.2", "10.0.0.1")) == "::1"
    assert next_address(answer, answer) is None
    assert next_address((), ("10.0.0.1",)) is None


def test_only_a_connection_that_never_opened_falls_back() -> None:
    assert not_connected(DownloadConnectionRefusedError("refused"))
    assert not_connected(error.ConnectionRefusedError())
    assert not_connected(error.NoRouteError())
    assert not_connected(error.ConnectError(errno.ENETUNREACH, "unreachable"))
    assert not_connected(OSError(errno.EHOSTUNREACH, "no route"))
    assert not not_connected(DownloadTimeoutError("slow server"))  # it may have been reached
    assert not not_connected(error.ConnectionLost())
    assert not not_connected(error.ConnectError("no errno"))


async def _fallback(tmp_path: Path) -> tuple[AddressFallback, DnsCache, MemoryStatsCollector]:
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.1 two.test\n10.0.0.2 two.test\n10.0.0.3 one.test\n")
    dns = DnsCache(nameservers=(("127.0.0.1", 9),), hosts_file=str(hosts))
    for name in ("two.test", "one.test"):  # from the hosts file: no query
        await Deferred.fromFuture(asyncio.ensure_future(dns.resolve(name)))
    stats = MemoryStatsCollector(get_crawler())
    return AddressFallback(dns, stats), dns, stats


@pytest_twisted.ensureDeferred
async def test_a_refused_address_moves_the_name_and_the_request_goes_again(
        tmp_path: Path) -> None:
    fallback, dns, stats = await _fallback(tmp_path)
    request = Request("http://two.test/p")
    refused = DownloadConnectionRefusedError()
    assert fallback.failed(request, refused, "10.0.0.1")
    assert dns.lookup("two.test") == "10.0.0.2"
    again = AddressFallback.again(request)
    assert again is not None
    assert again is not request
    assert again.dont_filter
    assert again.meta[TRIED] == ["10.0.0.1"]
    assert AddressFallback.again(request) is None  # once
    assert not fallback.failed(again, refused, "10.0.0.2")  # every address tried: the host's
    assert stats.get_value("politeness/dns/address_fallback") == 1


@pytest_twisted.ensureDeferred
async def test_no_fallback_for_a_single_address_a_proxy_or_another_failure(
        tmp_path: Path) -> None:
    fallback, _, _ = await _fallback(tmp_path)
    refused = DownloadConnectionRefusedError()
    assert not fallback.failed(Request("http://one.test/"), refused, "10.0.0.3")
    assert not fallback.failed(Request("http://two.test/", meta={"proxy": "http://p:1"}),
                               refused, "10.0.0.1")
    assert not fallback.failed(Request("http://two.test/"), DownloadTimeoutError(), "10.0.0.1")
    assert not fallback.failed(Request("http://two.test/"), refused, None)
