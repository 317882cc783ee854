"""What the plugin checks and says at start: typos, JSON from -s, the start line,
and a backend the crawl cannot use (a real ``scrapy crawl``'s exit status)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.settings import PolitenessSettings, unknown_names
from scrapy_politeness.startup import quiet_failed_start, start_line

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "example_project"


@pytest.mark.parametrize(("typo", "meant"), [
    ("POLITENESS_FLOR", "POLITENESS_FLOOR"),
    ("POLITENESS_ENABLE", "POLITENESS_ENABLED"),
    ("POLITENESS_TRACE_BUFER", "POLITENESS_TRACE_BUFFER"),
    ("POLITENESS_XYZZY_QUUX_FROB", None),
])
def test_unknown_settings_are_named_with_the_closest_known(typo: str, meant: str | None) -> None:
    assert unknown_names(["POLITENESS_FLOOR", "DOWNLOAD_DELAY", typo]) == [(typo, meant)]


def test_middleware_warns_about_a_misspelt_setting(caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(settings_dict={"POLITENESS_FLOR": 0.1})
    with caplog.at_level(logging.WARNING):
        PolitenessMiddleware.from_crawler(crawler)
    assert ("scrapy-politeness: unknown setting POLITENESS_FLOR is ignored; did you mean "
            "POLITENESS_FLOOR?") in caplog.text


def test_dict_and_list_settings_accept_json_strings_as_given_with_dash_s() -> None:
    settings = Settings()
    settings.set("POLITENESS_HOSTS", '{"a.test": {"floor": 2}}', priority="cmdline")
    settings.set("POLITENESS_IP_EXEMPT", '["10.0.0.0/8", "192.0.2.0/24"]', priority="cmdline")
    settings.set("POLITENESS_DNS_NAMESERVERS", '["127.0.0.1:5353"]', priority="cmdline")
    s = PolitenessSettings.from_settings(settings)
    assert s.hosts["a.test"].floor == 2.0
    assert [str(n) for n in s.ip_exempt] == ["10.0.0.0/8", "192.0.2.0/24"]
    assert s.dns_nameservers == (("127.0.0.1", 5353),)
    with pytest.raises(ValueError, match=r"POLITENESS_HOSTS is not valid JSON"):
        PolitenessSettings.from_settings({"POLITENESS_HOSTS": "{a.test: 1}"})


def test_start_line_says_what_the_plugin_will_do(caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(settings_dict={
        "POLITENESS_FLOOR": 0.1 * 3, "POLITENESS_HOSTS": {"a.test": {"floor": 2}},
        "SCHEDULER_PRIORITY_QUEUE": "scrapy_politeness.pqueue.PolitenessAwarePriorityQueue"})
    with caplog.at_level(logging.INFO, logger="scrapy_politeness.middleware"):
        mw = PolitenessMiddleware.from_crawler(crawler)
    line = start_line(mw.settings, crawler.settings)
    assert line in caplog.text
    assert line == ("scrapy-politeness on: per host start 1s, floor 0.3s, ceiling 60s, "
                    "1 host override; per IP floor 0.25s; grouping host; backend memory; "
                    "queue PolitenessAwarePriorityQueue; suspended after 5 fetches at the ceiling; "
                    "live line every 10s; POLITENESS_FLOOR, POLITENESS_HOSTS from project")


def test_start_line_says_where_each_value_came_from() -> None:
    # A spider's custom_settings silently wins over settings.py: the line says so.
    settings = Settings()
    settings.set("POLITENESS_FLOOR", 0.5, priority="project")
    settings.set("POLITENESS_DEFAULT", 0.7, priority="project")
    settings.set("POLITENESS_FLOOR", 0.3, priority="spider")
    settings.set("POLITENESS_CEILING", 9, priority="cmdline")
    line = start_line(PolitenessSettings.from_settings(settings), settings)
    assert line.startswith("scrapy-politeness on: per host start 0.7s, floor 0.3s, ceiling 9s;")
    assert line.endswith("; POLITENESS_CEILING from cmdline; POLITENESS_DEFAULT from project; "
                         "POLITENESS_FLOOR from spider")


def test_only_defaults_add_no_origins() -> None:
    line = start_line(PolitenessSettings.from_settings(Settings()), Settings())
    assert line.endswith("live line every 10s")


def test_a_bad_value_is_one_error_line_naming_setting_and_value(
        caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(settings_dict={"POLITENESS_FLOOR": "abc"})
    with caplog.at_level(logging.ERROR), pytest.raises(ValueError, match="POLITENESS_FLOOR"):
        PolitenessMiddleware.from_crawler(crawler)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == [
        "scrapy-politeness cannot start: POLITENESS_FLOOR must be a number, got 'abc'"]
    assert errors[0].exc_info is None  # one line: Scrapy prints the traceback of its own


def _crawl(tmp_path: Path, *settings: str, env: dict[str, str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    """``scrapy crawl farm`` in the example project; no farm: it must fail before a request."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "farm", "-s", "LOG_LEVEL=INFO"]
    for s in settings:
        cmd += ["-s", s]
    full_env = {**os.environ, "FARM_URLS": "http://a.farm.test:1/", **(env or {})}
    full_env.pop("SCRAPY_SETTINGS_MODULE", None)
    return subprocess.run(cmd, cwd=PROJECT, env=full_env, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.integration
def test_unreachable_backend_makes_scrapy_crawl_exit_non_zero(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    sys.path.insert(0, str(Path(__file__).parent))
    from redis_server import free_port

    url = f"redis://crawler:Sup3rSecret@127.0.0.1:{free_port()}/0"
    proc = _crawl(tmp_path, f"POLITENESS_BACKEND={url}")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-3000:]
    assert "is unreachable" in log
    assert "POLITENESS_BACKEND = 'memory'" in log
    assert "Sup3rSecret" not in log
    _error_line_comes_first(log, "scrapy-politeness cannot start: POLITENESS_BACKEND=")


@pytest.mark.integration
def test_missing_redis_extra_names_the_pip_command(tmp_path: Path) -> None:
    # A directory first on sys.path whose ``redis`` cannot be imported: what a
    # machine without the extra sees (the real package stays installed here).
    blocker = tmp_path / "no_redis"
    blocker.mkdir()
    (blocker / "redis.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'redis'\", name='redis')\n")
    path = os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")]))
    proc = _crawl(tmp_path, "POLITENESS_BACKEND=redis://127.0.0.1:1/0",
                  env={"PYTHONPATH": path})
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log[-3000:]
    assert "pip install 'redis>=5'" in log
    _error_line_comes_first(log, "scrapy-politeness cannot start: POLITENESS_BACKEND=")


def _error_line_comes_first(log: str, error: str) -> None:
    """The plugin's one ERROR line is all the failed start prints: no traceback after
    it (asyncio's "Task exception was never retrieved"), no other error."""
    assert error in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert "Task exception was never retrieved" not in log
    errors = [line for line in log.splitlines() if " ERROR: " in line or " CRITICAL: " in line]
    assert len(errors) == 1, errors


@pytest.mark.integration
def test_a_bad_value_stops_scrapy_crawl_with_its_error_line_first(tmp_path: Path) -> None:
    proc = _crawl(tmp_path, "POLITENESS_FLOOR=abc")
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log[-3000:]
    _error_line_comes_first(
        log, "ERROR: scrapy-politeness cannot start: POLITENESS_FLOOR must be a number, got 'abc'")




def test_start_line_says_one_fetch_not_one_fetches() -> None:
    settings = Settings()
    settings.set("POLITENESS_DEAD_AFTER", 1, priority="project")
    line = start_line(PolitenessSettings.from_settings(settings), settings)
    assert "; suspended after 1 fetch at the ceiling;" in line


def test_a_failed_start_prints_nothing_after_its_error_line() -> None:
    """``scrapy crawl`` re-raises a failed start from an asyncio task nobody awaits; the
    plugin's own exception is marked retrieved, any other is reported as asyncio would."""
    reported: list[BaseException] = []
    ours = ValueError("POLITENESS_FLOOR must be a number, got 'abc'")

    async def start(raised: BaseException) -> None:
        quiet_failed_start(ours)
        raise raised

    def run() -> None:  # a loop of its own, in a thread: the tests may run inside one
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(lambda _loop, context: reported.append(context["exception"]))
        for raised in (ours, RuntimeError("another failure")):
            task = loop.create_task(start(raised))
            loop.run_until_complete(asyncio.wait([task]))
            del task
            gc.collect()
        loop.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert [type(e) for e in reported] == [RuntimeError]


@pytest.mark.parametrize(("given", "said"), [
    ({}, "; queue PolitenessAwarePriorityQueue;"),
    ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler"},
     "; the shared frontier PolitenessFrontierQueue;"),
    ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler",
      "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue"}, "; scrapy-redis queue FifoQueue;"),
])
def test_start_line_names_the_queue_the_scheduler_reads(given: dict[str, str], said: str) -> None:
    pytest.importorskip("scrapy_redis")
    crawler = get_crawler(settings_dict={"ADDONS": {"scrapy_politeness.Addon": 300}, **given})
    line = start_line(PolitenessSettings.from_settings(crawler.settings), crawler.settings)
    assert said in line
