"""The start-up heap frozen when the spider opens (scrapy_politeness.downloader.gc_freeze).

The collector is the process's, so every check runs in a process of its own:
a fresh interpreter for the function, real crawls (``crawl_script.py``) for
the setting.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from crawling import farm_settings, run_crawl

PROBE = """
import gc, json
from scrapy_politeness.downloader.gc_freeze import freeze_start_heap
kept = [[i] for i in range(5000)]  # live objects the freeze must take along
first = freeze_start_heap()
count = gc.get_freeze_count()
second = freeze_start_heap()
print(json.dumps([first, count, second, gc.get_freeze_count()]))
"""


def test_the_heap_is_frozen_once_per_process() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True).stdout
    first, count, second, count_after = json.loads(out)
    assert first == count > 5000
    assert second is None
    assert count_after == count


@pytest.mark.parametrize("freeze", [True, False])
def test_a_crawl_freezes_its_start_up_heap_unless_told_not_to(farm_factory: Any,
                                                              freeze: bool) -> None:
    farm = farm_factory({"ips": ["127.0.0.2"],
                         "hosts": {"a.farm.test": {"ip": "127.0.0.2", "pages": 2}}})
    urls = [farm.url("a.farm.test", f"/p/{p}") for p in range(2)]
    result = run_crawl(urls, farm_settings(farm, POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3,
                                           POLITENESS_GC_FREEZE=freeze), follow=False)
    assert result.stat("downloader/response_status_count/200") == 2
    if freeze:
        # Scrapy, Twisted and the crawl's components: tens of thousands of objects
        assert result.stat("politeness/gc_frozen") > 20_000
        assert "start-up objects frozen (gc.freeze" in result.log
    else:
        assert "politeness/gc_frozen" not in result.stats
        assert "gc.freeze" not in result.log
