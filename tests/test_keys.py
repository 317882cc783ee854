"""Bucket keys: one spelling per host; IP literals."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_politeness.policy import host_key, ip_literal


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("WWW.Example.COM.", "www.example.com"),
        ("example.com", "example.com"),
        ("  Example.com  ", "example.com"),
        ("example.com..", "example.com"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("BÜCHER.DE.", "xn--bcher-kva.de"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("[::1]", "::1"),
        ("[2001:DB8::1]", "2001:db8::1"),
        ("127.0.0.1", "127.0.0.1"),
    ],
)
def test_host_key(raw: str, key: str) -> None:
    assert host_key(raw) == key


def test_host_key_spellings_collapse_to_one_key() -> None:
    spellings = ["Bücher.de", "bücher.de.", "BÜCHER.de", "xn--bcher-kva.de", "XN--BCHER-KVA.DE."]
    assert {host_key(s) for s in spellings} == {"xn--bcher-kva.de"}


def test_host_key_is_idempotent() -> None:
    for raw in ("WWW.Example.COM.", "bücher.de", "[::1]", "a.b.c"):
        assert host_key(host_key(raw)) == host_key(raw)


def test_host_key_bad_idn_does_not_raise() -> None:
    # A label too long for IDNA: kept as is (lower case) rather than crashing.
    raw = "ü" * 100 + ".de"
    assert host_key(raw) == raw


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("2001:0DB8:0000::0001", "2001:db8::1"),
        ("example.com", None),
        ("[::1]", None),
        ("", None),
        ("256.1.1.1", None),
        ("1.2.3", None),
    ],
)
def test_ip_literal(host: str, expected: str | None) -> None:
    assert ip_literal(host) == expected


@given(st.one_of(st.text(alphabet="0123456789abcdefABCDEF.:%x-", max_size=45), st.text(max_size=20),
                 st.ip_addresses().map(str)))
def test_ip_literal_answers_as_ipaddress_does(host: str) -> None:
    """Its shortcut for names (no colon, no final digit) never refuses a literal."""
    try:
        expected: str | None = str(ipaddress.ip_address(host))
    except ValueError:
        expected = None
    assert ip_literal(host) == expected
