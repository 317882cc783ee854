"""DNS faults against the farm's real loopback DNS server.

The crawl must never stall or crash on a bad DNS answer: every fault ends in
an IP or in None (unknown IP: no IP bucket, the host bucket still applies),
within the configured timeout, and is counted.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from fakeclock import Clock
from twisted.internet.defer import Deferred

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness.dns.cache import DnsCache, read_hosts_file
from scrapy_politeness.dns.pinning import PinnedNameResolver, install
from scrapy_politeness.policy import FailureKind

SPEC: dict[str, Any] = {
    "ips": ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"],
    "dns_ttl": 300,
    "dns_negative_ttl": 5,  # the SOA minimum sent with NXDOMAIN and empty answers
    "hosts": {
        "ok.farm.test": {"ip": "127.0.0.2"},
        "zero.farm.test": {"ip": "127.0.0.3", "ttl": 0},
        "huge.farm.test": {"ip": "127.0.0.4", "ttl": 2_000_000_000},
        "silent.farm.test": {"ip": "127.0.0.2", "dns": {"mode": "timeout"}},
        "servfail.farm.test": {"ip": "127.0.0.2", "dns": {"mode": "servfail"}},
        "gone.farm.test": {"ip": "127.0.0.2", "dns": {"mode": "nxdomain"}},
        "big.farm.test": {"ip": "127.0.0.5", "dns": {"mode": "truncate"}},
        "alias.farm.test": {"ip": "127.0.0.2",
                            "dns": {"mode": "cname", "target": "alias2.farm.test"}},
        "alias2.farm.test": {"ip": "127.0.0.2",
                             "dns": {"mode": "cname", "target": "ok.farm.test"}},
        "shop.farm.test": {"ip": "127.0.0.3",
                           "dns": {"mode": "cname", "target": "shop.farm.test.cdn.cloudflare.net"}},
        "shop.farm.test.cdn.cloudflare.net": {"ip": "127.0.0.3"},
        "v6.farm.test": {"ip": "127.0.0.2", "dns": {"mode": "v6only"}},
        "empty.farm.test": {"ip": "127.0.0.2", "dns": {"mode": "nodata"}},
        "moving.farm.test": {"ip": "127.0.0.2",
                             "dns": {"mode": "rotate", "ips": ["127.0.0.6", "127.0.0.7"]},
                             "ttl": 0},
        **{f"mute{i}.farm.test": {"ip": "127.0.0.2", "dns": {"mode": "timeout"}}
           for i in range(24)},
        **{f"lossy{i}.farm.test": {"ip": "127.0.0.3", "dns": {"mode": "drop_first"}}
           for i in range(8)},
        **{f"flaky{i}.farm.test": {"ip": "127.0.0.4", "dns": {"mode": "drop", "fraction": 0.3}}
           for i in range(40)},
    },
}


@pytest.fixture(scope="module")
def farm() -> Iterator[Farm]:
    with Farm(SPEC) as f:
        yield f




def _cache(farm: Farm, clock: Clock | None = None, **kw: Any) -> DnsCache:
    host, port = farm.dns.rsplit(":", 1)
    args: dict[str, Any] = {"nameservers": ((host, int(port)),), "timeout": 0.5,
                            "min_ttl": 5.0, "max_ttl": 3600.0, "negative_ttl": 30.0,
                            "hosts_file": None, **kw}
    if clock is not None:
        args["clock"] = clock
    return DnsCache(**args)


async def resolve(cache: DnsCache, name: str) -> str | None:
    """Run the asyncio resolver on the reactor's asyncio loop from a Twisted test."""
    result: str | None = await Deferred.fromFuture(asyncio.ensure_future(cache.resolve(name)))
    return result


@pytest_twisted.ensureDeferred
async def test_answer_is_cached_for_its_ttl(farm: Farm) -> None:
    clock = Clock()
    cache = _cache(farm, clock)
    assert await resolve(cache, "ok.farm.test") == "127.0.0.2"
    assert cache.lookup("ok.farm.test") == "127.0.0.2"
    clock.now += 299
    assert cache.lookup("ok.farm.test") == "127.0.0.2"
    clock.now += 2
    assert cache.lookup("ok.farm.test") is DnsCache.MISS
    assert cache.stats.lookups == 1


@pytest_twisted.ensureDeferred
async def test_ttl_zero_is_raised_to_the_min_ttl(farm: Farm) -> None:
    clock = Clock()
    cache = _cache(farm, clock, min_ttl=5.0)
    assert await resolve(cache, "zero.farm.test") == "127.0.0.3"
    clock.now += 4.9
    assert cache.lookup("zero.farm.test") == "127.0.0.3"
    clock.now += 0.2
    assert cache.lookup("zero.farm.test") is DnsCache.MISS


