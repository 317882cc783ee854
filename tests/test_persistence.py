"""JOBDIR persistence of learnt host state: round trip, clocks, bad files, real crawls."""

from __future__ import annotations

import ast
import itertools
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from crawling import farm_settings, run_crawl
from scrapy.utils.test import get_crawler

from scrapy_politeness.jobdir import persistence
from scrapy_politeness.jobdir.learnt_state import JobState
from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.policy import Config, HostTable, IPTable
from scrapy_politeness.settings import PolitenessSettings

CONFIG = Config(default=1.0, floor=0.25, ceiling=60.0)


def _learnt_table(now: float) -> HostTable:
    table = HostTable(CONFIG, dead_after=5)
    slow = table.get("slow.test")
    slow.adaptive, slow.latency, slow.ceiling_streak = 8.0, 0.35, 2
    slow.last_start, slow.touched = now - 1.5, now - 1.0
    slow.not_before = now + 20.0  # a Retry-After window
    polite = table.get("polite.test")
    polite.crawl_delay = 3.0
    dead = table.get("dead.test")
    dead.adaptive, dead.dead, dead.ceiling_streak = 60.0, True, 5
    parked = table.get("parked.test")
    parked.parked_until = now + 100.0
    skipped = table.get("skipped.test")
    skipped.parked_until = math.inf
    table.get("fresh.test")  # at rest, never fetched
    return table


def test_round_trip_converts_the_monotonic_clocks(tmp_path: Path) -> None:
    old_now, new_now, wall = 5000.0, 12.0, 1_700_000_000.0
    path = tmp_path / persistence.STATE_FILE
    persistence.save(path, persistence.snapshot(_learnt_table(old_now).items(), old_now, wall))
    doc = persistence.load(path)
    assert doc is not None
    assert doc["version"] == 1
    assert doc["saved_at"] == wall
    assert doc["hosts"]["slow.test"]["adaptive"] == 8.0
    assert doc["hosts"]["slow.test"]["not_before_in"] == 20.0
    assert doc["hosts"]["skipped.test"]["parked_for"] == "forever"
    assert "since_last_start" not in doc["hosts"]["fresh.test"]

    table = HostTable(CONFIG, dead_after=5)
    restored = dict(persistence.restore(table, doc, new_now, wall + 4.0))  # 4 s later
    assert set(restored) == {"slow.test", "polite.test", "dead.test", "parked.test",
                             "skipped.test", "fresh.test"}
    slow = table.get("slow.test")
    assert (slow.adaptive, slow.latency, slow.ceiling_streak) == (8.0, 0.35, 2)
    assert slow.interval() == 8.0  # not restarted at the default
    assert slow.not_before == pytest.approx(new_now + 20.0 - 4.0)
    assert slow.last_start == pytest.approx(new_now - 1.5 - 4.0)
    assert slow.touched == pytest.approx(new_now - 1.0 - 4.0)
    assert slow.eligible_at() == pytest.approx(new_now + 16.0)
    assert table.get("polite.test").crawl_delay == 3.0
    assert table.get("polite.test").interval() == 3.0
    assert table.get("dead.test").dead is True
    assert table.get("parked.test").parked_until == pytest.approx(new_now + 96.0)
    assert table.get("skipped.test").parked_until == math.inf
    fresh = table.get("fresh.test")
    assert (fresh.adaptive, fresh.dead, fresh.parked_until) == (1.0, False, 0.0)


def test_waits_that_ran_out_while_stopped_are_not_restored(tmp_path: Path) -> None:
    doc = persistence.snapshot(_learnt_table(100.0).items(), 100.0, 1000.0)
    table = HostTable(CONFIG)
    persistence.restore(table, doc, 7.0, 1000.0 + 500.0)  # 500 s later
    assert table.get("parked.test").parked_until == 0.0
    assert table.get("slow.test").not_before == 0.0
    assert table.get("slow.test").adaptive == 8.0  # the learnt interval stays
    assert table.get("skipped.test").parked_until == math.inf


