"""Shared fixtures: a site farm per test module, reset before each test."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from sitefarm import Farm  # noqa: E402


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
