"""IPTable and HostTable: the bucket timestamps, AIMD feedback, dead hosts, eviction."""

from __future__ import annotations

import math

import pytest

from scrapy_politeness.policy import Config, HostTable, IPTable, Outcome, Signal

# -- IPTable -------------------------------------------------------------------


def test_ip_eligible_unknown_is_zero() -> None:
    t = IPTable(0.25)
    assert t.eligible_at("127.0.9.1") == 0.0
    assert len(t) == 0


def test_ip_spend_pushes_by_max_of_floor_and_interval() -> None:
    t = IPTable(0.5)
    t.spend("127.0.9.1", 100.0, 2.0)
    assert t.eligible_at("127.0.9.1") == 102.0
    t.spend("127.0.9.2", 100.0, 0.1)  # host faster than the IP floor: floor wins
    assert t.eligible_at("127.0.9.2") == 100.5
    assert t.eligible_at("127.0.9.3") == 0.0
    assert len(t) == 2


@pytest.mark.parametrize("ip", ["", None, "0.0.0.0", "::"])
def test_ip_zero_address_is_a_noop(ip: str | None) -> None:
    t = IPTable(0.25)
    t.spend(ip, 100.0, 5.0)
    assert t.eligible_at(ip) == 0.0
    assert len(t) == 0


def test_ip_never_moves_backwards() -> None:
    t = IPTable(0.25)
    t.spend("127.0.9.1", 10.0, 30.0)  # -> 40
    t.spend("127.0.9.1", 12.0, 1.0)  # -> 13 would move it back: kept at 40
    assert t.eligible_at("127.0.9.1") == 40.0
    t.spend("127.0.9.1", 40.0, 1.0)
    assert t.eligible_at("127.0.9.1") == 41.0


def test_ip_evict_drops_at_or_before_cutoff() -> None:
    t = IPTable(1.0)
    t.spend("a", 0.0, 1.0)  # 1
    t.spend("b", 0.0, 5.0)  # 5
    t.spend("c", 0.0, 10.0)  # 10
    assert t.evict(5.0) == 2  # a (1 <= 5) and b (5 <= 5)
    assert len(t) == 1
    assert t.eligible_at("a") == 0.0
    assert t.eligible_at("b") == 0.0
    assert t.eligible_at("c") == 10.0
    assert t.evict(9.99) == 0
    assert t.evict(10.0) == 1
    assert len(t) == 0


def test_ip_negative_floor_raises() -> None:
    with pytest.raises(ValueError, match="floor"):
        IPTable(-0.1)
    assert IPTable(0.0).floor == 0.0


# -- HostTable: get / start / eligible ---------------------------------------

def test_get_creates_at_default() -> None:
    h = HostTable(Config(default=2.0))
    assert "a.com" not in h
    assert h.peek("a.com") is None
    s = h.get("a.com")
    assert "a.com" in h
    assert len(h) == 1
    assert s.adaptive == 2.0
    assert s.interval() == 2.0
    assert s.crawl_delay == 0.0
    assert not s.dead
    assert h.get("a.com") is s
    assert h.peek("a.com") is s


def test_get_uses_per_host_override() -> None:
    slow = Config(default=5.0, floor=5.0, ceiling=100.0)
    h = HostTable(Config(), overrides={"slow.com": slow})
    assert h.get("slow.com").config is slow
    assert h.get("slow.com").interval() == 5.0
    assert h.get("other.com").config == Config()
    assert h.get("other.com").interval() == 1.0


def test_fresh_host_is_eligible_immediately() -> None:
    h = HostTable(Config())
    assert h.get("a.com").eligible_at() <= 0.0


def test_start_records_last_start_and_returns_interval() -> None:
    h = HostTable(Config(default=1.5))
    assert h.start("a.com", 10.0) == 1.5
    s = h.get("a.com")
    assert s.last_start == 10.0
    assert s.touched == 10.0
    assert s.eligible_at() == 11.5


def test_interval_is_evaluated_at_query_time() -> None:
    h = HostTable(Config())
    h.start("a.com", 10.0)
    assert h.get("a.com").eligible_at() == 11.0
    h.get("a.com").crawl_delay = 4.0  # learnt after the start
    assert h.get("a.com").eligible_at() == 14.0
    h.set_crawl_delay("a.com", 7.0)
    assert h.get("a.com").eligible_at() == 17.0


def test_host_table_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="dead_after"):
        HostTable(Config(), dead_after=0)
    with pytest.raises(ValueError, match="latency_alpha"):
        HostTable(Config(), latency_alpha=0.0)
    with pytest.raises(ValueError, match="latency_alpha"):
        HostTable(Config(), latency_alpha=1.5)


