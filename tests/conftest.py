"""Shared fixtures: a site farm per test module, reset before each test.

Two tiers. A test that starts a server, a crawl or another process is an
``integration`` test (``make test``); the rest (pure policy, fake clock, parsing,
settings, add-on) form the fast tier, ``make check``. A test is ``integration`` when it
uses a server fixture (``SERVER_FIXTURES``) or is marked so itself
(``@pytest.mark.integration``, or ``pytestmark`` for a whole module).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_server import RedisServer, redis_server_fixture

from scrapy_politeness._sitefarm import Farm

SERVER_FIXTURES = frozenset({"farm", "farm_factory", "redis_server", "own_redis", "server",
                             "nginx", "proxy", "dnsmasq"})


# The crawls a test starts in a subprocess import this checkout, as the test
# itself does, not the one the venv's editable install points at (a worktree
# sharing another checkout's venv): what bench/runner.py does for the bench.
ROOT = str(Path(__file__).resolve().parents[1])
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: starts servers, crawls or processes "
                            "(make test); the rest is the fast tier (make check)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


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
