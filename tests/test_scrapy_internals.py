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
    missing,
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