# -- HostTable: feedback ------------------------------------------------------

def test_feedback_429_doubles() -> None:
    h = HostTable(Config())
    h.start("a.com", 0.0)
    out = h.feedback("a.com", Signal(429), 0.5)
    assert out == Outcome(before=1.0, after=2.0, backed_off=True, soft_widened=False,
                          became_dead=False)
    assert h.get("a.com").adaptive == 2.0
    assert h.get("a.com").eligible_at() == 2.0  # last_start 0 + 2
    out = h.feedback("a.com", Signal(503), 1.0)
    assert (out.before, out.after, out.backed_off) == (2.0, 4.0, True)


def test_feedback_transport_error_backs_off_and_keeps_latency() -> None:
    h = HostTable(Config())
    h.feedback("a.com", Signal(200, latency=0.4), 0.0)
    out = h.feedback("a.com", Signal(0, latency=30.0), 1.0)
    assert out.backed_off
    assert out.after == pytest.approx(1.9)  # 0.95 * 2
    assert h.get("a.com").latency == 0.4  # a timeout's "latency" is not a sample


def test_feedback_retry_after_sets_not_before_and_floors_interval() -> None:
    h = HostTable(Config())
    h.start("a.com", 100.0)
    out = h.feedback("a.com", Signal(429, retry_after=10.0), 100.5)
    s = h.get("a.com")
    assert s.not_before == 110.5
    assert s.adaptive == 10.0  # RA beats 1 * 2
    assert out.after == 10.0
    assert s.eligible_at() == 110.5  # max(100 + 10, 110.5)
    # A later, shorter Retry-After never pulls not_before back.
    h.feedback("a.com", Signal(429, retry_after=1.0), 101.0)
    assert s.not_before == 110.5


def test_feedback_retry_after_on_healthy_response_sets_not_before_only() -> None:
    h = HostTable(Config())
    h.feedback("a.com", Signal(200, retry_after=30.0), 5.0)
    s = h.get("a.com")
    assert s.not_before == 35.0
    assert s.adaptive == pytest.approx(0.95)
    assert s.eligible_at() == 35.0


def test_feedback_retry_after_beyond_ceiling_is_clamped_in_interval_not_window() -> None:
    h = HostTable(Config(ceiling=60.0))
    out = h.feedback("a.com", Signal(429, retry_after=600.0), 0.0)
    assert out.after == 60.0
    assert h.get("a.com").adaptive == 60.0
    assert h.get("a.com").not_before == 600.0


def test_adaptive_is_stored_clamped_to_band() -> None:
    h = HostTable(Config(), dead_after=1000)
    for i in range(100):
        h.feedback("a.com", Signal(200), float(i))
    assert h.get("a.com").adaptive == 0.25
    # One failure from the floor: 0.5, not (winded-down value) * 2.
    h.feedback("a.com", Signal(503), 100.0)
    assert h.get("a.com").adaptive == 0.5
    for i in range(20):
        h.feedback("a.com", Signal(503), 101.0 + i)
    assert h.get("a.com").adaptive == 60.0
    # One healthy fetch from the ceiling: 59.95, not (huge value) - 0.05.
    h.feedback("a.com", Signal(200), 200.0)
    assert h.get("a.com").adaptive == pytest.approx(59.95)


def test_latency_ewma_and_soft_widen() -> None:
    h = HostTable(Config())
    out = h.feedback("a.com", Signal(200, latency=1.0), 0.0)
    assert h.get("a.com").latency == 1.0  # first sample taken as is
    assert not out.soft_widened
    assert out.after == pytest.approx(0.95)  # no previous latency: no rise check
    # 1.5 == 1.0 * 1.5: exactly at the threshold does not widen.
    out = h.feedback("a.com", Signal(200, latency=1.5), 1.0)
    assert not out.soft_widened
    assert out.after == pytest.approx(0.90)
    assert h.get("a.com").latency == pytest.approx(0.3 * 1.5 + 0.7 * 1.0)  # 1.15
    out = h.feedback("a.com", Signal(200, latency=2.0), 2.0)
    assert out.soft_widened  # 2.0 > 1.15 * 1.5
    assert not out.backed_off
    assert out.after == pytest.approx(0.90 * 1.25)
    assert h.get("a.com").latency == pytest.approx(0.3 * 2.0 + 0.7 * 1.15)


def test_feedback_uses_the_tables_latency_not_the_callers_prev() -> None:
    h = HostTable(Config())
    h.feedback("a.com", Signal(200, latency=1.0), 0.0)
    # The caller's prev_latency (100) is ignored; the smoothed 1.0 is used: 2 > 1.5 rises.
    out = h.feedback("a.com", Signal(200, latency=2.0, prev_latency=100.0), 1.0)
    assert out.soft_widened


