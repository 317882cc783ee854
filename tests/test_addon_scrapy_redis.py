"""The add-on gives scrapy-redis's scheduler the frontier queue, and says when a
scheduler bypasses the politeness-aware queue."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from scrapy.core.scheduler import Scheduler
from scrapy.utils.test import get_crawler

from scrapy_politeness import Addon

pytest.importorskip("scrapy_redis")
from scrapy_redis.scheduler import Scheduler as RedisScheduler

FRONTIER = "scrapy_politeness.frontier.PolitenessFrontierQueue"
ADDONS = {"ADDONS": {Addon: 300}}


class MyRedisScheduler(RedisScheduler):  # type: ignore[misc]
    pass


class MyScheduler(Scheduler):
    pass


class OwnScheduler:
    """A scheduler that is neither Scrapy's nor scrapy-redis's."""


@pytest.mark.parametrize(
    ("user", "queue_class"),
    [
        # before (settings.py)                               after: SCHEDULER_QUEUE_CLASS
        ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler"}, FRONTIER),
        ({"SCHEDULER": RedisScheduler}, FRONTIER),
        ({"SCHEDULER": f"{__name__}.MyRedisScheduler"}, FRONTIER),
        ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler",
          "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue"}, "scrapy_redis.queue.FifoQueue"),
        ({}, None),
        ({"SCHEDULER": f"{__name__}.MyScheduler"}, None),
    ],
)
def test_queue_class_before_and_after(user: dict[str, Any], queue_class: str | None) -> None:
    crawler = get_crawler(settings_dict={**user, **ADDONS})
    assert crawler.settings.get("SCHEDULER_QUEUE_CLASS") == queue_class


def test_the_frontier_is_set_at_addon_priority() -> None:
    crawler = get_crawler(settings_dict={"SCHEDULER": RedisScheduler, **ADDONS})
    assert crawler.settings.getpriority("SCHEDULER_QUEUE_CLASS") == 15  # "addon"


@pytest.mark.parametrize("scheduler", [f"{__name__}.OwnScheduler", OwnScheduler])
def test_another_scheduler_is_warned_about(caplog: pytest.LogCaptureFixture,
                                          scheduler: Any) -> None:
    with caplog.at_level(logging.WARNING):
        crawler = get_crawler(settings_dict={"SCHEDULER": scheduler, **ADDONS})
    assert crawler.settings.get("SCHEDULER_QUEUE_CLASS") is None
    assert "does not use the politeness-aware queue" in caplog.text


@pytest.mark.parametrize("scheduler", [
    "scrapy_redis.scheduler.Scheduler", f"{__name__}.MyScheduler", None])
def test_no_warning_for_schedulers_that_use_a_politeness_aware_queue(
        caplog: pytest.LogCaptureFixture, scheduler: str | None) -> None:
    settings = {**ADDONS} if scheduler is None else {"SCHEDULER": scheduler, **ADDONS}
    with caplog.at_level(logging.WARNING):
        get_crawler(settings_dict=settings)
    assert "does not use" not in caplog.text
