"""The add-on yields exactly the settings of a hand-written configuration."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from scrapy.utils.test import get_crawler

from scrapy_politeness import Addon, PolitenessMiddleware

MW = "scrapy_politeness.PolitenessMiddleware"
PQ = "scrapy_politeness.pqueue.PolitenessAwarePriorityQueue"
DAPQ = "scrapy.pqueues.DownloaderAwarePriorityQueue"
ADDONS = {"ADDONS": {Addon: 300}}


def _effective(crawler: Any) -> dict[str, Any]:
    s = crawler.settings
    mws = s.getwithbase("DOWNLOADER_MIDDLEWARES")
    return {
        "middleware": {k if isinstance(k, str) else f"{k.__module__}.{k.__qualname__}": v
                       for k, v in mws.items() if "Politeness" in str(k)},
        "AUTOTHROTTLE_ENABLED": s.getbool("AUTOTHROTTLE_ENABLED"),
        "DOWNLOAD_DELAY": s.getfloat("DOWNLOAD_DELAY"),
        "DOWNLOAD_DELAY_JITTER": s.getfloat("DOWNLOAD_DELAY_JITTER"),
        "SCHEDULER_PRIORITY_QUEUE": s["SCHEDULER_PRIORITY_QUEUE"],
    }


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        # before (the user's settings.py)          after (what the crawl runs with)
        ({}, {"middleware": {MW: 950}, "AUTOTHROTTLE_ENABLED": False,
              "DOWNLOAD_DELAY": 0.0, "DOWNLOAD_DELAY_JITTER": 0.0,
              "SCHEDULER_PRIORITY_QUEUE": PQ}),
        ({"AUTOTHROTTLE_ENABLED": True, "DOWNLOAD_DELAY": 2.0},
         {"middleware": {MW: 950}, "AUTOTHROTTLE_ENABLED": False,
          "DOWNLOAD_DELAY": 0.0, "DOWNLOAD_DELAY_JITTER": 0.0, "SCHEDULER_PRIORITY_QUEUE": PQ}),
        ({"DOWNLOADER_MIDDLEWARES": {MW: 990}},
         {"middleware": {MW: 990}, "AUTOTHROTTLE_ENABLED": False,
          "DOWNLOAD_DELAY": 0.0, "DOWNLOAD_DELAY_JITTER": 0.0, "SCHEDULER_PRIORITY_QUEUE": PQ}),
        ({"DOWNLOADER_MIDDLEWARES": {PolitenessMiddleware: 960}},
         {"middleware": {f"{MW.rsplit('.', 1)[0]}.middleware.PolitenessMiddleware": 960},
          "AUTOTHROTTLE_ENABLED": False, "DOWNLOAD_DELAY": 0.0, "DOWNLOAD_DELAY_JITTER": 0.0,
          "SCHEDULER_PRIORITY_QUEUE": PQ}),
        # the user's own scheduler queue is kept (it is set at addon priority only)
        ({"SCHEDULER_PRIORITY_QUEUE": DAPQ},
         {"middleware": {MW: 950}, "AUTOTHROTTLE_ENABLED": False,
          "DOWNLOAD_DELAY": 0.0, "DOWNLOAD_DELAY_JITTER": 0.0,
          "SCHEDULER_PRIORITY_QUEUE": DAPQ}),
    ],
)
def test_addon_settings_before_and_after(user: dict[str, Any], expected: dict[str, Any]) -> None:
    crawler = get_crawler(settings_dict={**user, **ADDONS})
    assert _effective(crawler) == expected


def test_addon_matches_the_hand_written_configuration() -> None:
    by_addon = get_crawler(settings_dict=ADDONS)
    by_hand = get_crawler(settings_dict={
        "DOWNLOADER_MIDDLEWARES": {MW: 950}, "AUTOTHROTTLE_ENABLED": False,
        "DOWNLOAD_DELAY": 0, "DOWNLOAD_DELAY_JITTER": 0, "SCHEDULER_PRIORITY_QUEUE": PQ,
    })
    assert _effective(by_addon) == _effective(by_hand)


def test_addon_warns_when_it_overrides_the_user(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="scrapy_politeness.addon"):
        get_crawler(settings_dict={"AUTOTHROTTLE_ENABLED": True, "DOWNLOAD_DELAY": 3, **ADDONS})
    text = caplog.text
    assert "AUTOTHROTTLE_ENABLED = True (from project) is overridden, AutoThrottle is off" in text
    assert "DOWNLOAD_DELAY = 3 (from project) is set to 0" in text


def test_no_warning_when_nothing_is_overridden(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="scrapy_politeness.addon"):
        get_crawler(settings_dict=ADDONS)
    assert caplog.text == ""


def test_middleware_priority_is_between_cache_and_handler() -> None:
    """After HttpCacheMiddleware (900): cache hits never reach the gate; so its
    process_response runs before RetryMiddleware (550) sees a 429/5xx."""
    crawler = get_crawler(settings_dict=ADDONS)
    mws = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    cache = mws["scrapy.downloadermiddlewares.httpcache.HttpCacheMiddleware"]
    retry = mws["scrapy.downloadermiddlewares.retry.RetryMiddleware"]
    assert mws[MW] > cache > retry


def test_disabled_by_setting() -> None:
    from scrapy.exceptions import NotConfigured

    crawler = get_crawler(settings_dict={"POLITENESS_ENABLED": False})
    with pytest.raises(NotConfigured):
        PolitenessMiddleware.from_crawler(crawler)


def test_bad_value_raises_naming_setting_and_value() -> None:
    crawler = get_crawler(settings_dict={"POLITENESS_CEILING": -1})
    with pytest.raises(ValueError, match=r"POLITENESS_CEILING must be >= 0, got -1"):
        PolitenessMiddleware.from_crawler(crawler)


def test_startproject_download_delay_is_overridden_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    # `scrapy startproject` writes DOWNLOAD_DELAY = 1 into settings.py (project priority,
    # which is what get_crawler gives settings_dict).
    with caplog.at_level(logging.WARNING, logger="scrapy_politeness.addon"):
        crawler = get_crawler(settings_dict={"DOWNLOAD_DELAY": 1, **ADDONS})
    assert crawler.settings.getpriority("DOWNLOAD_DELAY") == 20
    assert crawler.settings.getfloat("DOWNLOAD_DELAY") == 0
    assert "DOWNLOAD_DELAY = 1 (from project) is set to 0" in caplog.text


def test_command_line_values_are_overridden_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    from scrapy.settings import Settings

    settings = Settings({"ADDONS": {Addon: 300}})
    settings.set("DOWNLOAD_DELAY_JITTER", "0.3", priority="cmdline")
    settings.set("AUTOTHROTTLE_ENABLED", "False", priority="cmdline")  # the same: no warning
    with caplog.at_level(logging.WARNING, logger="scrapy_politeness.addon"):
        Addon().update_settings(settings)
    assert settings.getfloat("DOWNLOAD_DELAY_JITTER") == 0
    assert settings.getpriority("DOWNLOAD_DELAY_JITTER") == 40
    assert "DOWNLOAD_DELAY_JITTER = '0.3' (from cmdline) is set to 0" in caplog.text
    assert "AUTOTHROTTLE" not in caplog.text


@pytest.mark.parametrize("listed", [
    "scrapy_politeness.middleware.PolitenessMiddleware",
    "scrapy_politeness.PolitenessMiddleware",
    PolitenessMiddleware,
])
def test_middleware_is_recognised_under_any_import_path(listed: Any) -> None:
    crawler = get_crawler(settings_dict={"DOWNLOADER_MIDDLEWARES": {listed: 960}, **ADDONS})
    mws = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    ours = [v for k, v in mws.items() if "PolitenessMiddleware" in str(k)]
    assert ours == [960]


def test_a_subclass_of_the_middleware_counts_as_listed() -> None:
    crawler = get_crawler(settings_dict={
        "DOWNLOADER_MIDDLEWARES": {f"{__name__}.MyPoliteness": 940}, **ADDONS})
    mws = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    assert [v for k, v in mws.items() if "Politeness" in str(k)] == [940]


class MyPoliteness(PolitenessMiddleware):
    pass


def test_a_users_queue_is_kept_and_a_foreign_one_warned_about(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="scrapy_politeness.addon"):
        crawler = get_crawler(settings_dict={"SCHEDULER_PRIORITY_QUEUE": DAPQ, **ADDONS})
    assert crawler.settings["SCHEDULER_PRIORITY_QUEUE"] == DAPQ
    assert "keeps your SCHEDULER_PRIORITY_QUEUE" in caplog.text
    caplog.clear()
    from scrapy_politeness.scheduler.queue import PolitenessAwarePriorityQueue

    with caplog.at_level(logging.WARNING, logger="scrapy_politeness.addon"):
        get_crawler(settings_dict={"SCHEDULER_PRIORITY_QUEUE": PolitenessAwarePriorityQueue,
                                   **ADDONS})
    assert caplog.text == ""
