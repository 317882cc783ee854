"""Memory that follows the active hosts: eviction by use, in O(evicted), maps refitted."""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from fakeclock import Clock, run_at_once
from twisted.internet.defer import Deferred

from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.policy import IPTable
from scrapy_politeness.policy.idle_maps import refit


def _cache(tmp_path: Path, clock: Clock) -> DnsCache:
    hosts = tmp_path / "hosts"
    hosts.write_text("".join(f"127.0.0.{i} h{i}.test\n" for i in range(1, 6)))
    return DnsCache(nameservers=(("127.0.0.1", 9),), hosts_file=str(hosts), clock=clock,
                    min_ttl=1.0, max_ttl=10.0)


@pytest_twisted.ensureDeferred
async def test_dns_answers_follow_the_names_in_use_not_their_ttl(tmp_path: Path) -> None:
    clock = Clock(1000.0)
    cache = _cache(tmp_path, clock)
    for i in range(1, 6):  # from the hosts file: no query leaves the process
        await Deferred.fromFuture(asyncio.ensure_future(cache.resolve(f"h{i}.test")))
    assert len(cache) == 5
    clock.now = 1005.0
    assert cache.lookup("h2.test") == "127.0.0.2"  # in use
    clock.now = 1300.0
    assert cache.evict(pin_cutoff=1004.0) == 4  # the others were not looked up since 1000
    assert len(cache) == 1
    assert cache.lookup("h2.test") is DnsCache.MISS  # expired meanwhile: asked again when used
    assert cache.evict(pin_cutoff=1005.0) == 1
    assert len(cache) == 0


def test_dns_pins_are_evicted_least_recently_renewed_first(tmp_path: Path) -> None:
    clock = Clock(0.0)
    cache = _cache(tmp_path, clock)
    for i in range(3):
        clock.now = float(i)
        cache.pin(f"h{i}.test", "127.0.0.1")
    clock.now = 10.0
    cache.pin("h0.test", "127.0.0.1")  # renewed: the most recent now
    assert cache.evict(pin_cutoff=5.0) == 2
    assert cache.pinned("h0.test") == "127.0.0.1"
    assert cache.pinned("h1.test") is None


def test_an_ip_widened_after_its_entry_was_evicted_is_evicted_with_it() -> None:
    ips = IPTable(0.25, "decoupled")
    ips.feedback("10.0.0.1", "a.test", 503, 0.0, False)  # no spend recorded (evicted)
    ips.feedback("10.0.0.1", "b.test", 503, 0.0, False)  # a second vhost: the machine
    assert ips.interval("10.0.0.1") > 0.25
    assert ips.evict(100.0) == 1
    assert ips.interval("10.0.0.1") == 0.25  # nothing left behind


def test_ip_eviction_stops_at_the_first_ip_still_ahead() -> None:
    ips = IPTable(0.25)
    ips.spend("a", 0.0, 1.0)  # 1
    ips.spend("b", 0.5, 1.0)  # 1.5
    ips.spend("a", 1.0, 1.0)  # a pushed again: 2, now after b
    assert ips.evict(1.6) == 1
    assert [ip for ip, _ in ips.items()] == ["a"]


def test_a_map_emptied_by_eviction_is_copied_once_below_a_quarter() -> None:
    big: OrderedDict[str, int] = OrderedDict((str(i), i) for i in range(100))
    same, high = refit(big, 0)
    assert same is big
    assert high == 100
    for i in range(75):
        del big[str(i)]
    same, high = refit(big, high)
    assert same is big  # 25 of 100: not yet
    del big["75"]
    copied, high = refit(big, high)
    assert copied is not big
    assert list(copied) == [str(i) for i in range(76, 100)]
    assert high == 24


def test_a_crawl_delay_learnt_before_the_host_went_idle_still_spaces_it() -> None:
    from scrapy_politeness.policy import Config, Gate, HostTable

    hosts = HostTable(Config(default=1.0, floor=0.25, ceiling=60.0))
    ips = IPTable(0.0)
    gate: Gate[int] = Gate(hosts, ips)
    hosts.start("slow.test", 0.0)
    hosts.set_crawl_delay("slow.test", 5.0)  # robots.txt asked for it
    assert hosts.evict(30.0) == 1  # idle past the idle time: a compact record
    assert hosts.whole("slow.test") is None
    for token in range(3):
        gate.submit("slow.test", "10.0.0.1", token, 50.0)  # within the ceiling of its use
    starts = []
    now = 50.0
    while len(starts) < 3:
        at = gate.next_event()
        assert at is not None
        now = max(now, at)
        for release in gate.poll(now):
            starts.append(release.at)
            gate.done(release.key)
    assert [b - a for a, b in itertools.pairwise(starts)] == [5.0, 5.0]


def test_a_crawl_delay_record_is_forgotten_once_its_host_stopped_mattering() -> None:
    """Kept ``ceiling`` past the idle time after the host's last use, then gone:
    the records follow the hosts in use, not every host that asked a Crawl-delay."""
    from scrapy_politeness.policy import Config, HostTable

    hosts = HostTable(Config(default=1.0, floor=0.25, ceiling=60.0))
    for i in range(1000):
        hosts.start(f"h{i}.test", float(i) / 100)
        hosts.set_crawl_delay(f"h{i}.test", 2.0)
    hosts.evict(20.0)  # every host idle: compact records
    assert hosts.verdicts.counts() == (0, 1000, 0)
    hosts.evict(5.0 + 60.0)  # the first hosts' records ran out, the last ones' not yet
    assert 0 < hosts.verdicts.counts()[1] < 1000
    assert "h999.test" in hosts
    hosts.evict(10.0 + 60.0)
    assert hosts.verdicts.counts() == (0, 0, 0)
    assert len(hosts) == 0