def test_compact_verdicts_of_idle_hosts_are_saved_and_restored(tmp_path: Path) -> None:
    """Hosts evicted for idleness keep their verdicts as compact records; JOBDIR saves those."""
    now = 5000.0
    table = _learnt_table(now)
    table.touch("dead.test", now - 10.0)  # its last outcome
    for key in ("polite.test", "skipped.test"):  # used within the ceiling: records kept
        table.touch(key, now - 20.0)
    table.touch("slow.test", now - 1.0)  # the most recently touched
    table.evict(now - 5.0)  # everything but slow.test (Retry-After window) goes compact
    assert table.whole("polite.test") is None
    assert table.whole("dead.test") is None
    mw = _middleware(JOBDIR=str(tmp_path))
    mw.jobstate.save(table, IPTable(0.25), now, mw.stats)
    doc = persistence.load(tmp_path / persistence.STATE_FILE)
    assert doc is not None
    assert {"polite.test", "dead.test", "parked.test", "skipped.test"} <= set(doc["hosts"])
    restored = HostTable(CONFIG, dead_after=5)
    persistence.restore(restored, doc, 12.0, doc["saved_at"] + 1.0)
    assert restored.get("polite.test").crawl_delay == 3.0
    assert restored.get("dead.test").dead is True
    assert restored.get("skipped.test").parked_until == math.inf
    assert restored.get("parked.test").parked_until == pytest.approx(12.0 + 99.0, abs=0.1)


def test_restored_hosts_are_evicted_the_most_idle_first() -> None:
    doc = {"version": 1, "saved_at": 1000.0, "hosts": {
        "recent.test": {"adaptive": 2.0, "idle_for": 1.0},
        "idle.test": {"adaptive": 2.0, "idle_for": 250.0}}}
    table = HostTable(CONFIG)
    persistence.restore(table, doc, 500.0, 1000.0)
    # idle.test was touched at 250, recent.test at 499: a cutoff at 300 forgets the first
    assert table.evict(300.0) == 1
    assert [k for k, _ in table.items()] == ["recent.test"]


def test_ip_waits_round_trip_on_the_wall_clock(tmp_path: Path) -> None:
    ips = IPTable(0.25)
    ips.spend("10.0.0.1", 4998.0, 8.0)   # free at 5006: 6 s left at saving
    ips.spend("10.0.0.2", 4990.0, 1.0)   # free since 4991: nothing left
    path = tmp_path / persistence.STATE_FILE
    persistence.save(path, persistence.snapshot([], 5000.0, 1_000.0, ips.items()))
    doc = persistence.load(path)
    assert doc is not None
    assert doc["ips"] == {"10.0.0.1": 6.0}
    restored = IPTable(0.25)
    assert persistence.restore_ips(restored, doc, 12.0, 1_000.0 + 4.0) == 1  # 4 s later
    assert restored.eligible_at("10.0.0.1") == pytest.approx(12.0 + 2.0)
    assert restored.eligible_at("10.0.0.2") == 0.0
    late = IPTable(0.25)
    assert persistence.restore_ips(late, doc, 12.0, 1_000.0 + 7.0) == 0  # ran out meanwhile
    assert late.eligible_at("10.0.0.1") == 0.0


def test_a_file_without_ips_still_loads(tmp_path: Path) -> None:
    path = tmp_path / persistence.STATE_FILE
    path.write_text(json.dumps(_good()))
    doc = persistence.load(path)
    assert doc is not None
    assert persistence.restore_ips(IPTable(0.0), doc, 0.0, 2.0) == 0


def test_restore_clamps_into_the_current_band() -> None:
    doc = persistence.snapshot(_learnt_table(0.0).items(), 0.0, 0.0)
    table = HostTable(Config(default=1.0, floor=0.25, ceiling=4.0))
    persistence.restore(table, doc, 0.0, 0.0)
    assert table.get("slow.test").adaptive == 4.0


def test_save_is_atomic_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / persistence.STATE_FILE
    persistence.save(path, {"version": 1, "saved_at": 1.0, "hosts": {}})
    with pytest.raises(ValueError, match="Out of range float"):
        persistence.save(path, {"version": 1, "saved_at": math.nan, "hosts": {}})
    assert json.loads(path.read_text())["saved_at"] == 1.0  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == [persistence.STATE_FILE]


def _good() -> dict[str, Any]:
    return {"version": 1, "saved_at": 1.0, "hosts": {"a.test": {
        "adaptive": 2.0, "crawl_delay": 0.0, "latency": 0.1, "dead": False,
        "ceiling_streak": 0, "parked_for": 0.0, "not_before_in": 0.0}}}


