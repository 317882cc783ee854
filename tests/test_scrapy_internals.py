"""The private Scrapy attributes the plugin reads exist in the installed Scrapy.

A Scrapy upgrade that renames one fails here, loudly, instead of leaving crawls
to idle until the engine's heartbeat. The real check runs an empty crawl in a
subprocess (no server, no traffic)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from types import SimpleNamespace

import pytest

from scrapy_politeness.scrapy_internals import (
    downloader_active,
    engine_closing,
    engine_in_progress,
    exception_leaving,
    missing,
    path_safe,
    start_requests_left,
    wake_engine,
)
from scrapy_politeness.startup import warn_missing_internals

SCRIPT = """
import json
from scrapy import Spider, signals
from scrapy.crawler import CrawlerProcess
from scrapy_politeness.scrapy_internals import missing

found = {}

class Empty(Spider):
    name = "empty"

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signal=signals.spider_opened)
        return spider

    def opened(self):
        found["missing"] = missing(self.crawler)

    async def start(self):
        return
        yield

process = CrawlerProcess({"REMOTE_CONTROL_ENABLED": False, "TELNETCONSOLE_ENABLED": False,
                          "LOG_LEVEL": "ERROR", "ADDONS": {"scrapy_politeness.Addon": 300}})
process.crawl(Empty)
process.start()
print(json.dumps(found))
"""


@pytest.mark.integration
def test_installed_scrapy_has_every_private_attribute_we_read() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {"missing": []}, (
        f"this Scrapy renamed {found.get('missing')}: update scrapy_politeness/scrapy_internals.py")


def test_a_renamed_attribute_is_named_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    crawler = SimpleNamespace(engine=SimpleNamespace(_slot=SimpleNamespace(), downloader=None))
    with caplog.at_level(logging.WARNING):
        gone = warn_missing_internals(crawler)
    assert gone == ["engine._slot.nextcall", "engine._slot.closing", "engine._slot.inprogress",
                    "engine._start", "engine.downloader.active", "engine.downloader.slots"]
    assert len(caplog.records) == 1
    assert "engine._slot.nextcall" in caplog.records[0].getMessage()
    assert "a download slot delay cannot be set to 0" in caplog.records[0].getMessage()


def test_without_the_attributes_each_use_falls_back_to_scrapys_own_behaviour() -> None:
    crawler = SimpleNamespace(engine=SimpleNamespace(), _engine=SimpleNamespace())
    wake_engine(crawler)  # nothing to wake: the heartbeat remains
    assert engine_closing(crawler) is False
    assert downloader_active(crawler) is None
    assert engine_in_progress(crawler) is None
    assert start_requests_left(crawler) is None
    assert missing(SimpleNamespace()) == []  # no engine yet: nothing to judge


def test_with_the_attributes_they_are_used() -> None:
    woken: list[bool] = []
    slot = SimpleNamespace(nextcall=SimpleNamespace(schedule=lambda: woken.append(True)),
                           closing=object(), inprogress={object()})
    active: set[object] = {object()}
    engine = SimpleNamespace(_slot=slot, downloader=SimpleNamespace(active=active, slots={}),
                             _start=None)
    crawler = SimpleNamespace(engine=engine, _engine=engine)
    assert start_requests_left(crawler) is False
    wake_engine(crawler)
    assert woken == [True]
    assert engine_closing(crawler) is True
    assert downloader_active(crawler) is active
    assert engine_in_progress(crawler) is slot.inprogress
    assert missing(crawler) == []


def test_queue_directories_are_named_as_scrapy_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """``scrapy.pqueues._path_safe`` is still there, and the rule used without it
    gives the same names (a JOBDIR written with either resumes with the other)."""
    from scrapy.pqueues import _path_safe

    import scrapy_politeness.scrapy_internals as internals

    names = ["simple.org", "dash-underscore_.org", "some@symbol?", "xn--bcher-kva.example:8080"]
    assert [path_safe(n) for n in names] == [_path_safe(n) for n in names]
    monkeypatch.setattr(internals, "_scrapy_path_safe", lambda: None)
    assert [path_safe(n) for n in names] == [_path_safe(n) for n in names]


def test_the_exception_leaving_the_downloader_is_the_one_being_raised() -> None:
    assert exception_leaving() is None
    error = ValueError("failing download")
    seen: list[BaseException | None] = []
    try:
        raise error
    except ValueError:
        seen.append(exception_leaving())  # where Scrapy's ``finally`` sends the signal
    assert seen == [error]


def test_no_module_reads_a_private_scrapy_attribute_but_scrapy_internals() -> None:
    """Private Scrapy names (``scrapy.x._name``, ``crawler._engine``,
    ``engine._slot``) and ``sys.exc_info()`` in a signal handler go through
    scrapy_politeness/scrapy_internals.py, where each is documented and checked."""
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "scrapy_politeness"
    private = re.compile(r"from scrapy(\.\w+)* import .*\b_[a-z]\w*|\bscrapy\.[\w.]*\._[a-z]\w*\("
                         r"|\b(crawler|engine)\._\w+|\._slot\b|sys\.exc_info\(\)")
    found = [f"{path.relative_to(package)}:{n}: {line.strip()}"
             for path in package.rglob("*.py") if path.name != "scrapy_internals.py"
             and "_sitefarm" not in path.parts
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if private.search(line.split("#", 1)[0])]
    assert found == []
