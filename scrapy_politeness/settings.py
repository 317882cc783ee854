"""Every POLITENESS_* setting: one table of defaults, one validating reader.

A bad value stops the crawl at start with a ``ValueError`` naming the setting
and the value, rather than a traceback from deep inside a later request.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .policy import RECOVERIES, Config

__all__ = ["DEFAULTS", "PolitenessSettings", "unknown_names"]

DEFAULTS: dict[str, Any] = {
    "POLITENESS_ENABLED": True,
    "POLITENESS_DEFAULT": 1.0,
    "POLITENESS_FLOOR": 0.25,
    "POLITENESS_CEILING": 60.0,
    "POLITENESS_IP_FLOOR": 0.25,
    "POLITENESS_BACKOFF": 2.0,
    "POLITENESS_SOFT_WIDEN": 1.25,
    "POLITENESS_NARROW": 0.05,
    "POLITENESS_LATENCY_RISE": 1.5,
    "POLITENESS_LATENCY_MIN_RISE": 0.05,
    "POLITENESS_RECOVERY": "fast",
    "POLITENESS_DEAD_AFTER": 5,
    "POLITENESS_MAX_CRAWL_DELAY": 60.0,
    "POLITENESS_CRAWL_DELAY_OVER_MAX": "skip",
    "POLITENESS_MAX_RETRY_AFTER": 600.0,
    "POLITENESS_HOSTS": {},
    "POLITENESS_HOST_GROUPING": "host",
    "POLITENESS_IP_EXEMPT": [],
    "POLITENESS_SEND_MARGIN": 0.01,
    "POLITENESS_IDLE_TTL": 300.0,
    "POLITENESS_DNS_NAMESERVERS": [],
    "POLITENESS_DNS_TIMEOUT": 5.0,
    "POLITENESS_DNS_MIN_TTL": 5.0,
    "POLITENESS_DNS_MAX_TTL": 3600.0,
    "POLITENESS_DNS_NEGATIVE_TTL": 30.0,
    "POLITENESS_DNS_PIN": True,
    "POLITENESS_DNS_HOSTS_FILE": "/etc/hosts",
    "POLITENESS_REPORT_HOSTS": 10,
    "POLITENESS_REPORT_STAT": False,
    "POLITENESS_BACKEND": "memory",
    "POLITENESS_NAMESPACE": None,
    "POLITENESS_BACKEND_ON_LOSS": "hold",
    "POLITENESS_LOG_INTERVAL": 10.0,
    "POLITENESS_TRACE": None,
    "POLITENESS_TRACE_BUFFER": 100_000,
    "POLITENESS_PERSIST": True,
    "POLITENESS_ROBOTS_PREFETCH": True,
}

_CONFIG_FIELDS = {
    "default": "POLITENESS_DEFAULT",
    "floor": "POLITENESS_FLOOR",
    "ceiling": "POLITENESS_CEILING",
    "ip_floor": "POLITENESS_IP_FLOOR",
    "backoff": "POLITENESS_BACKOFF",
    "soft_widen": "POLITENESS_SOFT_WIDEN",
    "narrow": "POLITENESS_NARROW",
    "latency_rise": "POLITENESS_LATENCY_RISE",
    "latency_min_rise": "POLITENESS_LATENCY_MIN_RISE",
}
_HOST_OVERRIDE_FIELDS = ("default", "floor", "ceiling", "recovery")
_OVER_MAX = ("skip", "cap", "honour")
_GROUPING = ("host", "domain")
_ON_LOSS = ("hold", "local")


class _SettingsLike(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


def _number(name: str, value: Any, *, minimum: float = 0.0, allow_none: bool = False,
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


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ValueError(f"{name} must be True or False, got {value!r}")


def unknown_names(names: Iterable[str]) -> list[tuple[str, str | None]]:
    """The POLITENESS_* names that no setting has, each with the closest known name.

    A misspelt setting (``POLITENESS_FLOR``) would otherwise change nothing
    and say nothing.
    """
    prefix = "POLITENESS_"
    known = [k.removeprefix(prefix) for k in DEFAULTS]  # the shared prefix says nothing

    def closest(name: str) -> str | None:
        match = difflib.get_close_matches(name.removeprefix(prefix), known, n=1, cutoff=0.6)
        return prefix + match[0] if match else None

    return [(name, closest(name)) for name in sorted(names)
            if name.startswith(prefix) and name not in DEFAULTS]


def _json(name: str, value: Any, opening: str) -> Any:
    """``-s NAME='{...}'`` / ``'[...]'`` arrive as strings: read them as JSON, as
    Scrapy's ``getdict`` / ``getlist`` do."""
    if isinstance(value, str) and value.lstrip().startswith(opening):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{name} is not valid JSON ({exc}), got {value!r}") from None
    return value


