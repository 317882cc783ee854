"""What the plugin checks and says at start: typos, JSON from -s, the start line,
and a backend the crawl cannot use (a real ``scrapy crawl``'s exit status)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.settings import PolitenessSettings, unknown_names
from scrapy_politeness.startup import start_line

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
                    "1 host overrides; per IP floor 0.25s; grouping host; backend memory; "
                    "queue PolitenessAwarePriorityQueue; dead after 5 fetches at the ceiling; "
                    "live line every 10s")


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
    assert "pip install 'scrapy-politeness[redis]'" in log


