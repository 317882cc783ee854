"""Shared fixtures: a site farm per test module, reset before each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis_server import RedisServer, redis_server_fixture

from scrapy_politeness._sitefarm import Farm


@pytest.fixture
def farm_factory() -> Iterator[Callable[[dict[str, Any]], Farm]]:
    """Start farms with a given spec; all are stopped at the end of the test."""
    farms: list[Farm] = []

    def start(spec: dict[str, Any]) -> Farm:
        farm = Farm(spec).start()
        farms.append(farm)
        return farm

    yield start
    for farm in farms:
        farm.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the smallest server-side gaps the integration tests measured."""
    module = __import__("sys").modules.get("test_integration")
    gaps: list[tuple[str, float, float]] = getattr(module, "GAPS", [])
    if not gaps:
        return
    worst: dict[str, tuple[float, float]] = {}
    for what, gap, need in gaps:
        key = what.split(" after ")[0] if what.startswith("IP ") else what
        if key not in worst or gap - need < worst[key][0] - worst[key][1]:
            worst[key] = (gap, need)
    terminalreporter.section("smallest start-to-start gaps seen by the farm")
    for what, (gap, need) in sorted(worst.items()):
        terminalreporter.write_line(
            f"{what:45s} {gap * 1000:8.1f} ms  (required {need * 1000:.0f} ms, "
            f"{(gap - need) * 1000:+.1f} ms)")


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server per test module (modules needing one per test override it)."""
    yield from redis_server_fixture()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A server of the test's own, for tests that kill it."""
    yield from redis_server_fixture()
