"""Readers for one POLITENESS_* value each: the checks behind every ``ValueError``.

Each takes the setting's name so the message names it, and accepts what
``scrapy crawl -s NAME=...`` delivers (strings, JSON for lists and dicts).
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
from typing import Any

__all__ = ["backend_url", "boolean", "choice", "json_value", "nameserver", "number",
           "optional_path", "optional_str", "port_of", "str_list"]


def number(name: str, value: Any, *, minimum: float = 0.0, allow_none: bool = False,
            integer: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if integer and not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum:g}, got {value!r}")
    return int(value) if integer else float(value)


def boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ValueError(f"{name} must be True or False, got {value!r}")


def json_value(name: str, value: Any, opening: str) -> Any:
    """``-s NAME='{...}'`` / ``'[...]'`` arrive as strings: read them as JSON, as
    Scrapy's ``getdict`` / ``getlist`` do."""
    if isinstance(value, str) and value.lstrip().startswith(opening):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{name} is not valid JSON ({exc}), got {value!r}") from None
    return value


def str_list(name: str, value: Any) -> list[str]:
    if value is None:
        return []
    value = json_value(name, value, "[")
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} must be a list of strings, got {value!r}")
    return list(value)


def nameserver(name: str, entry: str) -> tuple[str, int]:
    """``"ip"``, ``"ip:port"`` or ``"[v6]:port"`` into (ip, port)."""
    host, port = entry.strip(), 53
    if host.startswith("["):
        inner, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(
                f"{name} entries must be an IP address or ip:port, got {entry!r}"
            )
        host = inner
        if rest:
            port = port_of(name, entry, rest[1:])
    elif host.count(":") == 1:
        host, _, raw = host.partition(":")
        port = port_of(name, entry, raw)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"{name} entries must be an IP address or ip:port, got {entry!r}"
        ) from None
    return host, port


def choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed!r}, got {value!r}")
    return str(value)


def optional_str(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    return value


def optional_path(name: str, value: Any) -> str | None:
    """A file path, or None/empty for off (``os.PathLike`` accepted)."""
    if value is None or value == "":
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a file path or empty, got {value!r}")
    return value


def backend_url(value: Any) -> str:
    from scrapy_politeness.distributed.redaction import SCHEMES, normalise_scheme, redact_url

    if isinstance(value, str):
        url = normalise_scheme(value)
        if url == "memory" or url.partition("://")[0] in SCHEMES:
            return url
        shown = f"'{redact_url(value)}'"  # never echo a password, even of a rejected URL
    else:
        shown = f"a {type(value).__name__}"  # its repr could hold a URL with a password
    raise ValueError(f"POLITENESS_BACKEND must be 'memory' or a redis://, rediss:// or "
                     f"unix:// URL, got {shown}")


def port_of(name: str, entry: str, raw: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{name} has a bad port in {entry!r}")
    return int(raw)
