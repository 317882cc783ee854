"""Failures that reached no server never back a host off and never wait in the gate.

The classification itself (policy and exception lists), then the middleware
fed each kind, then requests to names that do not resolve against the farm's
real DNS server, with the DNS cache on a fake clock. Also the review fixes of
issue 9 that live in the middleware (dead during the lookup, closing, drop
reasons, Retry-After against the Date header, robots.txt errors).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterator
from email.utils import formatdate
from typing import Any

import pytest
import pytest_twisted
from fakeclock import Clock
from scrapy import Request
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotSupported,
)
from scrapy.http import Response
from scrapy.utils.test import get_crawler
from twisted.internet import error as txerror
from twisted.internet.defer import Deferred

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.downloader.failure_kinds import NameNotResolvedError, classify_exception
from scrapy_politeness.downloader.send_lateness import Dispatch as _Dispatch
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import FailureKind, backoff_cause, reached_server

SPEC: dict[str, Any] = {
    "ips": ["127.0.0.2"],
    "dns_negative_ttl": 5,
    "hosts": {
        "ok.farm.test": {"ip": "127.0.0.2"},
        "gone.farm.test": {"ip": "127.0.0.2", "dns": {"mode": "nxdomain"}},
        "servfail.farm.test": {"ip": "127.0.0.2", "dns": {"mode": "servfail"}},
    },
}


@pytest.fixture(scope="module")
def farm() -> Iterator[Farm]:
    with Farm(SPEC) as f:
        yield f




def _middleware(farm: Farm | None = None, **settings: Any) -> PolitenessMiddleware:
    base: dict[str, Any] = {"POLITENESS_DNS_HOSTS_FILE": "", "POLITENESS_DEFAULT": 30.0}
    if farm is not None:
        base["POLITENESS_DNS_NAMESERVERS"] = [farm.dns]
    return PolitenessMiddleware.from_crawler(get_crawler(settings_dict={**base, **settings}))


def run(coro: Coroutine[Any, Any, Any]) -> Deferred[Any]:
    """Run a coroutine on the reactor's asyncio loop from a Twisted test."""
    return Deferred.fromFuture(asyncio.ensure_future(coro))


# -- the classification ---------------------------------------------------------------


def test_only_server_struggles_back_off() -> None:
    server = {k for k in FailureKind if reached_server(k)}
    assert server == {FailureKind.CONNECTION, FailureKind.HTTP_429, FailureKind.HTTP_5XX}
    assert backoff_cause(FailureKind.HTTP_429) == "429"
    assert backoff_cause(FailureKind.CONNECTION) == "transport"
    assert all(backoff_cause(k) is None for k in FailureKind if k not in server)
    assert all(k.value.startswith(("dns/", "local/")) for k in FailureKind if k not in server)


@pytest.mark.parametrize(("exc", "kind"), [
    (txerror.DNSLookupError("x"), FailureKind.DNS_ERROR),
    (CannotResolveHostError("x"), FailureKind.DNS_ERROR),
    (NameNotResolvedError("x", FailureKind.DNS_NXDOMAIN), FailureKind.DNS_ERROR),
    (NotSupported("ftp"), FailureKind.UNSUPPORTED_SCHEME),
    (ValueError("Missing scheme"), FailureKind.INVALID_URL),
    (KeyError("a middleware bug"), FailureKind.LOCAL_ERROR),
    (txerror.ConnectionRefusedError(), FailureKind.CONNECTION),
    (DownloadConnectionRefusedError(), FailureKind.CONNECTION),
    (DownloadTimeoutError(), FailureKind.CONNECTION),
    (txerror.TimeoutError(), FailureKind.CONNECTION),
    (txerror.ConnectionLost(), FailureKind.CONNECTION),
    (ConnectionResetError(), FailureKind.CONNECTION),
])
def test_exceptions_map_to_their_kind(exc: BaseException, kind: FailureKind) -> None:
    assert classify_exception(exc) is kind


def test_our_dns_error_is_both_scrapys_and_twisteds() -> None:
    exc = NameNotResolvedError("gone.test", FailureKind.DNS_NXDOMAIN)
    assert isinstance(exc, CannotResolveHostError)
    assert isinstance(exc, txerror.DNSLookupError)  # what errbacks and RETRY_EXCEPTIONS check
    assert exc.kind is FailureKind.DNS_NXDOMAIN


