"""Closing with thousands of requests waiting for their buckets.

They wait in the scheduler's queue (not in the gate, where each would hold one
of CONCURRENT_REQUESTS), so the crawl finishes within a second or two of the
close, and with JOBDIR they are on disk already: a resumed crawl fetches every
URL exactly once across both runs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from crawling import SCRIPT, farm_settings, run_crawl

HOSTS = [f"w{i}.farm.test" for i in range(20)]
PAGES = 100  # 2,000 URLs


def _spec() -> dict[str, Any]:
    return {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        h: {"ip": "127.0.0.2" if i % 2 else "127.0.0.3", "kind": "normal", "pages": PAGES}
        for i, h in enumerate(HOSTS)}}


def _urls(farm: Any) -> list[str]:
    return [farm.url(h, f"/p/{p}") for p in range(PAGES) for h in HOSTS]


def _slow(farm: Any, jobdir: Path, **extra: Any) -> dict[str, Any]:
    return farm_settings(farm, JOBDIR=str(jobdir), CONCURRENT_REQUESTS=3000,
                         POLITENESS_DEFAULT=5.0, POLITENESS_FLOOR=5.0,
                         POLITENESS_IP_FLOOR=0.0, **extra)


def _fetched(farm: Any) -> Counter[tuple[str, str]]:
    return Counter((a.host, a.path) for a in farm.arrivals())


def _resume_and_check(farm: Any, jobdir: Path, urls: list[str]) -> None:
    first = _fetched(farm)
    farm.reset()
    fast = farm_settings(farm, JOBDIR=str(jobdir), POLITENESS_DEFAULT=0.0,
                         POLITENESS_FLOOR=0.0, POLITENESS_IP_FLOOR=0.0,
                         POLITENESS_SEND_MARGIN=0.0, CONCURRENT_REQUESTS=64)
    run_crawl([], fast, follow=False)  # everything left comes from the JOBDIR queue
    second = _fetched(farm)
    both = first + second
    assert set(both) == {(u.split("/")[2].split(":")[0], "/" + u.split("/", 3)[3])
                         for u in urls}
    assert max(both.values()) == 1, [k for k, n in both.items() if n > 1][:5]


def _assert_waited_in_the_scheduler(stats: dict[str, Any]) -> None:
    left = stats["scheduler/enqueued"] - stats["scheduler/dequeued"]
    assert left >= 1000  # still queued at the close
    assert stats.get("politeness/dropped/closing", 0) == 0  # none waited in the gate
    assert stats.get("politeness/scheduler/rescued", 0) == 0


def test_close_with_thousands_waiting_is_prompt_and_jobdir_keeps_them(
        farm_factory: Any, tmp_path: Path) -> None:
    farm = farm_factory(_spec())
    urls = _urls(farm)
    result = run_crawl(urls, _slow(farm, tmp_path / "job", CLOSESPIDER_TIMEOUT=8),
                       follow=False)
    assert result.stat("finish_reason") == "closespider_timeout"
    _assert_waited_in_the_scheduler(result.stats)
    assert result.stat("elapsed_time_seconds") < 8 + 2.0
    _resume_and_check(farm, tmp_path / "job", urls)


def test_an_interrupt_with_thousands_waiting_is_prompt(farm_factory: Any,
                                                       tmp_path: Path) -> None:
    farm = farm_factory(_spec())
    urls = _urls(farm)
    with tempfile.TemporaryDirectory(prefix="crawl-") as tmp:
        job = {"urls": urls, "settings": _slow(farm, tmp_path / "job"), "follow": False,
               "stats_out": str(Path(tmp, "stats.json")),
               "items_out": str(Path(tmp, "items.jsonl"))}
        Path(tmp, "job.json").write_text(json.dumps(job))
        proc = subprocess.Popen([sys.executable, str(SCRIPT), str(Path(tmp, "job.json"))],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while len(farm.arrivals()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(6.0)  # one fetch per IP (5 s spacing): over a thousand wait
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - interrupted
        stats = json.loads(Path(tmp, "stats.json").read_text())
    assert proc.returncode == 0, err[-3000:]
    assert stats["finish_reason"] == "shutdown"
    _assert_waited_in_the_scheduler(stats)
    assert took < 2.5, took
    _resume_and_check(farm, tmp_path / "job", urls)
