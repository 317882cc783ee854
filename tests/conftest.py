"""Shared fixtures: a site farm per test module, reset before each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sitefarm import Farm


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