@pytest_twisted.ensureDeferred
async def test_huge_ttl_is_capped_at_the_max_ttl(farm: Farm) -> None:
    clock = Clock()
    cache = _cache(farm, clock, max_ttl=60.0)
    assert await resolve(cache, "huge.farm.test") == "127.0.0.4"
    clock.now += 61
    assert cache.lookup("huge.farm.test") is DnsCache.MISS


@pytest.mark.parametrize("name", ["servfail.farm.test", "gone.farm.test", "nowhere.farm.test"])
@pytest_twisted.ensureDeferred
async def test_failures_give_none_and_are_cached_briefly(farm: Farm, name: str) -> None:
    clock = Clock()
    cache = _cache(farm, clock, negative_ttl=30.0)
    assert await resolve(cache, name) is None
    assert cache.stats.failures == 1
    assert cache.lookup(name) is None  # a cached failure, not a miss
    clock.now += 31
    assert cache.lookup(name) is DnsCache.MISS


@pytest_twisted.ensureDeferred
async def test_a_lost_first_query_is_sent_again_within_the_lookup(farm: Farm) -> None:
    farm.reset()
    cache = _cache(farm, timeout=1.0)
    names = [f"lossy{i}.farm.test" for i in range(8)]
    gathered = asyncio.gather(*(cache.resolve(name) for name in names))
    assert await Deferred.fromFuture(gathered) == ["127.0.0.3"] * 8
    assert cache.stats.failures == 0
    assert farm.dns_dropped() == dict.fromkeys(names, 1)  # each name lost one query
    assert farm.dns_queries() == dict.fromkeys(names, 2)  # and sent it again once


@pytest_twisted.ensureDeferred
async def test_a_lookup_outlasts_a_lossy_link(farm: Farm) -> None:
    """30 % of datagrams lost at random: every name still resolves, most on the
    first lookup (4 tries of a quarter of the time each)."""
    farm.reset()
    cache = _cache(farm, timeout=0.8)
    names = [f"flaky{i}.farm.test" for i in range(40)]
    gathered = asyncio.gather(*(cache.resolve(name) for name in names))
    answers = await Deferred.fromFuture(gathered)
    assert sum(farm.dns_dropped().values()) >= 5  # the link did lose queries
    assert answers.count("127.0.0.4") >= 38  # 0.3 ** 3 = 2.7 % may lose a whole lookup


@pytest_twisted.ensureDeferred
async def test_a_silent_nameserver_is_passed_over_for_the_next(farm: Farm) -> None:
    """The first nameserver never answers: the second is asked after a quarter
    of the lookup's time, not after all of it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as mute:
        mute.bind(("127.0.0.1", 0))  # receives, never answers
        host, port = farm.dns.rsplit(":", 1)
        cache = _cache(farm, nameservers=(("127.0.0.1", mute.getsockname()[1]),
                                          (host, int(port))), timeout=1.0)
        assert await resolve(cache, "ok.farm.test") == "127.0.0.2"  # within the lookup
        assert cache.stats.failures == 0


@pytest.mark.parametrize("name", ["servfail.farm.test", "silent.farm.test"])
@pytest_twisted.ensureDeferred
async def test_a_transient_failure_is_brief_and_a_retry_asks_again(farm: Farm,
                                                                   name: str) -> None:
    clock = Clock()
    cache = _cache(farm, clock, timeout=0.3, negative_ttl=30.0)
    assert await resolve(cache, name) is None
    assert cache.transient(name)
    assert cache.lookup(name) is None  # the requests of the moment fail once...
    farm.reset()
    result = await Deferred.fromFuture(asyncio.ensure_future(
        cache.resolve(name, ask_again=True)))  # ...a retried one asks again
    assert result is None
    assert farm.dns_queries().get(name, 0) >= 1
    clock.now += 3.1  # and a few seconds later nobody believes it any more
    assert cache.lookup(name) is DnsCache.MISS


@pytest.mark.parametrize("name", ["gone.farm.test", "empty.farm.test"])
@pytest_twisted.ensureDeferred
async def test_a_retry_does_not_ask_again_after_a_definite_answer(farm: Farm,
                                                                  name: str) -> None:
    cache = _cache(farm)
    assert await resolve(cache, name) is None
    assert not cache.transient(name)
    farm.reset()
    result = await Deferred.fromFuture(asyncio.ensure_future(
        cache.resolve(name, ask_again=True)))
    assert result is None
    assert farm.dns_queries() == {}


@pytest_twisted.ensureDeferred
async def test_a_silent_server_times_out_within_the_timeout(farm: Farm) -> None:
    cache = _cache(farm, timeout=0.5)
    start = time.monotonic()
    assert await resolve(cache, "silent.farm.test") is None
    assert time.monotonic() - start < 2.0
    assert cache.stats.failures == 1


@pytest_twisted.ensureDeferred
async def test_truncated_udp_answer_falls_back_to_tcp(farm: Farm) -> None:
    assert await resolve(_cache(farm), "big.farm.test") == "127.0.0.5"


@pytest_twisted.ensureDeferred
async def test_cname_chain_is_followed(farm: Farm) -> None:
    assert await resolve(_cache(farm), "alias.farm.test") == "127.0.0.2"


@pytest_twisted.ensureDeferred
async def test_an_answer_through_a_cname_chain_reports_its_canonical_name(farm: Farm) -> None:
    """What tells a CDN edge before the first response: the chain's end, with the
    answer's addresses; a name answered directly reports nothing."""
    seen: list[tuple[str, str, tuple[str, ...]]] = []
    cache = _cache(farm)
    cache.on_cname = lambda *answer: seen.append(answer)
    assert await resolve(cache, "shop.farm.test") == "127.0.0.3"
    assert await resolve(cache, "ok.farm.test") == "127.0.0.2"
    assert seen == [("shop.farm.test", "shop.farm.test.cdn.cloudflare.net.", ("127.0.0.3",))]


