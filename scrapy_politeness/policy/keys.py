"""Normalising hostnames into bucket keys."""

from __future__ import annotations

import contextlib
import ipaddress

__all__ = ["host_key", "ip_literal"]


def host_key(hostname: str) -> str:
    """Lower case, no trailing dot, IDN as punycode, canonical IP literals:
    one spelling per host."""
    key = hostname.strip().rstrip(".").lower()
    if key.startswith("[") and key.endswith("]"):
        key = key[1:-1]
    literal = ip_literal(key)
    if literal is not None:  # one spelling per address: [0:0::1] and [::1] alike
        return literal
    if not key.isascii():
        with contextlib.suppress(UnicodeError):
            key = key.encode("idna").decode("ascii")
    return key


def ip_literal(host: str) -> str | None:
    """The canonical address when ``host`` is an IP literal, else None.

    Asked for every request's host name: a name that can be neither an IPv4
    literal (it ends in a digit) nor an IPv6 one (it has a colon) is answered
    without ``ipaddress``, whose refusal costs two exceptions."""
    if ":" not in host and not host[-1:].isdigit():
        return None
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None