def _with(path: tuple[str, ...], value: Any) -> str:
    doc = _good()
    target: Any = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return json.dumps(doc)


BAD_FILES = {
    "empty": "",
    "truncated": json.dumps(_good())[:40],
    "not json": "politeness!",
    "a list": "[1, 2]",
    "no version": json.dumps({"saved_at": 1.0, "hosts": {}}),
    "wrong version": _with(("version",), 2),
    "saved_at string": _with(("saved_at",), "yesterday"),
    "hosts a list": _with(("hosts",), []),
    "entry a number": _with(("hosts", "a.test"), 3),
    "adaptive string": _with(("hosts", "a.test", "adaptive"), "8"),
    "adaptive zero": _with(("hosts", "a.test", "adaptive"), 0),
    "adaptive missing": json.dumps({"version": 1, "saved_at": 1.0,
                                    "hosts": {"a.test": {"dead": False}}}),
    "negative delay": _with(("hosts", "a.test", "crawl_delay"), -1),
    "nan latency": _with(("hosts", "a.test", "latency"), math.nan),
    "dead a string": _with(("hosts", "a.test", "dead"), "no"),
    "streak a float": _with(("hosts", "a.test", "ceiling_streak"), 1.5),
    "streak a bool": _with(("hosts", "a.test", "ceiling_streak"), True),
    "parked garbage": _with(("hosts", "a.test", "parked_for"), "soon"),
    "ips a list": _with(("ips",), ["10.0.0.1"]),
    "ip wait negative": _with(("ips",), {"10.0.0.1": -1.0}),
    "ip wait a string": _with(("ips",), {"10.0.0.1": "3"}),
}


@pytest.mark.parametrize("content", list(BAD_FILES.values()), ids=list(BAD_FILES))
def test_bad_files_are_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / persistence.STATE_FILE
    path.write_text(content, encoding="utf-8")
    with pytest.raises(persistence.StateError):
        persistence.load(path)


def test_missing_file_is_a_fresh_start(tmp_path: Path) -> None:
    assert persistence.load(tmp_path / "nothing.json") is None


def _middleware(**settings: Any) -> PolitenessMiddleware:
    crawler = get_crawler(settings_dict=settings)
    return PolitenessMiddleware(crawler, PolitenessSettings.from_settings(crawler.settings))


@pytest.mark.parametrize("content", [BAD_FILES["truncated"], BAD_FILES["wrong version"],
                                     BAD_FILES["adaptive string"]],
                         ids=["truncated", "wrong version", "wrong type"])
def test_middleware_warns_and_starts_fresh_on_a_bad_file(
        tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / persistence.STATE_FILE).write_text(content, encoding="utf-8")
    mw = _middleware(JOBDIR=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="scrapy_politeness.middleware"):
        mw.jobstate.restore(mw.hosts, mw.ips, 0.0, mw.stats, None)
    assert len(mw.hosts) == 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "ignoring the saved host state" in warnings[0].getMessage()
    assert persistence.STATE_FILE in warnings[0].getMessage()


def test_middleware_state_file_only_with_jobdir_persist_and_no_shared_backend(
        tmp_path: Path) -> None:
    assert _middleware().jobstate.path is None
    assert _middleware(JOBDIR=str(tmp_path), POLITENESS_PERSIST=False).jobstate.path is None
    mw = _middleware(JOBDIR=str(tmp_path / "job"))
    assert mw.jobstate.path == str(tmp_path / "job" / persistence.STATE_FILE)
    # a shared backend keeps the state itself
    settings = PolitenessSettings.from_settings(mw.crawler.settings)
    assert JobState(settings, mw.crawler.settings, shared=True).path is None
    with pytest.raises(ValueError, match="POLITENESS_PERSIST must be True or False"):
        PolitenessSettings.from_settings({"POLITENESS_PERSIST": "maybe"})