def _str_list(name: str, value: Any) -> list[str]:
    if value is None:
        return []
    value = _json(name, value, "[")
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} must be a list of strings, got {value!r}")
    return list(value)


def _nameserver(name: str, entry: str) -> tuple[str, int]:
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
            port = _port(name, entry, rest[1:])
    elif host.count(":") == 1:
        host, _, raw = host.partition(":")
        port = _port(name, entry, raw)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"{name} entries must be an IP address or ip:port, got {entry!r}"
        ) from None
    return host, port


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed!r}, got {value!r}")
    return str(value)


def _optional_str(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {value!r}")
    return value


def _optional_path(name: str, value: Any) -> str | None:
    """A file path, or None/empty for off (``os.PathLike`` accepted)."""
    if value is None or value == "":
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a file path or empty, got {value!r}")
    return value


def _backend(value: Any) -> str:
    from .backends.redaction import SCHEMES, normalise_scheme, redact_url

    if isinstance(value, str):
        url = normalise_scheme(value)
        if url == "memory" or url.partition("://")[0] in SCHEMES:
            return url
        shown = f"'{redact_url(value)}'"  # never echo a password, even of a rejected URL
    else:
        shown = f"a {type(value).__name__}"  # its repr could hold a URL with a password
    raise ValueError(f"POLITENESS_BACKEND must be 'memory' or a redis://, rediss:// or "
                     f"unix:// URL, got {shown}")


def _port(name: str, entry: str, raw: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{name} has a bad port in {entry!r}")
    return int(raw)


@dataclass(frozen=True)
class PolitenessSettings:
    """The validated POLITENESS_* settings of one crawl."""

    enabled: bool
    config: Config
    hosts: Mapping[str, Config]
    dead_after: int
    max_crawl_delay: float | None
    crawl_delay_over_max: str
    max_retry_after: float
    grouping: str
    ip_exempt: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    send_margin: float
    idle_ttl: float
    dns_nameservers: tuple[tuple[str, int], ...]
    dns_timeout: float
    dns_min_ttl: float
    dns_max_ttl: float
    dns_negative_ttl: float
    dns_pin: bool
    dns_hosts_file: str | None
    report_hosts: int
    backend: str
    namespace: str | None
    backend_on_loss: str
    log_interval: float = DEFAULTS["POLITENESS_LOG_INTERVAL"]
    trace: str | None = None
    trace_buffer: int = DEFAULTS["POLITENESS_TRACE_BUFFER"]
    persist: bool = True
    report_stat: bool = False
    robots_prefetch: bool = True

    @classmethod
    def from_settings(cls, settings: _SettingsLike | Mapping[str, Any]) -> PolitenessSettings:
        def raw(name: str) -> Any:
            value = settings.get(name, None)
            return DEFAULTS[name] if value is None else value

        enabled = _bool("POLITENESS_ENABLED", raw("POLITENESS_ENABLED"))
        values = {f: _number(s, raw(s)) for f, s in _CONFIG_FIELDS.items()}
        recovery = _choice("POLITENESS_RECOVERY", raw("POLITENESS_RECOVERY"), RECOVERIES)
        config = _config("POLITENESS_*", values, recovery)

        grouping = raw("POLITENESS_HOST_GROUPING")
        if grouping not in _GROUPING:
            raise ValueError(f"POLITENESS_HOST_GROUPING must be one of {_GROUPING!r}, "
                             f"got {grouping!r}")
        hosts_raw = _json("POLITENESS_HOSTS", raw("POLITENESS_HOSTS"), "{")
        if not isinstance(hosts_raw, Mapping):
            raise ValueError(f"POLITENESS_HOSTS must be a dict, got {hosts_raw!r}")
        hosts: dict[str, Config] = {}
        from .policy import host_key

        for host, over in hosts_raw.items():
            where = f"POLITENESS_HOSTS[{host!r}]"
            if not isinstance(host, str) or not isinstance(over, Mapping):
                raise ValueError(f"{where} must map a host name to a dict, got {over!r}")
            unknown = set(over) - set(_HOST_OVERRIDE_FIELDS)
            if unknown:
                raise ValueError(f"{where} has unknown keys {sorted(unknown)!r}; "
                                 f"allowed: {list(_HOST_OVERRIDE_FIELDS)!r}")
            merged = dict(values)
            host_recovery = recovery
            for k, v in over.items():
                if k == "recovery":
                    host_recovery = _choice(f"{where}['recovery']", v, RECOVERIES)
                else:
                    merged[k] = _number(f"{where}[{k!r}]", v)
            if "default" not in over:  # keep the global default inside the host's band
                merged["default"] = min(max(merged["default"], merged["floor"]),
                                        merged["ceiling"])
            hosts[host_key(host)] = _config(where, merged, host_recovery)
        if hosts and grouping == "domain":
            hosts = _by_domain(hosts)

        over_max = raw("POLITENESS_CRAWL_DELAY_OVER_MAX")
        if over_max not in _OVER_MAX:
            raise ValueError(f"POLITENESS_CRAWL_DELAY_OVER_MAX must be one of {_OVER_MAX!r}, "
                             f"got {over_max!r}")
        exempt = []
        for entry in _str_list("POLITENESS_IP_EXEMPT", raw("POLITENESS_IP_EXEMPT")):
            try:
                exempt.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(
                    f"POLITENESS_IP_EXEMPT entries must be networks in CIDR form, got {entry!r}"
                ) from None
        nameservers = tuple(
            _nameserver("POLITENESS_DNS_NAMESERVERS", e)
            for e in _str_list("POLITENESS_DNS_NAMESERVERS", raw("POLITENESS_DNS_NAMESERVERS"))
        )
        min_ttl = _number("POLITENESS_DNS_MIN_TTL", raw("POLITENESS_DNS_MIN_TTL"))
        max_ttl = _number("POLITENESS_DNS_MAX_TTL", raw("POLITENESS_DNS_MAX_TTL"))
        if max_ttl < min_ttl:
            raise ValueError(f"POLITENESS_DNS_MAX_TTL ({max_ttl!r}) must be >= "
                             f"POLITENESS_DNS_MIN_TTL ({min_ttl!r})")
        hosts_file = settings.get("POLITENESS_DNS_HOSTS_FILE",
                                  DEFAULTS["POLITENESS_DNS_HOSTS_FILE"])
        if hosts_file is not None and not isinstance(hosts_file, str):
            raise ValueError(f"POLITENESS_DNS_HOSTS_FILE must be a path or empty, "
                             f"got {hosts_file!r}")
        return cls(
            enabled=enabled,
            config=config,
            hosts=hosts,
            dead_after=_number("POLITENESS_DEAD_AFTER", raw("POLITENESS_DEAD_AFTER"),
                               minimum=1, integer=True),
            max_crawl_delay=_number("POLITENESS_MAX_CRAWL_DELAY",
                                    settings.get("POLITENESS_MAX_CRAWL_DELAY",
                                                 DEFAULTS["POLITENESS_MAX_CRAWL_DELAY"]),
                                    allow_none=True),
            crawl_delay_over_max=over_max,
            max_retry_after=_number("POLITENESS_MAX_RETRY_AFTER",
                                    raw("POLITENESS_MAX_RETRY_AFTER")),
            grouping=grouping,
            ip_exempt=tuple(exempt),
            send_margin=_number("POLITENESS_SEND_MARGIN", raw("POLITENESS_SEND_MARGIN")),
            idle_ttl=_number("POLITENESS_IDLE_TTL", raw("POLITENESS_IDLE_TTL"), minimum=1),
            dns_nameservers=nameservers,
            dns_timeout=_number("POLITENESS_DNS_TIMEOUT", raw("POLITENESS_DNS_TIMEOUT"),
                                minimum=0.001),
            dns_min_ttl=min_ttl,
            dns_max_ttl=max_ttl,
            dns_negative_ttl=_number("POLITENESS_DNS_NEGATIVE_TTL",
                                     raw("POLITENESS_DNS_NEGATIVE_TTL")),
            dns_pin=_bool("POLITENESS_DNS_PIN", raw("POLITENESS_DNS_PIN")),
            dns_hosts_file=hosts_file or None,
            report_hosts=_number("POLITENESS_REPORT_HOSTS", raw("POLITENESS_REPORT_HOSTS"),
                                 integer=True),
            backend=_backend(raw("POLITENESS_BACKEND")),
            namespace=_optional_str("POLITENESS_NAMESPACE", settings.get("POLITENESS_NAMESPACE")),
            backend_on_loss=_choice("POLITENESS_BACKEND_ON_LOSS",
                                    raw("POLITENESS_BACKEND_ON_LOSS"), _ON_LOSS),
            log_interval=_number("POLITENESS_LOG_INTERVAL", raw("POLITENESS_LOG_INTERVAL")),
            trace=_optional_path("POLITENESS_TRACE", settings.get("POLITENESS_TRACE")),
            trace_buffer=_number("POLITENESS_TRACE_BUFFER", raw("POLITENESS_TRACE_BUFFER"),
                                 minimum=1, integer=True),
            persist=_bool("POLITENESS_PERSIST", raw("POLITENESS_PERSIST")),
            report_stat=_bool("POLITENESS_REPORT_STAT", raw("POLITENESS_REPORT_STAT")),
            robots_prefetch=_bool("POLITENESS_ROBOTS_PREFETCH", raw("POLITENESS_ROBOTS_PREFETCH")),
        )

    def config_for(self, key: str) -> Config:
        return self.hosts.get(key, self.config)


def _by_domain(hosts: dict[str, Config]) -> dict[str, Config]:
    """Re-key host overrides by their group under ``POLITENESS_HOST_GROUPING="domain"``.

    The group's bucket is the only one there is, so an override named for
    one of its hosts applies to the whole group; two differing overrides for
    one group cannot both hold.
    """
    from .grouping import make_key_function

    key = make_key_function("domain")
    grouped: dict[str, Config] = {}
    named: dict[str, str] = {}
    for host, config in hosts.items():
        group = key(host)
        if group in grouped and grouped[group] != config:
            raise ValueError(
                f"POLITENESS_HOSTS[{named[group]!r}] and POLITENESS_HOSTS[{host!r}] differ but "
                f"both apply to the group {group!r} (POLITENESS_HOST_GROUPING='domain'); "
                f"give one entry for {group!r}")
        grouped[group] = config
        named.setdefault(group, host)
    return grouped


def _config(where: str, values: dict[str, float], recovery: str) -> Config:
    def name(f: str) -> str:
        return _CONFIG_FIELDS[f] if where == "POLITENESS_*" else f"{where}[{f!r}]"

    if not values["floor"] <= values["default"] <= values["ceiling"]:
        raise ValueError(
            f"{name('floor')} <= {name('default')} <= {name('ceiling')} must hold, got "
            f"{values['floor']!r}, {values['default']!r}, {values['ceiling']!r}"
        )
    try:
        return Config(**values, recovery=recovery)
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        for f in _CONFIG_FIELDS:
            msg = msg.replace(f"Config.{f} ", f"{name(f)} ")
        raise ValueError(msg) from None
