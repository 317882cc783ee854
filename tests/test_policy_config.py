"""Config: the AIMD step (adapt), the clamp (host_interval), validation."""

from __future__ import annotations

import math
from typing import Any

import pytest

from scrapy_politeness.policy import Config, Signal, is_failure
from scrapy_politeness.policy.config import MIN_WIDEN

C = Config()  # default 1, floor 0.25, ceiling 60, backoff 2, soft 1.25, narrow 0.05, rise 1.5


def test_defaults_match_reference_design() -> None:
    assert (C.default, C.floor, C.ceiling, C.ip_floor) == (1.0, 0.25, 60.0, 0.25)
    assert (C.backoff, C.soft_widen, C.narrow, C.latency_rise) == (2.0, 1.25, 0.05, 1.5)


@pytest.mark.parametrize(
    ("status", "failed"),
    [(0, True), (429, True), (500, True), (502, True), (503, True), (599, True),
     (200, False), (204, False), (301, False), (304, False), (404, False), (403, False),
     (428, False), (430, False), (499, False)],
)
def test_is_failure(status: int, failed: bool) -> None:
    assert is_failure(status) is failed


# -- adapt: failures ----------------------------------------------------------

@pytest.mark.parametrize("status", [0, 429, 500, 503, 504])
def test_failure_multiplies_by_backoff(status: int) -> None:
    assert C.adapt(1.0, Signal(status)) == 2.0
    assert C.adapt(3.0, Signal(status)) == 6.0
    assert Config(backoff=3.0).adapt(1.0, Signal(status)) == 3.0


def test_failure_beats_latency_rise() -> None:
    # A 503 with sharply rising latency backs off (x2), it does not soft-widen (x1.25).
    sig = Signal(503, latency=10.0, prev_latency=1.0)
    assert C.adapt(1.0, sig) == 2.0
    assert C.adapt(1.0, Signal(0, latency=10.0, prev_latency=1.0)) == 2.0
    assert C.adapt(1.0, Signal(429, latency=10.0, prev_latency=1.0)) == 2.0


def test_retry_after_is_a_floor_on_failures() -> None:
    # Bigger than the backoff result wins.
    assert C.adapt(1.0, Signal(429, retry_after=30.0)) == 30.0
    assert C.adapt(1.0, Signal(503, retry_after=2.5)) == 2.5
    # Smaller does not.
    assert C.adapt(4.0, Signal(429, retry_after=5.0)) == 8.0
    assert C.adapt(1.0, Signal(429, retry_after=1.5)) == 2.0
    # Equal: same value either way.
    assert C.adapt(1.0, Signal(429, retry_after=2.0)) == 2.0


def test_retry_after_on_healthy_response_does_not_touch_the_interval() -> None:
    # adapt only takes Retry-After as a floor on failures; a 200 still narrows.
    assert C.adapt(1.0, Signal(200, retry_after=30.0)) == pytest.approx(0.95)


# -- adapt: latency ---------------------------------------------------------

def test_sharply_rising_latency_soft_widens() -> None:
    assert C.adapt(1.0, Signal(200, latency=1.6, prev_latency=1.0)) == 1.25
    assert C.adapt(2.0, Signal(404, latency=4.0, prev_latency=1.0)) == 2.5


def test_latency_exactly_at_threshold_does_not_widen() -> None:
    # 1.5 == 1.0 * 1.5: not "above", so the healthy narrow applies.
    assert C.adapt(1.0, Signal(200, latency=1.5, prev_latency=1.0)) == pytest.approx(0.95)
    assert C.adapt(1.0, Signal(200, latency=1.5000001, prev_latency=1.0)) == 1.25


def test_prev_latency_zero_means_no_rise_check() -> None:
    assert C.adapt(1.0, Signal(200, latency=100.0, prev_latency=0.0)) == pytest.approx(0.95)


def test_falling_latency_narrows() -> None:
    assert C.adapt(1.0, Signal(200, latency=0.1, prev_latency=1.0)) == pytest.approx(0.95)


# -- adapt: healthy ---------------------------------------------------------

@pytest.mark.parametrize("status", [200, 404, 301, 304, 403])
def test_healthy_narrows(status: int) -> None:
    assert C.adapt(1.0, Signal(status)) == pytest.approx(0.95)
    assert Config(narrow=0.5).adapt(2.0, Signal(status)) == 1.5


