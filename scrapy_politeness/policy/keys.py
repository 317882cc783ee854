"""Normalising hostnames into bucket keys."""

from __future__ import annotations

import contextlib
import ipaddress

__all__ = ["host_key", "ip_literal"]


def host_key(hostname: str) -> str:
    """Lower case, no trailing dot, IDN as punycode: one spelling per host."""
    key = hostname.strip().rstrip(".").lower()
    if key.startswith("[") and key.endswith("]"):
        key = key[1:-1]
    if not key.isascii():
        with contextlib.suppress(UnicodeError):
            key = key.encode("idna").decode("ascii")
    return key


def ip_literal(host: str) -> str | None:
    """The canonical address when ``host`` is an IP literal, else None."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None