@pytest_twisted.ensureDeferred
async def test_ipv6_only_host_gets_its_v6_address(farm: Farm) -> None:
    assert await resolve(_cache(farm), "v6.farm.test") == "::1"


@pytest_twisted.ensureDeferred
async def test_answers_that_change_between_lookups_are_followed_after_expiry(farm: Farm) -> None:
    clock = Clock()
    cache = _cache(farm, clock, min_ttl=1.0)
    first = await resolve(cache, "moving.farm.test")
    assert await resolve(cache, "moving.farm.test") == first  # cached
    clock.now += 2
    second = await resolve(cache, "moving.farm.test")
    assert {first, second} == {"127.0.0.6", "127.0.0.7"}


@pytest_twisted.ensureDeferred
async def test_concurrent_lookups_share_one_query(farm: Farm) -> None:
    farm.reset()
    cache = _cache(farm)

    async def many() -> list[str | None]:
        gathered = asyncio.gather(*(cache.resolve("ok.farm.test") for _ in range(50)))
        result: list[str | None] = await Deferred.fromFuture(gathered)
        return result

    assert await many() == ["127.0.0.2"] * 50
    assert farm.dns_queries().get("ok.farm.test") == 1


@pytest_twisted.ensureDeferred
async def test_no_more_than_max_queries_are_in_flight(farm: Farm) -> None:
    """A burst of new names reaches the server a few at a time (here: silent
    names, so each holds its turn for the whole timeout)."""
    farm.reset()
    cache = _cache(farm, timeout=0.4, max_queries=6)
    names = [f"mute{i}.farm.test" for i in range(24)]
    gathered = asyncio.gather(*(cache.resolve(name) for name in names))
    await Deferred.fromFuture(asyncio.ensure_future(asyncio.sleep(0.2)))
    asked_at_first = set(farm.dns_queries())
    results = await Deferred.fromFuture(gathered)
    assert len(asked_at_first) == 6
    assert results == [None] * 24
    assert set(farm.dns_queries()) == set(names)
    assert {cache.failure(name) for name in names} == {FailureKind.DNS_TIMEOUT}


@pytest_twisted.ensureDeferred
async def test_ip_literals_skip_dns(farm: Farm) -> None:
    cache = _cache(farm)
    assert await resolve(cache, "127.0.0.9") == "127.0.0.9"
    assert await resolve(cache, "::1") == "::1"
    assert cache.stats.lookups == 0


@pytest_twisted.ensureDeferred
async def test_hosts_file_names_resolve_like_the_system(tmp_path: Path, farm: Farm) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost\n"
                     "127.0.0.8 Static.Example. other # comment\n# 127.0.0.9 commented\n"
                     "garbage line\n")
    table = read_hosts_file(str(hosts))
    assert table["localhost"] == ("127.0.0.1", "::1")
    assert table["ip6-localhost"] == ("::1",)
    assert table["static.example"] == ("127.0.0.8",)
    assert "commented" not in table
    cache = _cache(farm, hosts_file=str(hosts))
    assert await resolve(cache, "static.example") == "127.0.0.8"
    assert cache.stats.lookups == 0


