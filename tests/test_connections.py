"""The connection count and the per-IP set-up estimate (no network, no clock)."""

from __future__ import annotations

import pytest

from scrapy_politeness.downloader.connections import Connections
from scrapy_politeness.downloader.send_lateness import Dispatch, SendSlip
from scrapy_politeness.policy import Config, HostTable, IPTable


def test_a_send_takes_an_idle_connection_or_opens_one() -> None:
    conns = Connections()
    assert conns.cold("a.test")  # none idle yet
    first = Dispatch("a.test", 0.0, "127.0.0.2", cold=True)
    conns.answered(first.key, first.ip, first.cold, 0.7)
    assert conns.setup_of("127.0.0.2") == pytest.approx(0.7)
    assert not conns.cold("a.test")  # the answered one is idle again
    assert conns.cold("a.test")  # a second at once opens another
    warm = Dispatch("a.test", 1.0, "127.0.0.2")
    conns.answered(warm.key, warm.ip, warm.cold, 0.0)  # a warm answer: nothing about set-up
    assert conns.setup_of("127.0.0.2") == pytest.approx(0.7)
    assert conns.setup_of(None) == 0.0


def test_the_estimate_grows_at_once_and_shrinks_slowly() -> None:
    conns = Connections()
    conns.answered("a", "ip", True, 0.3)
    conns.answered("b", "ip", True, 0.7)
    assert conns.setup_of("ip") == pytest.approx(0.7)
    conns.answered("c", "ip", True, 0.1)
    assert 0.1 < conns.setup_of("ip") < 0.7


def test_a_cold_send_spends_its_buckets_after_the_set_up() -> None:
    hosts = HostTable(Config(default=0.5, floor=0.5, ceiling=60.0))
    ips = IPTable(0.25)
    slip = SendSlip(hosts, ips)
    slip.conns.setup["127.0.0.2"] = 0.7
    state = hosts.get("b.test")
    slip.sent(Dispatch("b.test", 10.0, "127.0.0.2"), 10.0, state)
    assert state.last_start == pytest.approx(10.7)  # the server reads it then
    assert ips.eligible_at("127.0.0.2") == pytest.approx(10.7 + 0.5)