def _mw(**settings: object) -> Any:
    from scrapy.utils.test import get_crawler

    from scrapy_politeness.middleware import PolitenessMiddleware

    crawler = get_crawler(settings_dict={"POLITENESS_DNS_HOSTS_FILE": "", **settings})
    return PolitenessMiddleware.from_crawler(crawler)


def test_the_eviction_pass_forgets_suspensions_of_hosts_with_nothing_waiting() -> None:
    """A suspended host whose requests are all gone leaves the breaker (and the
    live line's "N suspended") with its idle state; one with a request still
    waiting stays suspended."""
    mw = _mw(POLITENESS_SUSPEND_COOLDOWN=10.0, POLITENESS_IDLE_TTL=60.0)
    breaker = mw.suspended.breaker
    for key in ("gone.test", "waiting.test"):
        breaker.judge(key, mw.hosts.get(key), tripped=True, sent_at=0.0, failed=True, now=0.0)
    mw.gate.submit("waiting.test", None, object(), 0.0)
    assert mw.suspended.counts(1.0)[0] == 2
    mw.periodic.evict(10.0 + 60.0 + 1.0)  # both probe instants an idle time ago
    assert "gone.test" not in breaker
    assert "waiting.test" in breaker
    assert mw.suspended.counts(72.0)[0] == 1
    assert mw.stats.get_value("politeness/suspensions_expired") == 1


class _Robots:
    """Scrapy's robots middleware as the relearning reads it: a parser per netloc."""

    def __init__(self, body: str) -> None:
        from scrapy.robotstxt import ProtegoRobotParser

        self.parser = ProtegoRobotParser(body.encode(), None)
        self.asked = 0

    async def robot_parser(self, request: Any) -> Any:
        self.asked += 1
        return self.parser


@pytest.mark.parametrize(("policy", "delay", "parked"),
                         [("honour", 7.0, False), ("skip", 0.0, True)])
def test_a_forgotten_crawl_delay_is_read_again_from_robots_txt(policy: str, delay: float,
                                                               parked: bool) -> None:
    """Once the record ran out, the host's next request reads its Crawl-delay
    again from the parser Scrapy's robots middleware keeps (no second fetch)."""
    import math

    from scrapy import Request
    from scrapy.exceptions import IgnoreRequest

    mw = _mw(ROBOTSTXT_OBEY=True, POLITENESS_MAX_CRAWL_DELAY=5.0,
             POLITENESS_CRAWL_DELAY_OVER_MAX=policy)
    robots = _Robots("User-agent: *\nCrawl-delay: 7\n")
    mw.crawl_delays._robots, mw.crawl_delays._looked_up = robots, True
    request = Request("http://slow.test/page")
    mw.crawl_delays.parsed(robots.parser, request)  # robots.txt parsed at first sight
    mw.hosts.touch("slow.test", 0.0)
    mw.hosts.evict(1e6)  # idle for long: state and record gone
    assert "slow.test" not in mw.hosts
    assert not run_at_once(mw.crawl_delays.relearn(
        Request("http://slow.test/robots.txt", meta={"dont_obey_robotstxt": True})))
    if parked:  # parked again: this request is dropped too
        with pytest.raises(IgnoreRequest, match="POLITENESS_MAX_CRAWL_DELAY"):
            run_at_once(mw.crawl_delays.relearn(request))
    else:
        assert run_at_once(mw.crawl_delays.relearn(request))
    assert robots.asked == 1
    state = mw.hosts.get("slow.test")
    assert state.crawl_delay == delay
    assert (state.parked_until == math.inf) is parked
    assert mw.stats.get_value("politeness/crawl_delay_relearnt") == 1
    if parked:
        with pytest.raises(IgnoreRequest):
            mw.dropped.check("slow.test", 1e6)


def test_the_eviction_pass_drops_the_robots_parsers_of_idle_hosts() -> None:
    """Wired as in a crawl: ``robots_parsed`` records the netloc, the middleware's
    eviction pass drops the parser of a host idle a minute from Scrapy's map and
    keeps that of a host whose Crawl-delay it must still honour."""
    from scrapy import Request, signals

    mw = _mw(ROBOTSTXT_OBEY=True)
    robots = _Robots("User-agent: *\nCrawl-delay: 7\n")
    plain = _Robots("User-agent: *\nDisallow:\n")
    parsers: dict[str, Any] = {"slow.test": robots.parser, "plain.test:8080": plain.parser}
    mw.periodic.robots._map, mw.periodic.robots._looked_up = parsers, True
    for url, parser in (("http://slow.test/", robots.parser),
                        ("http://plain.test:8080/", plain.parser)):
        mw.crawler.signals.send_catch_log(signals.robots_parsed, robotparser=parser,
                                          request=Request(url))
    assert mw.hosts.whole("slow.test") is not None  # its Crawl-delay learnt
    assert mw.hosts.get("slow.test").crawl_delay == 7.0
    mw.hosts.get("plain.test")
    mw.hosts.touch("plain.test", 0.0)  # a state, idle since 0 (kept: POLITENESS_IDLE_TTL)
    mw.periodic.evict(100.0)
    assert mw.hosts.whole("plain.test") is not None
    assert list(parsers) == ["slow.test"]
    assert mw.stats.get_value("politeness/robots/parsers_dropped") == 1