@pytest_twisted.ensureDeferred
async def test_every_address_of_a_hosts_file_name_is_kept_both_families(tmp_path: Path,
                                                                        farm: Farm) -> None:
    """getaddrinfo returns every address a name is listed with, IPv4 first."""
    hosts = tmp_path / "hosts"
    hosts.write_text("::1 multi.example\n127.0.0.8 multi.example\n"
                     "127.0.0.9 multi.example\n127.0.0.8 multi.example\n")
    assert read_hosts_file(str(hosts))["multi.example"] == ("127.0.0.8", "127.0.0.9", "::1")
    cache = _cache(farm, hosts_file=str(hosts))
    assert await resolve(cache, "multi.example") == "127.0.0.8"
    assert cache.addresses("multi.example") == ("127.0.0.8", "127.0.0.9", "::1")
    cache.fall_back("multi.example", "127.0.0.8", "127.0.0.9")
    assert cache.lookup("multi.example") == "127.0.0.9"
    cache.fall_back("multi.example", "127.0.0.8", "::1")  # moved already: stays
    assert cache.lookup("multi.example") == "127.0.0.9"


@pytest_twisted.ensureDeferred
async def test_a_trailing_dot_name_is_found_in_the_hosts_file(tmp_path: Path,
                                                              farm: Farm) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.8 static.example\n")
    cache = _cache(farm, hosts_file=str(hosts))
    assert await resolve(cache, "static.example.") == "127.0.0.8"
    assert await resolve(cache, "ok.farm.test.") == "127.0.0.2"  # absolute: DNS as it is
    assert cache.stats.lookups == 1


def _resolv_conf(tmp_path: Path, text: str) -> str:
    path = tmp_path / "resolv.conf"
    path.write_text(text)
    return str(path)


@pytest_twisted.ensureDeferred
async def test_a_single_label_name_is_asked_with_the_search_list_first(tmp_path: Path,
                                                                        farm: Farm) -> None:
    """resolv.conf's ``search farm.test``: ``ok`` is ok.farm.test, as getaddrinfo
    resolves it (fewer dots than ndots: the search domains first); the farm's
    nameserver is the crawl's own (the file's nameserver line is not asked)."""
    conf = _resolv_conf(tmp_path, "nameserver 192.0.2.1\nsearch nowhere.test farm.test\n")
    cache = _cache(farm, resolv_conf=conf)
    assert await resolve(cache, "ok") == "127.0.0.2"
    assert farm.dns_queries().get("ok.nowhere.test") == 1  # tried in the list's order
    assert await resolve(cache, "nothere") is None
    assert cache.failure("nothere") == FailureKind.DNS_NXDOMAIN


@pytest_twisted.ensureDeferred
async def test_ndots_decides_whether_a_name_is_asked_as_it_is_first(tmp_path: Path,
                                                                     farm: Farm) -> None:
    """``ok.farm`` has one dot: with ndots 1 it is asked as it is first (and
    fails, then ok.farm.farm.test fails), with ndots 2 the search list first."""
    spec_names = farm.dns_queries()
    assert "ok.farm" not in spec_names
    one = _cache(farm, resolv_conf=_resolv_conf(tmp_path, "search test\noptions ndots:1\n"))
    assert await resolve(one, "ok.farm") == "127.0.0.2"  # ok.farm, then ok.farm.test
    assert farm.dns_queries().get("ok.farm", 0) == 1
    two = _cache(farm, resolv_conf=_resolv_conf(tmp_path, "search test\noptions ndots:2\n"))
    assert await resolve(two, "ok.farm") == "127.0.0.2"  # ok.farm.test first: found
    assert farm.dns_queries().get("ok.farm", 0) == 1


def test_without_a_resolv_conf_names_are_asked_as_they_are(tmp_path: Path, farm: Farm) -> None:
    cache = _cache(farm, resolv_conf=None)
    assert cache._resolver is not None
    assert cache._resolver.search == []


def test_localhost_resolves_without_a_hosts_file() -> None:
    assert read_hosts_file(None)["localhost"] == ("127.0.0.1",)
    assert read_hosts_file("/nonexistent/hosts")["localhost"] == ("127.0.0.1",)