# -- the middleware fed each kind ---------------------------------------------------------


def _dispatched(mw: PolitenessMiddleware, loop: asyncio.AbstractEventLoop,
                url: str = "http://a.example/") -> Request:
    request = Request(url)
    mw._dispatched[request] = _Dispatch("a.example", loop.time(), None)
    mw.hosts.get("a.example")
    return request


@pytest.mark.parametrize(("exc", "backs_off"), [
    (txerror.DNSLookupError("x"), False),
    (CannotResolveHostError("x"), False),
    (NotSupported("x"), False),
    (KeyError("x"), False),
    (txerror.ConnectionRefusedError(), True),
    (DownloadTimeoutError(), True),
])
def test_only_failures_that_reached_the_server_back_the_host_off(exc: Exception,
                                                                 backs_off: bool) -> None:
    mw = _middleware()
    loop = mw.loop = asyncio.new_event_loop()
    try:
        request = _dispatched(mw, loop)
        before = mw.hosts.get("a.example").interval()
        mw.process_exception(request, exc)
        after = mw.hosts.get("a.example").interval()
        assert (after > before) is backs_off
        backoffs = mw.stats.get_value("politeness/backoff/transport")
        assert (backoffs == 1) is backs_off
        if not backs_off:
            assert mw.stats.get_value("politeness/" + classify_exception(exc).value) == 1
    finally:
        loop.close()


# -- names that do not resolve (the farm's DNS, the cache on a fake clock) -------------


@pytest.mark.parametrize(("name", "kind"), [
    ("gone.farm.test", FailureKind.DNS_NXDOMAIN),
    ("servfail.farm.test", FailureKind.DNS_SERVFAIL),
])
@pytest_twisted.ensureDeferred
async def test_a_failing_name_never_waits_in_the_gate(farm: Farm, name: str,
                                                      kind: FailureKind) -> None:
    clock = Clock()
    mw = _middleware(farm, POLITENESS_DNS_NEGATIVE_TTL=30.0)
    host, port = farm.dns.rsplit(":", 1)
    mw.dns = mw.buckets.dns = DnsCache(nameservers=((host, int(port)),), timeout=1.0,
                                       negative_ttl=30.0, hosts_file=None, clock=clock)
    loop = mw.loop = asyncio.get_running_loop()
    # The name's bucket is busy for 30 s: a request that reached the gate would wait.
    mw.hosts.get(name).last_start = loop.time()
    interval = mw.hosts.get(name).interval()
    url = f"http://{name}/"

    async def first() -> None:
        with pytest.raises(NameNotResolvedError) as caught:
            await mw.process_request(Request(url))
        assert caught.value.kind is kind

    await run(first())  # a real lookup, answered at once by the farm

    def fails_without_waiting() -> None:
        """The coroutine raises at its first step: it never suspended, so never waited."""
        coro = mw.process_request(Request(url))
        with pytest.raises(NameNotResolvedError):
            coro.send(None)

    fails_without_waiting()  # another request, from the negative cache
    clock.now += 4.9 if kind is FailureKind.DNS_NXDOMAIN else 2.9
    fails_without_waiting()  # still cached (NXDOMAIN: the SOA minimum, 5 s; SERVFAIL: 3 s)
    assert mw.gate.waiting == 0
    assert mw.hosts.get(name).interval() == interval  # never backed off
    assert mw.stats.get_value("politeness/" + kind.value) == 3
    assert mw.stats.get_value("politeness/dns/from_negative_cache") == 2
    assert mw.stats.get_value("politeness/waits") is None
    assert mw.stats.get_value("politeness/dispatched") is None
    farm.reset()

    async def retried() -> None:  # RetryMiddleware's copy of a failed request
        with pytest.raises(NameNotResolvedError):
            await mw.process_request(Request(url, meta={"retry_times": 1}))

    await run(retried())
    # SERVFAIL may go away: a retry asks again; NXDOMAIN is the zone's answer
    assert farm.dns_queries() == ({} if kind is FailureKind.DNS_NXDOMAIN else {name: 1})
    clock.now += 0.2 if kind is FailureKind.DNS_NXDOMAIN else 3.1
    assert mw.dns.lookup(name) is DnsCache.MISS


