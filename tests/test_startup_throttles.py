"""Scrapy's own throttles under the plugin: named in one warning each, the same words on
every set-up path, and switched off (the crawls that prove it: test_setup_paths.py)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from pydispatch import dispatcher
from scrapy import Request, Spider, signals
from scrapy.core.downloader import Slot
from scrapy.extensions.throttle import AutoThrottle
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_politeness.middleware import PolitenessMiddleware
from scrapy_politeness.settings import PolitenessSettings
from scrapy_politeness.startup.throttles import REPLACED, SlotDelays, slot_delays, with_slot_floors

ADDON = {"ADDONS": {"scrapy_politeness.Addon": 300}}
MIDDLEWARE = {"DOWNLOADER_MIDDLEWARES": {"scrapy_politeness.PolitenessMiddleware": 950}}
# What a project coming from AutoThrottle has: every throttle setting of Scrapy's.
EVERY_THROTTLE_SETTING: dict[str, Any] = {
    "AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_START_DELAY": 5.0,
    "AUTOTHROTTLE_MAX_DELAY": 30.0, "AUTOTHROTTLE_TARGET_CONCURRENCY": 2.0,
    "AUTOTHROTTLE_DEBUG": True, "DOWNLOAD_DELAY": 1, "DOWNLOAD_DELAY_JITTER": 0.3,
    "RANDOMIZE_DOWNLOAD_DELAY": True, "DOWNLOAD_SLOTS": {"slow.test": {"delay": 3}},
}


def _warnings(caplog: pytest.LogCaptureFixture, settings: dict[str, Any]) -> list[str]:
    """The plugin's warnings from building a crawler and its middleware."""
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        crawler = get_crawler(settings_dict=settings)
        PolitenessMiddleware.from_crawler(crawler)
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("scrapy_politeness") and r.levelno == logging.WARNING]


@pytest.mark.parametrize("name", sorted(EVERY_THROTTLE_SETTING))
def test_each_throttle_setting_is_named_in_one_warning_on_both_paths(
        caplog: pytest.LogCaptureFixture, name: str) -> None:
    given = {name: EVERY_THROTTLE_SETTING[name]}
    by_addon = _warnings(caplog, {**ADDON, **given})
    by_hand = _warnings(caplog, {**MIDDLEWARE, **given})
    assert by_addon == by_hand  # the add-on and the middleware alone say the same
    assert len(by_hand) == 1, by_hand
    assert by_hand[0].startswith(f"scrapy-politeness: {name}"), by_hand


def test_every_throttle_setting_of_scrapys_is_covered() -> None:
    """Each of Scrapy's own throttle settings, as its defaults list them, gets a warning."""
    from scrapy.settings import default_settings

    scrapys = {name for name in dir(default_settings)
               if name.startswith(("AUTOTHROTTLE_", "DOWNLOAD_DELAY", "RANDOMIZE_DOWNLOAD_DELAY"))}
    assert len(scrapys) >= 7, scrapys
    assert scrapys <= set(EVERY_THROTTLE_SETTING) == set(REPLACED) | {"DOWNLOAD_SLOTS"}


def test_every_warning_names_a_replacement_or_says_why_there_is_none() -> None:
    assert set(REPLACED) | {"DOWNLOAD_SLOTS"} == set(EVERY_THROTTLE_SETTING)
    for name, text in REPLACED.items():
        replacement = text.partition(";")[2]  # after what the plugin does with it
        assert ("POLITENESS_" in replacement or "no replacement" in text
                or "the plugin adapts each host's interval itself" in replacement), name


def test_nothing_to_say_when_the_user_set_none_of_them(caplog: pytest.LogCaptureFixture) -> None:
    assert _warnings(caplog, ADDON) == []
    assert _warnings(caplog, MIDDLEWARE) == []
    # Set to what the plugin wants: nothing to say either.
    assert _warnings(caplog, {**MIDDLEWARE, "DOWNLOAD_DELAY": 0,
                              "AUTOTHROTTLE_ENABLED": False}) == []


def test_a_spiders_custom_settings_are_named_as_the_spiders(
        caplog: pytest.LogCaptureFixture) -> None:
    class Custom(Spider):
        name = "custom"
        custom_settings: ClassVar[dict[str, Any]] = {"DOWNLOAD_DELAY": 2}

    caplog.clear()
    with caplog.at_level(logging.WARNING):
        PolitenessMiddleware.from_crawler(get_crawler(Custom, settings_dict=MIDDLEWARE))
    assert "DOWNLOAD_DELAY = 2 (from spider) is set to 0" in caplog.text


def test_autothrottle_built_beside_the_middleware_is_disconnected() -> None:
    crawler = get_crawler(settings_dict={**MIDDLEWARE, "AUTOTHROTTLE_ENABLED": True})
    extension = crawler.get_extension(AutoThrottle)
    assert extension is not None

    def handlers(signal: object) -> list[Any]:
        return [r for r in dispatcher.liveReceivers(dispatcher.getAllReceivers(crawler, signal))
                if getattr(r, "__self__", None) is extension]

    assert handlers(signals.response_downloaded)
    assert handlers(signals.spider_opened)
    PolitenessMiddleware.from_crawler(crawler)
    assert handlers(signals.response_downloaded) == []
    assert handlers(signals.spider_opened) == []


def _crawler_with_slots(slots: dict[str, Slot]) -> Any:
    crawler = get_crawler()
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots=slots))
    return crawler


