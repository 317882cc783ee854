"""A JOBDIR left by a forced shutdown is detected and reported loudly at resume.

Real crawls against the farm: a crawl following links is stopped by a second
Ctrl-C (SIGINT twice) or by SIGKILL, then resumed with the same JOBDIR. Scrapy
resumes it without a word and loses the pages it had queued; the plugin must
say so (a WARNING naming the consequence and the remedy, and a stat). A crawl
paused with ONE Ctrl-C must resume without that warning and lose nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from crawling import SCRIPT, farm_settings, run_crawl

from scrapy_politeness.jobdir import persistence
from scrapy_politeness.jobdir import shutdown_kind as jobdir

HOSTS = [f"j{i}.farm.test" for i in range(6)]
SLOW = "slowjob.farm.test"  # keeps downloads in flight, so a graceful close takes seconds
PAGES = 60


def _spec() -> dict[str, Any]:
    hosts: dict[str, Any] = {h: {"ip": "127.0.0.2" if i % 2 else "127.0.0.3", "pages": PAGES}
                             for i, h in enumerate(HOSTS)}
    hosts[SLOW] = {"ip": "127.0.0.4", "kind": "slow", "latency": 3.0, "pages": PAGES}
    return {"ips": ["127.0.0.2", "127.0.0.3", "127.0.0.4"], "hosts": hosts}


def _settings(farm: Any, job: Path) -> dict[str, Any]:
    return farm_settings(farm, JOBDIR=str(job), POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3,
                         POLITENESS_IP_FLOOR=0.0)


def _pages(arrivals: list[Any]) -> set[tuple[str, str]]:
    return {(a.host, a.path) for a in arrivals}


def _stop(farm: Any, job: Path, how: str, tmp: Path) -> None:
    """Start a crawl following links and stop it mid-way the way ``how`` says."""
    spec = {"urls": [farm.url(h, "/") for h in [*HOSTS, SLOW]],
            "settings": _settings(farm, job), "follow": True,
            "stats_out": str(tmp / "stats.json"), "items_out": str(tmp / "items.jsonl")}
    (tmp / "job.json").write_text(json.dumps(spec))
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(tmp / "job.json")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while SLOW not in {a.host for a in farm.arrivals()} and time.monotonic() < deadline:
        time.sleep(0.1)  # the slow root is answered (3 s): its pages are being queued
    time.sleep(1.0)  # now several slow pages are in flight, 3 s each
    if how == "sigkill":
        proc.send_signal(signal.SIGKILL)
    else:
        proc.send_signal(signal.SIGINT)
        if how == "sigint twice":
            time.sleep(0.5)  # the graceful close waits for the slow host's downloads
            assert proc.poll() is None, "the crawl closed before the second Ctrl-C"
            proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if how == "sigint twice":
        assert "forcing unclean shutdown" in err, err[-3000:]
    if how == "sigint once":
        assert proc.returncode == 0, err[-3000:]


@pytest.mark.parametrize("how", ["sigint twice", "sigkill", "clean pause, then sigint twice"])
def test_a_forced_shutdown_is_reported_when_the_crawl_resumes(
        farm_factory: Any, tmp_path: Path, how: str) -> None:
    farm = farm_factory(_spec())
    job = tmp_path / "job"
    label, first = how, set[tuple[str, str]]()
    if how.startswith("clean pause"):  # the JOBDIR then holds a saved, now stale, queue
        _stop(farm, job, "sigint once", tmp_path)
        first = _pages(farm.arrivals())
        farm.reset()
        how = "sigint twice"
    _stop(farm, job, how, tmp_path)
    first |= _pages(farm.arrivals())
    farm.reset()
    resumed = run_crawl([farm.url(h, "/") for h in [*HOSTS, SLOW]], _settings(farm, job))
    assert resumed.stat("politeness/jobdir/unclean") == 1
    warnings = [line for line in resumed.log.splitlines()
                if "WARNING" in line and "was not closed cleanly" in line]
    assert len(warnings) == 1, resumed.log[-3000:]
    assert str(job) in warnings[0]
    assert "LOST" in warnings[0]
    assert "delete the JOBDIR" in warnings[0]
    moved = [p.name for p in job.iterdir() if p.name.startswith("requests.queue.unclean-")]
    # Its saved state missing or stale, the queue would fail every pop (the crawl would
    # never end): it was moved aside, not opened.
    assert len(moved) == 1
    assert f"moved to {moved[0]}" in warnings[0]
    # What the warning is about: Scrapy calls the crawl finished, yet pages may be
    # missing. Whether any are depends on how much of the dupefilter's file reached
    # the disk before the kill (an unflushed one lets the resumed crawl find them
    # again): none in some runs (before this change too), so it is reported, not asserted.
    assert resumed.stat("finish_reason") == "finished"
    every = {(h, "/") for h in [*HOSTS, SLOW]} | {
        (h, f"/p/{p}") for h in [*HOSTS, SLOW] for p in range(PAGES)}
    lost = every - first - _pages(farm.arrivals())
    print(f"\n{label}: {len(lost)} of {len(every)} pages never fetched after the resume")


def test_a_clean_pause_resumes_without_the_warning(farm_factory: Any, tmp_path: Path) -> None:
    farm = farm_factory(_spec())
    job = tmp_path / "job"
    _stop(farm, job, "sigint once", tmp_path)
    first = _pages(farm.arrivals())
    farm.reset()
    resumed = run_crawl([farm.url(h, "/") for h in [*HOSTS, SLOW]], _settings(farm, job))
    assert resumed.stat("politeness/jobdir/unclean", None) is None
    assert "was not closed cleanly" not in resumed.log
    every = {(h, f"/p/{p}") for h in [*HOSTS, SLOW] for p in range(PAGES)}
    assert every <= first | _pages(farm.arrivals())


# -- the evidence, file by file ------------------------------------------------------------

def _clean_jobdir(root: Path) -> Path:
    """The files a clean close leaves, with the modification times in its write order."""
    queue = root / jobdir.QUEUE_DIR / "a.test-0123"
    queue.mkdir(parents=True)
    files = [queue / "q00000", root / jobdir.QUEUE_DIR / jobdir.QUEUE_STATE,
             root / jobdir.SEEN_FILE, root / persistence.STATE_FILE]
    for i, path in enumerate(files):
        path.write_text("x")
        os.utime(path, (1000.0 + i, 1000.0 + i))
    return root


def test_a_clean_or_fresh_jobdir_gives_no_evidence(tmp_path: Path) -> None:
    assert jobdir.unclean_evidence(tmp_path, persistence.STATE_FILE) == ([], False)
    (tmp_path / jobdir.SEEN_FILE).write_text("")  # opened, nothing seen yet
    assert jobdir.unclean_evidence(tmp_path, persistence.STATE_FILE) == ([], False)
    root = _clean_jobdir(tmp_path / "clean")
    assert jobdir.unclean_evidence(root, persistence.STATE_FILE) == ([], False)
    same = root / jobdir.QUEUE_DIR / "a.test-0123" / "q00000"
    os.utime(same, (1001.0, 1001.0))  # as new as active.json: coarse clocks tie
    assert jobdir.unclean_evidence(root, persistence.STATE_FILE) == ([], False)
    (root / persistence.STATE_FILE).unlink()  # a run that kept no state file
    assert jobdir.unclean_evidence(root, persistence.STATE_FILE) == ([], False)


def test_each_kind_of_evidence(tmp_path: Path) -> None:
    root = _clean_jobdir(tmp_path / "no-queue-state")
    (root / jobdir.QUEUE_DIR / jobdir.QUEUE_STATE).unlink()
    [why], unusable = jobdir.unclean_evidence(root, None)
    assert unusable
    assert "active.json" in why
    assert "missing" in why

    root = _clean_jobdir(tmp_path / "killed-before-a-flush")  # requests.seen still empty
    (root / jobdir.QUEUE_DIR / jobdir.QUEUE_STATE).unlink()
    (root / jobdir.SEEN_FILE).write_text("")
    [why], unusable = jobdir.unclean_evidence(root, None)
    assert unusable
    assert "requests.queue holds queued requests" in why

    root = _clean_jobdir(tmp_path / "stale-queue")
    os.utime(root / jobdir.QUEUE_DIR / "a.test-0123" / "q00000", (1005.0, 1005.0))
    [why], unusable = jobdir.unclean_evidence(root, None)
    assert unusable
    assert "a.test-0123/q00000" in why
    assert "stale" in why

    root = _clean_jobdir(tmp_path / "stale-state")
    os.utime(root / jobdir.SEEN_FILE, (1009.0, 1009.0))
    [why], unusable = jobdir.unclean_evidence(root, persistence.STATE_FILE)
    assert not unusable  # the queue itself is consistent: it is kept
    assert persistence.STATE_FILE in why
    assert "older" in why
    assert jobdir.unclean_evidence(root, None) == ([], False)  # no state file kept


def test_an_unusable_queue_is_set_aside_not_deleted(tmp_path: Path) -> None:
    root = _clean_jobdir(tmp_path / "job")
    first = jobdir.set_aside_queue(root)
    assert first is not None
    assert first.startswith("requests.queue.unclean-")
    assert (root / first / "a.test-0123" / "q00000").exists()
    assert not (root / jobdir.QUEUE_DIR).exists()
    assert jobdir.set_aside_queue(root) is None  # nothing left to move
    (root / jobdir.QUEUE_DIR).mkdir()
    second = jobdir.set_aside_queue(root)
    assert second not in (None, first)  # never overwrites an earlier one


def test_inspect_at_start_moves_only_an_unusable_queue(tmp_path: Path) -> None:
    clean = _clean_jobdir(tmp_path / "clean")
    assert jobdir.inspect_at_start(str(clean), persistence.STATE_FILE) is None
    stale_state = _clean_jobdir(tmp_path / "stale-state")
    os.utime(stale_state / jobdir.SEEN_FILE, (1009.0, 1009.0))
    report = jobdir.inspect_at_start(str(stale_state), persistence.STATE_FILE)
    assert report is not None
    assert report[2] == ""  # the queue is consistent: kept where it is
    assert (stale_state / jobdir.QUEUE_DIR).is_dir()
    broken = _clean_jobdir(tmp_path / "broken")
    (broken / jobdir.QUEUE_DIR / jobdir.QUEUE_STATE).unlink()
    report = jobdir.inspect_at_start(str(broken), persistence.STATE_FILE)
    assert report is not None
    assert report[0] == str(broken)
    assert "moved to requests.queue.unclean-" in report[2]
    assert not (broken / jobdir.QUEUE_DIR).exists()
