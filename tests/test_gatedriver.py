"""The gate driver on a real asyncio loop (no crawl): what each waiting request leaves behind."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest_twisted
from twisted.internet.defer import Deferred

from scrapy_politeness.downloader.gate_driver import GateDriver
from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Release


class _Stats:
    def inc_value(self, key: str, count: int = 1) -> None:
        pass


@pytest_twisted.ensureDeferred
async def test_a_released_request_leaves_no_cycle_for_the_garbage_collector() -> None:
    """The waiter's future held its release and the release held the future:
    one cycle per request, freed only by a collection (more collections, and
    the objects in them promoted to the generations every full collection
    walks). Both must go as soon as the request is done with them."""
    config = Config(default=0.01, floor=0.01, ip_floor=0.01)
    hosts = HostTable(config)
    gate: Gate[Any] = Gate(hosts, IPTable(0.01))
    driver = GateDriver(gate, _Stats(), lambda expected, now: None)  # type: ignore[arg-type]

    async def crawl() -> None:
        driver.loop = asyncio.get_running_loop()
        for _ in range(3):  # the first goes at once, the others wait for the timer
            release, _waited = await driver.wait("h.test", "127.0.0.2", driver.loop.time())
            assert release.key == "h.test"
            del release
            driver.done("h.test")

    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection frees is kept in gc.garbage
    try:
        await Deferred.fromFuture(asyncio.ensure_future(crawl()))
        gc.collect()
        cyclic = [o for o in gc.garbage if isinstance(o, Release)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert cyclic == []
