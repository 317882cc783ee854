"""frontier_routes.HostRoutes: a resolved IP rides on the next pop, or goes alone in time."""

from __future__ import annotations

import asyncio

import pytest_twisted
from redis_server import aio
from scrapy import Request
from scrapy.utils.test import get_crawler

from scrapy_politeness.distributed.frontier_routes import IP_NEWS, HostRoutes
from scrapy_politeness.middleware import PolitenessMiddleware


def _routes(sent: list[tuple[str, str]], woken: list[int]) -> HostRoutes:
    mw = PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_DNS_HOSTS_FILE": None}))
    return HostRoutes(mw, send=lambda key, ip: sent.append((key, ip)),
                      resolved=lambda: woken.append(1))


async def _rides_or_alone() -> None:
    sent: list[tuple[str, str]] = []
    woken: list[int] = []
    routes = _routes(sent, woken)
    # Not in the cache yet: queued as unresolved ('?') while it resolves (an IP
    # literal: no DNS query, the same path as a name).
    assert routes.route(Request("http://127.0.0.7/p")) == ("127.0.0.7", "?")
    await routes._resolving["127.0.0.7"]
    assert woken == [1]
    assert routes.take_news() == ["127.0.0.7", "127.0.0.7"]  # carried by the pop ...
    await asyncio.sleep(IP_NEWS * 2)
    assert sent == []  # ... so never sent alone
    routes.route(Request("http://127.0.0.8/p"))
    await routes._resolving["127.0.0.8"]
    await asyncio.sleep(IP_NEWS * 2)  # no pop came
    assert sent == [("127.0.0.8", "127.0.0.8")]
    assert routes.take_news() == []
    routes.give_back(["127.0.0.9", "127.0.0.9"])  # a failed pop's news: kept for the next
    assert routes.take_news() == ["127.0.0.9", "127.0.0.9"]
    routes.close()


@pytest_twisted.ensureDeferred
async def test_a_resolved_ip_rides_on_the_next_pop_or_goes_alone() -> None:
    await aio(_rides_or_alone())