def _reach(crawler: Any, slot: str) -> None:
    request = Request("http://a.test/")
    request.meta["download_slot"] = slot
    crawler.signals.send_catch_log(signals.request_reached_downloader, request=request,
                                   spider=None)


def test_a_slot_delay_is_zero_when_its_request_reaches_the_downloader(
        caplog: pytest.LogCaptureFixture) -> None:
    slots = {"a.test": Slot(8, 2.0, 0.5), "b.test": Slot(8, 0.0, 0.5)}
    crawler = _crawler_with_slots(slots)
    holder = SlotDelays(crawler, announced=False)
    with caplog.at_level(logging.WARNING):
        _reach(crawler, "a.test")
        _reach(crawler, "b.test")
        slots["a.test"].delay = 1.5  # an extension writes it again while the crawl runs
        _reach(crawler, "a.test")
        _reach(crawler, "unknown")  # not a slot: nothing to do
    assert slots["a.test"].delay == 0
    assert slots["b.test"].delay == 0
    assert slots["a.test"].download_delay() == 0  # no jitter around a delay of 0
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    assert "download slot 'a.test' had a delay of 2s" in said[0]
    assert holder.announced


def test_a_slot_delay_announced_at_start_is_not_announced_again(
        caplog: pytest.LogCaptureFixture) -> None:
    slots = {"a.test": Slot(8, 1.0, 0)}
    crawler = _crawler_with_slots(slots)
    SlotDelays(crawler, announced=True)
    with caplog.at_level(logging.WARNING):
        _reach(crawler, "a.test")
    assert slots["a.test"].delay == 0
    assert caplog.text == ""


def _slots(value: Any, priority: str = "project") -> Settings:
    settings = Settings()
    settings.set("DOWNLOAD_SLOTS", value, priority=priority)
    return settings


def test_slot_delays_become_host_floors_unless_the_host_has_a_band() -> None:
    s = PolitenessSettings.from_settings({"POLITENESS_HOSTS": {"banded.test": {"floor": 0.5}},
                                          "POLITENESS_CEILING": 10})
    delays = slot_delays(_slots({"Slow.Test": {"delay": 3, "concurrency": 1},
                                 "banded.test": {"delay": 2}, "slower.test": {"delay": 20},
                                 "plain.test": {"concurrency": 2}, "zero.test": {"delay": 0}}))
    assert delays == {"Slow.Test": 3.0, "banded.test": 2.0, "slower.test": 20.0}
    got, messages = with_slot_floors(s, delays)
    assert got.hosts["slow.test"].floor == 3.0
    assert got.hosts["slow.test"].default == 3.0
    assert got.hosts["slower.test"].floor == 20.0
    assert got.hosts["slower.test"].ceiling == 20.0
    assert got.hosts["banded.test"].floor == 0.5  # the user's POLITENESS_HOSTS wins
    assert len(messages) == 3
    assert "it becomes the floor of 'slow.test'" in messages[0]
    assert "POLITENESS_HOSTS gives 'banded.test' its band already" in messages[1]


def test_slot_delays_of_one_domain_group_give_it_the_largest() -> None:
    s = PolitenessSettings.from_settings({"POLITENESS_HOST_GROUPING": "domain"})
    got, _ = with_slot_floors(s, {"a.example.com": 2.0, "b.example.com": 3.0})
    assert set(got.hosts) == {"example.com"}
    assert got.hosts["example.com"].floor == 3.0


@pytest.mark.parametrize(("value", "error"), [
    ({"x.test": {"delay": "soon"}}, r"DOWNLOAD_SLOTS\['x.test'\]\['delay'\] must be a number"),
    ({"x.test": {"delay": -1}}, r"DOWNLOAD_SLOTS\['x.test'\]\['delay'\] must be >= 0"),
    ({"x.test": 2}, r"DOWNLOAD_SLOTS\['x.test'\] must be a dict, got 2"),
])
def test_a_bad_slot_entry_is_one_clear_error(value: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        slot_delays(_slots(value))


def test_slot_delays_given_as_json_on_the_command_line() -> None:
    assert slot_delays(_slots('{"a.test": {"delay": 2}}', "cmdline")) == {"a.test": 2.0}


@pytest.mark.filterwarnings("ignore:The CONCURRENT_REQUESTS_PER_IP setting is deprecated")
@pytest.mark.parametrize(("given", "said"), [
    ({"CONCURRENT_REQUESTS_PER_IP": 1},
     ["CONCURRENT_REQUESTS_PER_IP = 1 makes Scrapy's download slots per IP"]),
    ({"DOWNLOAD_SLOTS": {"a.test": {"concurrency": 1}, "b.test": {"concurrency": 8}}},
     ["DOWNLOAD_SLOTS['a.test'] concurrency 1 is below CONCURRENT_REQUESTS_PER_DOMAIN (8)"]),
    ({"DOWNLOAD_SLOTS": {"a.test": {"concurrency": 1}}, "CONCURRENT_REQUESTS_PER_DOMAIN": 1}, []),
])
def test_a_slot_that_admits_fewer_requests_than_the_gate_is_named(
        caplog: pytest.LogCaptureFixture, given: dict[str, Any], said: list[str]) -> None:
    for path in (ADDON, MIDDLEWARE):
        got = [m for m in _warnings(caplog, {**path, **given})
               if "concurrency" in m or "CONCURRENT_REQUESTS_PER_IP" in m]
        assert len(got) == len(said), got
        for message, expected in zip(got, said, strict=True):
            assert expected in message
