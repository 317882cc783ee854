"""POLITENESS_HOSTS: per-host overrides of the global bands, checked like the rest.

An override is a full :class:`~scrapy_politeness.policy.Config` for one host
key; under ``POLITENESS_HOST_GROUPING = "domain"`` overrides are re-keyed by
their group, and two that differ for one group are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scrapy_politeness.policy import RECOVERIES, Config, host_key
from scrapy_politeness.setting_values import choice, json_value, number

__all__ = ["CONFIG_FIELDS", "config_of", "host_overrides"]

CONFIG_FIELDS = {
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
HOST_OVERRIDE_FIELDS = ("default", "floor", "ceiling", "recovery")


def host_overrides(raw: Any, values: dict[str, float], recovery: str,
                   grouping: str) -> dict[str, Config]:
    """POLITENESS_HOSTS validated: normalised host key (or group) -> its Config.

    ``values`` are the global POLITENESS_* numbers each override starts from.
    """
    hosts_raw = json_value("POLITENESS_HOSTS", raw, "{")
    if not isinstance(hosts_raw, Mapping):
        raise ValueError(f"POLITENESS_HOSTS must be a dict, got {hosts_raw!r}")
    hosts: dict[str, Config] = {}
    for host, over in hosts_raw.items():
        where = f"POLITENESS_HOSTS[{host!r}]"
        if not isinstance(host, str) or not isinstance(over, Mapping):
            raise ValueError(f"{where} must map a host name to a dict, got {over!r}")
        unknown = set(over) - set(HOST_OVERRIDE_FIELDS)
        if unknown:
            raise ValueError(f"{where} has unknown keys {sorted(unknown)!r}; "
                             f"allowed: {list(HOST_OVERRIDE_FIELDS)!r}")
        merged = dict(values)
        host_recovery = recovery
        for k, v in over.items():
            if k == "recovery":
                host_recovery = choice(f"{where}['recovery']", v, RECOVERIES)
            else:
                merged[k] = number(f"{where}[{k!r}]", v)
        if "default" not in over:  # keep the global default inside the host's band
            merged["default"] = min(max(merged["default"], merged["floor"]),
                                    merged["ceiling"])
        hosts[host_key(host)] = config_of(where, merged, host_recovery)
    if hosts and grouping == "domain":
        hosts = _by_domain(hosts)
    return hosts


def _by_domain(hosts: dict[str, Config]) -> dict[str, Config]:
    """Re-key host overrides by their group under ``POLITENESS_HOST_GROUPING="domain"``.

    The group's bucket is the only one there is, so an override named for
    one of its hosts applies to the whole group; two differing overrides for
    one group cannot both hold.
    """
    from scrapy_politeness.downloader.host_keys import make_key_function

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


def config_of(where: str, values: dict[str, float], recovery: str) -> Config:
    def name(f: str) -> str:
        return CONFIG_FIELDS[f] if where == "POLITENESS_*" else f"{where}[{f!r}]"

    if not values["floor"] <= values["default"] <= values["ceiling"]:
        raise ValueError(
            f"{name('floor')} <= {name('default')} <= {name('ceiling')} must hold, got "
            f"{values['floor']!r}, {values['default']!r}, {values['ceiling']!r}"
        )
    try:
        return Config(**values, recovery=recovery)
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        for f in CONFIG_FIELDS:
            msg = msg.replace(f"Config.{f} ", f"{name(f)} ")
        raise ValueError(msg) from None