def test_adapt_is_unclamped() -> None:
    assert C.adapt(0.25, Signal(200)) == pytest.approx(0.20)  # below the floor
    assert C.adapt(0.0, Signal(200)) == pytest.approx(-0.05)
    assert C.adapt(60.0, Signal(503)) == 120.0  # above the ceiling
    assert C.adapt(60.0, Signal(200, latency=3.0, prev_latency=1.0)) == 75.0


# -- host_interval / at_ceiling ----------------------------------------------

@pytest.mark.parametrize(
    ("adaptive", "crawl_delay", "expected"),
    [
        (1.0, 0.0, 1.0),
        (0.1, 0.0, 0.25),  # up to the floor
        (-3.0, 0.0, 0.25),
        (100.0, 0.0, 60.0),  # down to the ceiling
        (0.1, 2.0, 2.0),  # crawl-delay raises the lower bound
        (1.0, 2.0, 2.0),
        (3.0, 2.0, 3.0),  # adaptive above crawl-delay wins
        (0.1, 0.1, 0.25),  # crawl-delay below the floor: floor
        (100.0, 30.0, 60.0),
        (1.0, 90.0, 90.0),  # crawl-delay above the ceiling wins
        (100.0, 90.0, 90.0),
        (60.0, 0.0, 60.0),
        (0.25, 0.0, 0.25),
    ],
)
def test_host_interval_clamp(adaptive: float, crawl_delay: float, expected: float) -> None:
    assert C.host_interval(adaptive, crawl_delay) == expected


def test_host_interval_default_crawl_delay_is_zero() -> None:
    assert C.host_interval(0.0) == 0.25
    assert C.host_interval(61.0) == 60.0


def test_at_ceiling() -> None:
    assert C.at_ceiling(60.0)
    assert C.at_ceiling(90.0)
    assert not C.at_ceiling(59.99)
    assert not C.at_ceiling(C.host_interval(59.0))
    assert C.at_ceiling(C.host_interval(1000.0))


# -- validation --------------------------------------------------------------

@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"backoff": 0.5}, "backoff"),
        ({"backoff": 0.0}, "backoff"),
        ({"soft_widen": 0.9}, "soft_widen"),
        ({"latency_rise": 0.5}, "latency_rise"),
        ({"floor": 2.0}, "floor"),  # floor > default
        ({"default": 100.0}, "default"),  # default > ceiling
        ({"ceiling": 0.5}, "ceiling"),  # default > ceiling
        ({"floor": -1.0}, "floor"),
        ({"default": -1.0}, "default"),
        ({"ip_floor": -0.1}, "ip_floor"),
        ({"narrow": -0.05}, "narrow"),
        ({"default": math.nan}, "default"),
        ({"ceiling": math.nan}, "ceiling"),
        ({"ceiling": math.inf}, "ceiling"),
        ({"ip_floor": -math.inf}, "ip_floor"),
        ({"narrow": math.nan}, "narrow"),
        ({"floor": 0.0, "default": 0.0, "ceiling": 0.0}, "ceiling"),
    ],
)
def test_bad_values_raise_value_error_naming_the_field(kwargs: dict[str, Any],
                                                       field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Config(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"floor": True}, "floor"),
        ({"backoff": False}, "backoff"),
        ({"default": "1"}, "default"),
        ({"ceiling": None}, "ceiling"),
        ({"narrow": [0.1]}, "narrow"),
    ],
)
def test_bad_types_raise_type_error_naming_the_field(kwargs: dict[str, Any],
                                                     field: str) -> None:
    with pytest.raises(TypeError, match=field):
        Config(**kwargs)


def test_boundary_values_are_accepted() -> None:
    c = Config(default=0.25, floor=0.25, ceiling=0.25, backoff=1.0, soft_widen=1.0,
               latency_rise=1.0, narrow=0.0, ip_floor=0.0)
    assert c.host_interval(5.0) == 0.25
    # backoff = 1 cannot multiply a failure wider: it widens by MIN_WIDEN (issue 9 item 2)
    assert c.adapt(1.0, Signal(503)) == pytest.approx(1.0 + MIN_WIDEN)
    Config(floor=0.0, default=0.0, ceiling=1.0)
    Config(default=3, floor=1, ceiling=9)  # ints are fine


def test_config_is_frozen() -> None:
    with pytest.raises(AttributeError):
        C.floor = 0.0  # type: ignore[misc]