def test_failure_with_rising_latency_is_a_backoff_not_a_soft_widen() -> None:
    h = HostTable(Config())
    h.feedback("a.com", Signal(200, latency=1.0), 0.0)
    out = h.feedback("a.com", Signal(503, latency=10.0), 1.0)
    assert out.backed_off
    assert not out.soft_widened
    assert out.after == pytest.approx(0.95 * 2)


def test_custom_latency_alpha() -> None:
    h = HostTable(Config(), latency_alpha=0.5)
    h.feedback("a.com", Signal(200, latency=1.0), 0.0)
    h.feedback("a.com", Signal(200, latency=3.0), 1.0)
    assert h.get("a.com").latency == 2.0


def test_dead_after_consecutive_ceiling_outcomes() -> None:
    h = HostTable(Config(default=15.0, ceiling=60.0), dead_after=3)
    deaths = []
    for i in range(3):  # 30, 60, 60: only two at the ceiling so far
        deaths.append(h.feedback("a.com", Signal(503), float(i)).became_dead)
    assert h.get("a.com").ceiling_streak == 2
    assert not h.get("a.com").dead
    out = h.feedback("a.com", Signal(503), 3.0)
    assert out.became_dead
    assert h.get("a.com").dead
    deaths.append(out.became_dead)
    for i in range(5):  # stays dead, reported once
        deaths.append(h.feedback("a.com", Signal(503), 4.0 + i).became_dead)
    assert deaths.count(True) == 1
    assert deaths == [False, False, False, True, False, False, False, False, False]


def test_ceiling_streak_resets_on_a_non_ceiling_outcome() -> None:
    h = HostTable(Config(default=60.0, floor=0.25, ceiling=60.0), dead_after=3)
    assert not h.feedback("a.com", Signal(503), 0.0).became_dead  # streak 1
    assert not h.feedback("a.com", Signal(503), 1.0).became_dead  # streak 2
    h.feedback("a.com", Signal(200), 2.0)  # 59.95: streak 0
    assert h.get("a.com").ceiling_streak == 0
    assert not h.feedback("a.com", Signal(503), 3.0).became_dead  # 1
    assert not h.feedback("a.com", Signal(503), 4.0).became_dead  # 2
    assert not h.get("a.com").dead
    assert h.feedback("a.com", Signal(503), 5.0).became_dead  # 3
    assert h.get("a.com").dead


def test_dead_after_one() -> None:
    h = HostTable(Config(default=60.0), dead_after=1)
    assert h.feedback("a.com", Signal(503), 0.0).became_dead


def test_crawl_delay_alone_never_kills_a_host() -> None:
    h = HostTable(Config(), dead_after=2)
    h.get("slow.com").crawl_delay = 120.0  # above the ceiling, and honoured
    for i in range(50):
        out = h.feedback("slow.com", Signal(200), float(i))
        assert out.after == 120.0
        assert not out.became_dead
    s = h.get("slow.com")
    assert not s.dead
    assert s.ceiling_streak == 0
    assert s.interval() == 120.0
    assert s.adaptive == 0.25


# -- HostTable: evict ---------------------------------------------------------

def _table_with_states() -> HostTable:
    h = HostTable(Config(), dead_after=1)
    # idle, at rest: narrowed after one healthy fetch
    h.start("idle.com", 0.0)
    h.feedback("idle.com", Signal(200), 0.5)
    # backed off (adaptive 2 > default 1)
    h.start("backoff.com", 0.0)
    h.feedback("backoff.com", Signal(503), 0.5)
    # dead
    h.get("dead.com").adaptive = 60.0
    h.feedback("dead.com", Signal(503), 0.5)
    assert h.get("dead.com").dead
    # crawl-delay
    h.start("cd.com", 0.0)
    h.get("cd.com").crawl_delay = 3.0
    h.feedback("cd.com", Signal(200), 0.5)
    # under a Retry-After window (healthy status, so adaptive is at rest)
    h.start("ra.com", 0.0)
    h.feedback("ra.com", Signal(200, retry_after=1000.0), 0.5)
    # touched after the cutoff
    h.start("recent.com", 200.0)
    return h