def test_resumed_crawl_starts_a_backed_off_host_at_its_learnt_interval(
        farm_factory: Any, tmp_path: Path) -> None:
    spec = {"ips": ["127.0.0.2"], "hosts": {
        "broken.farm.test": {"ip": "127.0.0.2", "kind": "always_503", "pages": 3},
    }}
    farm = farm_factory(spec)
    jobdir = tmp_path / "job"
    settings = farm_settings(farm, JOBDIR=str(jobdir), RETRY_ENABLED=False,
                             POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3,
                             POLITENESS_REPORT_STAT=True)
    urls = [farm.url("broken.farm.test", f"/p/{i}") for i in range(3)]
    first = run_crawl(urls, settings, follow=False)
    # 0.3 -> 0.6 -> 1.2 -> 2.4 after three 503s.
    assert ast.literal_eval(first.stat("politeness/report"))[0]["interval"] == 2.4
    saved = json.loads((jobdir / persistence.STATE_FILE).read_text())
    assert saved["version"] == 1
    assert saved["hosts"]["broken.farm.test"]["adaptive"] == 2.4
    assert first.stat("politeness/state/saved_hosts") == 1

    farm.reset()
    trace = tmp_path / "trace.jsonl"
    second = run_crawl(urls[:1], {**settings, "POLITENESS_TRACE": str(trace)}, follow=False)
    assert second.stat("politeness/state/restored_hosts") == 1
    # The first fetch of the resumed crawl was decided at 2.4 s, not at the 0.3 s default.
    assert [item["interval"] for item in second.items] == [2.4]
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    restored = [r for r in records if r["type"] == "restored"]
    assert [(r["host"], r["interval"]) for r in restored] == [("broken.farm.test", 2.4)]
    dispatch = [r for r in records if r["type"] == "dispatch"]
    assert [r["interval"] for r in dispatch] == [2.4]
    assert len(farm.arrivals()) == 1
    assert json.loads((jobdir / persistence.STATE_FILE).read_text()
                      )["hosts"]["broken.farm.test"]["adaptive"] == 4.8


def test_an_unlearnt_default_is_not_carried_into_a_run_with_a_new_default() -> None:
    """A host still at the old run's default learnt nothing: the new default applies."""
    old = HostTable(Config(default=5.0, floor=5.0), dead_after=5)
    old.start("idle.test", 100.0)
    old.start("sick.test", 100.0)
    old.feedback("sick.test", persistence_signal(503), 100.5)  # learnt: 10 s
    doc = persistence.snapshot(old.items(), 101.0, 1_700_000_000.0)
    new = HostTable(Config(default=0.5, floor=0.25), dead_after=5)
    persistence.restore(new, doc, 1.0, 1_700_000_001.0)
    assert new.get("idle.test").adaptive == 0.5
    assert new.get("sick.test").adaptive == 10.0


def persistence_signal(status: int) -> Any:
    from scrapy_politeness.policy import Signal

    return Signal(status)


def test_recovery_memory_round_trips(tmp_path: Path) -> None:
    table = HostTable(Config(recovery="fast"))
    state = table.get("api.test")
    state.adaptive, state.fail_at, state.good_at = 0.52, 0.42, 0.52
    state.healthy_run, state.fail_cost = 7, 5.0
    table.get("fresh.test")
    path = tmp_path / persistence.STATE_FILE
    persistence.save(path, persistence.snapshot(table.items(), 10.0, 1000.0))
    doc = persistence.load(path)
    assert doc is not None
    assert doc["hosts"]["api.test"]["recovery"] == {"fail_at": 0.42, "good_at": 0.52,
                                                    "healthy_run": 7, "fail_cost": 5.0}
    assert "recovery" not in doc["hosts"]["fresh.test"]  # nothing learnt, nothing written
    resumed = HostTable(Config(recovery="fast"))
    persistence.restore(resumed, doc, 0.0, 1010.0)
    back = resumed.get("api.test")
    assert (back.adaptive, back.fail_at, back.good_at, back.healthy_run, back.fail_cost) == (
        0.52, 0.42, 0.52, 7, 5.0)


@pytest.mark.parametrize("memory", [[], {"fail_at": -1.0}, {"good_at": "0.5"},
                                    {"healthy_run": 1.5}, {"fail_cost": math.inf}])
def test_a_bad_recovery_memory_is_refused(tmp_path: Path, memory: Any) -> None:
    path = tmp_path / persistence.STATE_FILE
    path.write_text(_with(("hosts", "a.test", "recovery"), memory))
    with pytest.raises(persistence.StateError, match="recovery"):
        persistence.load(path)