@pytest_twisted.ensureDeferred
async def test_pins_outlive_the_answer_until_evicted(farm: Farm) -> None:
    clock = Clock()
    cache = _cache(farm, clock)
    await resolve(cache, "ok.farm.test")
    cache.pin("ok.farm.test", "127.0.0.2")
    clock.now += 1000  # the answer expired, the pin stays
    assert cache.lookup("ok.farm.test") is DnsCache.MISS
    assert cache.pinned("ok.farm.test") == "127.0.0.2"
    cache.evict(pin_cutoff=clock.now - 300)
    assert cache.pinned("ok.farm.test") is None
    assert len(cache) == 0


@pytest.mark.parametrize(("name", "kind"), [
    ("gone.farm.test", FailureKind.DNS_NXDOMAIN),
    ("nowhere.farm.test", FailureKind.DNS_NXDOMAIN),
    ("servfail.farm.test", FailureKind.DNS_SERVFAIL),
    ("silent.farm.test", FailureKind.DNS_TIMEOUT),
    ("empty.farm.test", FailureKind.DNS_NO_ANSWER),
])
@pytest_twisted.ensureDeferred
async def test_each_failure_is_cached_with_its_kind(farm: Farm, name: str,
                                                    kind: FailureKind) -> None:
    cache = _cache(farm, timeout=0.3)
    assert await resolve(cache, name) is None
    assert cache.failure(name) is kind


@pytest.mark.parametrize("name", ["gone.farm.test", "nowhere.farm.test", "empty.farm.test"])
@pytest_twisted.ensureDeferred
async def test_a_negative_answer_is_cached_for_the_soa_minimum(farm: Farm, name: str) -> None:
    clock = Clock()
    cache = _cache(farm, clock, negative_ttl=30.0)
    assert await resolve(cache, name) is None
    clock.now += 4.9
    assert cache.lookup(name) is None  # the SOA says 5 s
    clock.now += 0.2
    assert cache.lookup(name) is DnsCache.MISS


@pytest_twisted.ensureDeferred
async def test_the_soa_minimum_is_bounded_by_the_negative_ttl(farm: Farm) -> None:
    clock = Clock()
    cache = _cache(farm, clock, negative_ttl=2.0)
    assert await resolve(cache, "gone.farm.test") is None
    clock.now += 1.9
    assert cache.lookup("gone.farm.test") is None
    clock.now += 0.2
    assert cache.lookup("gone.farm.test") is DnsCache.MISS


@pytest_twisted.ensureDeferred
async def test_one_caller_cancelled_does_not_cancel_the_shared_lookup(farm: Farm) -> None:
    cache = _cache(farm)

    async def two_callers() -> str | None:
        first = asyncio.ensure_future(cache.resolve("ok.farm.test"))
        second = asyncio.ensure_future(cache.resolve("ok.farm.test"))
        await asyncio.sleep(0)  # both wait on one query in flight
        assert not second.done()
        first.cancel()
        return await second

    assert await Deferred.fromFuture(asyncio.ensure_future(two_callers())) == "127.0.0.2"


class _Receiver:
    def __init__(self) -> None:
        self.addresses: list[str] = []

    def resolutionBegan(self, resolution: Any) -> None:
        pass

    def addressResolved(self, address: Any) -> None:
        self.addresses.append(address.host)

    def resolutionComplete(self) -> None:
        pass


def test_a_pin_is_found_whatever_the_url_spelling(farm: Farm) -> None:
    cache = _cache(farm)
    cache.pin("ok.farm.test.", "127.0.0.9")  # the URL host had a trailing dot
    receiver = _Receiver()

    class Unpinned:
        def resolveHostName(self, *args: Any) -> None:
            raise AssertionError("the pinned name went to the wrapped resolver")

    PinnedNameResolver(Unpinned(), cache.pinned).resolveHostName(receiver, "OK.farm.test.", 80)
    assert receiver.addresses == ["127.0.0.9"]


@pytest.mark.parametrize("a_first", [True, False])
def test_two_crawlers_closing_in_any_order_restore_the_reactor_resolver(a_first: bool) -> None:
    from twisted.internet import reactor

    original = reactor.nameResolver
    pin_a = install(lambda name: "127.0.0.2" if name == "a.test" else None)
    pin_b = install(lambda name: "127.0.0.3" if name == "b.test" else None)
    assert pin_a is not None
    assert pin_b is not None
    try:
        first, second = (pin_a, pin_b) if a_first else (pin_b, pin_a)
        first.restore()
        assert reactor.nameResolver is not original  # the other crawler still pins
        second.restore()
        assert reactor.nameResolver is original
    finally:
        reactor.installNameResolver(original)