def test_evict_keeps_hosts_that_are_not_at_rest() -> None:
    h = _table_with_states()
    assert len(h) == 6
    assert h.evict(50.0) == 4
    assert "idle.com" not in h
    assert "backoff.com" not in h  # merely backed off: forgotten after the idle time
    # dead.com and cd.com left their full state for a compact record
    assert sorted(k for k, _ in h.items()) == ["ra.com", "recent.com"]
    assert "dead.com" in h
    assert "cd.com" in h
    assert h.verdicts.counts() == (1, 1, 0)
    # Once the Retry-After window is over, that host goes too.
    assert h.evict(199.0) == 0
    # ra.com's window is over, and recent.com (touched at 200) is back at rest.
    assert h.evict(1000.5) == 2
    assert len(h) == 0
    # The dead verdict ran out (ceiling + idle after its last renewal), and so
    # did the Crawl-delay (ceiling + idle after the host's last use): the glue
    # reads it again from robots.txt if the host comes back.
    assert h.verdicts.counts() == (0, 0, 0)
    assert "dead.com" not in h
    assert h.get("cd.com").crawl_delay == 0.0


def test_a_dead_host_evicted_is_still_dead_and_a_drop_renews_it() -> None:
    h = HostTable(Config(ceiling=60.0), dead_after=1)
    h.get("dead.com").adaptive = 60.0
    h.feedback("dead.com", Signal(503), 10.0)
    assert h.evict(50.0) == 1
    assert len(h) == 0
    assert "dead.com" in h
    # still dropped: the record comes back whole on the next look-up
    state = h.peek("dead.com")
    assert state is not None
    assert state.dead
    assert state.touched == 10.0
    assert len(h) == 1
    h.touch("dead.com", 500.0)  # a request came and was dropped
    assert h.evict(499.0) == 0  # touched after the cutoff: whole
    assert h.evict(500.0) == 1  # a record again, renewed at 500
    h.evict(500.0 + 60.0 - 1.0)  # the ceiling not yet past the renewal
    assert "dead.com" in h
    h.evict(500.0 + 60.0)
    assert "dead.com" not in h  # forgotten: a new host if it comes back
    assert not h.get("dead.com").dead


def test_parked_host_evicted_stays_parked_until_its_end() -> None:
    h = HostTable(Config())
    h.get("forever.com").parked_until = math.inf
    h.get("later.com").parked_until = 500.0
    h.get("forever.com").crawl_delay = 120.0  # skipped: parked for good instead
    h.touch("forever.com", 90.0)
    assert h.evict(100.0) == 2
    assert h.verdicts.counts() == (0, 1, 1)
    assert h.peek("later.com").parked_until == 500.0  # type: ignore[union-attr]
    assert h.peek("forever.com").parked_until == math.inf  # type: ignore[union-attr]
    h.touch("forever.com", 90.0)
    assert h.evict(100.0) == 2
    assert h.evict(500.0) == 0
    assert "later.com" not in h  # its park ended: nothing left to remember
    # Parked for good while it matters, forgotten a ceiling after the cutoff passed
    # its last use (90): the glue reads the skipped Crawl-delay again from
    # robots.txt if the host comes back, parking it again.
    assert "forever.com" not in h


def test_eviction_pops_from_the_least_recently_touched_end() -> None:
    h = HostTable(Config(default=1.0, floor=1.0))
    for i in range(5):
        h.start(f"h{i}.com", float(i))
    h.start("h0.com", 10.0)  # touched again: now the most recent
    assert h.evict(5.0) == 4
    assert [k for k, _ in h.items()] == ["h0.com"]


def test_evict_keeps_a_host_whose_next_start_is_pending() -> None:
    h = HostTable(Config(default=5.0, floor=0.25))
    h.start("a.com", 10.0)  # eligible at 15
    assert h.evict(12.0) == 0
    assert h.evict(15.0) == 1


def test_evicted_host_comes_back_at_default() -> None:
    h = HostTable(Config())
    h.start("a.com", 0.0)
    for i in range(10):
        h.feedback("a.com", Signal(200), float(i))
    assert h.evict(100.0) == 1
    assert h.get("a.com").adaptive == 1.0


def test_ip_lower_moves_back_only_sooner() -> None:
    ips = IPTable(0.25)
    ips.spend("10.0.0.1", 100.0, 0.5)
    was = ips.eligible_at("10.0.0.1")  # 100.5
    ips.lower("10.0.0.1", 100.1, 0.5)  # later than now: kept
    assert ips.eligible_at("10.0.0.1") == was
    ips.lower("10.0.0.1", 99.95, 0.1)  # the IP floor still applies
    assert ips.eligible_at("10.0.0.1") == 99.95 + 0.25
    ips.lower("0.0.0.0", 1.0, 0.5)  # the zero IP has no bucket
    assert ips.eligible_at("0.0.0.0") == 0.0
