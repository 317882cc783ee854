"""Retry-After parsing: delta-seconds, HTTP-dates, garbage."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from scrapy_politeness.policy import parse_retry_after, retry_after_of

NOW = 1_700_000_000.0  # a whole second, so formatdate round-trips exactly


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("1.5", 1.5),
        (".5", 0.5),
        (b"7", 7.0),
        (b" 30\r\n", 30.0),
        ("86400", 86400.0),
    ],
)
def test_delta_seconds(value: str | bytes, expected: float) -> None:
    assert parse_retry_after(value, NOW) == expected


@pytest.mark.parametrize(
    "value",
    ["0", "0.0", "-5", "-0.5", "+5", "abc", "", "   ", None, "nan", "NaN", "inf",
     "-inf", "Infinity", "1e999", "120abc", "12 0", b"", b"\xff\xfe", "5s",
     "Mon, 99 Foo 2023 99:99:99 GMT", "Mon, 32 Jan 2024 00:00:00 GMT"],
)
def test_unusable_values_give_none(value: str | bytes | None) -> None:
    assert parse_retry_after(value, NOW) is None


def test_http_date_in_the_future() -> None:
    assert parse_retry_after(formatdate(NOW + 30, usegmt=True), NOW) == 30.0
    assert parse_retry_after(formatdate(NOW + 3600, usegmt=True).encode(), NOW) == 3600.0


def test_http_date_with_a_fractional_now() -> None:
    value = parse_retry_after(formatdate(NOW + 30, usegmt=True), NOW + 0.25)
    assert value == pytest.approx(29.75)


def test_http_date_against_the_real_clock() -> None:
    now = time.time()
    value = parse_retry_after(formatdate(now + 30, usegmt=True), now)
    assert value is not None
    assert 29.0 < value <= 30.0


@pytest.mark.parametrize("offset", [-30.0, -1.0, 0.0, -86400.0 * 365 * 30])
def test_http_date_now_or_in_the_past_gives_none(offset: float) -> None:
    assert parse_retry_after(formatdate(NOW + offset, usegmt=True), NOW) is None


def test_obsolete_http_date_forms_are_accepted() -> None:
    # RFC 9110 5.6.7: a recipient MUST accept all three HTTP-date formats.
    # NOW + 30 is Tue, 14 Nov 2023 22:13:50 GMT.
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", NOW) == 30.0  # IMF-fixdate
    assert parse_retry_after("Tuesday, 14-Nov-23 22:13:50 GMT", NOW) == 30.0  # RFC 850
    assert parse_retry_after("Tue Nov 14 22:13:50 2023", NOW) == 30.0  # asctime (no zone)


def test_http_date_with_numeric_zones() -> None:
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:50 +0000", NOW) == 30.0
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:50 -0000", NOW) == 30.0
    assert parse_retry_after("Tue, 14 Nov 2023 23:13:50 +0100", NOW) == 30.0


def test_retry_after_of_takes_the_largest_usable_value() -> None:
    values: list[str | bytes] = ["5", "garbage", "-10", "30", "nan",
                                 formatdate(NOW + 20, usegmt=True), b"12", ""]
    assert retry_after_of(values, NOW) == 30.0
    assert retry_after_of(["5", formatdate(NOW + 90, usegmt=True)], NOW) == 90.0
    assert retry_after_of([b"1.5", b"0.5"], NOW) == 1.5


def test_retry_after_of_nothing_usable_gives_none() -> None:
    assert retry_after_of([], NOW) is None
    assert retry_after_of(["abc", "0", "-1", "inf"], NOW) is None
    assert retry_after_of(iter(["abc", "3"]), NOW) == 3.0  # any iterable