def test_a_resumed_crawl_keeps_the_learnt_pace_of_a_rate_limited_host(
        farm_factory: Any, tmp_path: Path) -> None:
    """Real crawls: the first learns a 2/s token bucket's pace (a 429 and its
    5 s pause); the resumed one starts at that pace without a 429 to relearn it."""
    host = "bucket.farm.test"
    spec = {"ips": ["127.0.0.2"], "hosts": {host: {
        "ip": "127.0.0.2", "kind": "rate_limited", "rate_interval": 0.5, "burst": 1,
        "retry_after": 5, "pages": 30}}}
    farm = farm_factory(spec)
    jobdir = tmp_path / "job"
    settings = farm_settings(farm, JOBDIR=str(jobdir), POLITENESS_DEFAULT=1.0,
                             POLITENESS_FLOOR=0.25, POLITENESS_IP_FLOOR=0.25)
    run_crawl([farm.url(host, f"/p/{i}") for i in range(15)], settings, follow=False)
    first = [a.status for a in farm.arrivals()]
    assert 429 in first
    assert first.count(200) == 15
    memory = json.loads((jobdir / persistence.STATE_FILE).read_text())["hosts"][host]["recovery"]
    assert 0 < memory["fail_at"] < 0.5 <= memory["good_at"] < 1.0

    farm.reset()
    run_crawl([farm.url(host, f"/p/{i}") for i in range(15, 30)], settings, follow=False)
    second = farm.arrivals()
    assert [a.status for a in second] == [200] * 15  # no 429 to relearn the pace
    gaps = [b.t - a.t for a, b in itertools.pairwise(second)]
    assert max(gaps[1:]) < 0.75  # the learnt pace from the start, not the 1 s default


def test_a_suspended_host_resumes_suspended_with_its_cool_down_step(tmp_path: Path) -> None:
    """The breaker's doubling is kept across a pause: a host whose probe failed
    twice resumes suspended, and its next failed probe doubles the 40 s step it
    had reached, not the first 10 s."""
    from scrapy_politeness.policy import Signal
    from scrapy_politeness.policy.breaker import Verdict

    mw = _middleware(JOBDIR=str(tmp_path), POLITENESS_SUSPEND_COOLDOWN=10.0)
    breaker = mw.suspended.breaker
    state = mw.hosts.get("down.test")
    now = 1000.0
    assert breaker.judge("down.test", state, tripped=True, sent_at=now, failed=True,
                         now=now) is Verdict.SUSPENDED
    for _ in range(2):  # two probes, both failed: 20 s, then 40 s
        now = breaker.get("down.test").until  # type: ignore[union-attr]
        breaker.judge("down.test", state, tripped=True, sent_at=now, failed=True, now=now)
    assert breaker.get("down.test").cooldown == 40.0  # type: ignore[union-attr]
    mw.jobstate.save(mw.hosts, mw.ips, now + 15.0, mw.stats)

    again = _middleware(JOBDIR=str(tmp_path), POLITENESS_SUSPEND_COOLDOWN=10.0)
    again.jobstate.restore(again.hosts, again.ips, 7.0, again.stats, None)
    restored = again.suspended.breaker.get("down.test")
    assert restored is not None
    assert restored.cooldown == 40.0
    assert restored.probes == 2
    assert 7.0 < restored.until <= 7.0 + 25.0  # 25 s of its 40 s were left, less the pause
    assert again.suspended.breaker.suspended("down.test", 8.0)
    state = again.hosts.get("down.test")
    assert state.not_before == pytest.approx(restored.until, abs=1.0)  # held in the queue too
    probe_at = restored.until
    again.hosts.feedback("down.test", Signal(503), probe_at)
    assert again.suspended.breaker.judge("down.test", state, tripped=False, sent_at=probe_at,
                                         failed=True, now=probe_at) is Verdict.RESUSPENDED
    assert again.suspended.breaker.get("down.test").cooldown == 80.0  # type: ignore[union-attr]


def test_a_saved_suspension_that_is_garbage_is_refused() -> None:
    from scrapy_politeness.jobdir import suspensions

    document = persistence.snapshot([], 0.0, 1.0)
    document["suspended"] = {"down.test": {"probe_in": 5.0, "cooldown": -1.0}}
    with pytest.raises(persistence.StateError, match="cooldown"):
        suspensions.check(document)