@pytest_twisted.ensureDeferred
async def test_a_host_declared_dead_during_its_lookup_is_not_fetched(farm: Farm) -> None:
    mw = _middleware(farm)

    async def scenario() -> None:
        task = asyncio.ensure_future(mw.process_request(Request(farm.url("ok.farm.test"))))
        await asyncio.sleep(0)  # now awaiting the farm's DNS answer
        assert not task.done()
        mw.hosts.get("ok.farm.test").dead = True  # as a failing response would
        with pytest.raises(IgnoreRequest):
            await task
        assert mw.stats.get_value("politeness/dispatched") is None

    await run(scenario())


@pytest_twisted.ensureDeferred
async def test_a_request_reaching_the_gate_after_the_close_drain_does_not_wait() -> None:
    mw = _middleware()

    async def scenario() -> None:
        await mw.process_request(Request("http://127.0.0.2:9/robots.txt"))  # starts the bucket
        mw._close_gate("politeness: spider closing")
        late = asyncio.ensure_future(mw.process_request(Request("http://127.0.0.2:9/page")))
        for _ in range(5):  # a few loop turns, far less than the 30 s interval
            await asyncio.sleep(0)
        try:
            assert late.done()
            with pytest.raises(IgnoreRequest, match="closing"):
                late.result()
        finally:
            late.cancel()

    await run(scenario())


def test_drop_reasons_of_hosts_no_longer_dropped_are_forgotten() -> None:
    mw = _middleware()
    loop = mw.loop = asyncio.new_event_loop()
    try:
        mw.dropped.park("parked.example", loop.time(), loop.time() - 1.0,
                        "politeness: parked for a while")
        dead = mw.hosts.get("dead.example")
        dead.dead, dead.touched = True, loop.time()  # its last outcome: now
        mw.dropped.reasons["dead.example"] = "politeness: dead"
        assert set(mw.dropped.reasons) == {"parked.example", "dead.example"}
        mw.periodic.evict(loop.time())
        assert set(mw.dropped.reasons) == {"dead.example"}  # the dead one still drops requests
    finally:
        loop.close()


def test_a_dead_host_gone_idle_still_drops_its_requests_and_each_drop_renews_it() -> None:
    mw = _middleware(POLITENESS_IDLE_TTL=100, POLITENESS_CEILING=60)
    loop = mw.loop = asyncio.new_event_loop()
    try:
        now = loop.time()
        dead = mw.hosts.get("dead.example")
        dead.dead, dead.touched = True, now - 150.0  # its last outcome, 150 s ago
        mw.periodic.evict(now)
        assert mw.hosts.whole("dead.example") is None  # a compact record now
        with pytest.raises(IgnoreRequest, match="dead"):
            mw.dropped.check("dead.example", now)  # a request came: dropped, verdict renewed
        # 100 s idle + 60 s ceiling after the renewal, not after the last outcome
        mw.periodic.evict(now + 159.0)
        assert "dead.example" in mw.hosts
        with pytest.raises(IgnoreRequest, match="dead"):
            mw.dropped.check("dead.example", now + 159.0)
        mw.periodic.evict(now + 159.0 + 161.0)
        assert "dead.example" not in mw.hosts  # no request for that long: forgotten
        mw.dropped.check("dead.example", now + 400.0)  # a new host: not dropped
    finally:
        loop.close()


def test_an_http_date_retry_after_is_measured_against_the_date_header() -> None:
    """Our clock runs 100 s ahead of the server's: the server's 120 s must stay 120 s."""
    mw = _middleware(POLITENESS_MAX_RETRY_AFTER=600)
    loop = mw.loop = asyncio.new_event_loop()
    try:
        request = _dispatched(mw, loop)
        server_now = time.time() - 100.0
        response = Response(request.url, status=503, request=request, headers={
            "Date": formatdate(server_now, usegmt=True),
            "Retry-After": formatdate(server_now + 120.0, usegmt=True),
        })
        mw.process_response(request, response)
        wait = mw.hosts.get("a.example").not_before - loop.time()
        assert wait == pytest.approx(120.0, abs=2.0)
    finally:
        loop.close()


def test_robots_txt_handling_errors_are_logged_and_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def crawl_delay(self, ua: str) -> float:
            raise RuntimeError("broken parser backend")

    mw = _middleware()
    mw.crawl_delays.parsed(Broken(), Request("http://a.example/robots.txt"))  # type: ignore[arg-type]
    assert mw.stats.get_value("politeness/robots/errors") == 1
    assert "broken parser backend" in caplog.text
