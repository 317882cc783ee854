"""Every POLITENESS_* setting: one table of defaults, one validating reader.

A bad value stops the crawl at start with a ``ValueError`` naming the setting
and the value, rather than a traceback from deep inside a later request. The
checks of single values live in :mod:`.setting_values`, those of
``POLITENESS_HOSTS`` in :mod:`.host_overrides`; here the table, the typo
check and the reader that puts them together.
"""

from __future__ import annotations

import difflib
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from scrapy_politeness.host_overrides import CONFIG_FIELDS, config_of, host_overrides
from scrapy_politeness.policy import IP_MODELS, RECOVERIES, Config
from scrapy_politeness.setting_values import (
    backend_url,
    boolean,
    choice,
    nameserver,
    number,
    optional_path,
    optional_str,
    str_list,
)

__all__ = ["DEFAULTS", "PRIORITY_NAMES", "PolitenessSettings", "unknown_names"]

PRIORITY_NAMES = {0: "default", 10: "command", 15: "addon", 20: "project", 30: "spider",
                  40: "cmdline"}
"""Scrapy's settings priorities by number: where a value came from."""

DEFAULTS: dict[str, Any] = {
    "POLITENESS_ENABLED": True,
    "POLITENESS_DEFAULT": 1.0,
    "POLITENESS_FLOOR": 0.25,
    "POLITENESS_CEILING": 60.0,
    "POLITENESS_IP_FLOOR": 0.25,
    "POLITENESS_IP_MODEL": "decoupled",
    "POLITENESS_BACKOFF": 2.0,
    "POLITENESS_SOFT_WIDEN": 1.25,
    "POLITENESS_NARROW": 0.05,
    "POLITENESS_LATENCY_RISE": 1.5,
    "POLITENESS_LATENCY_MIN_RISE": 0.05,
    "POLITENESS_RECOVERY": "fast",
    "POLITENESS_DEAD_AFTER": 5,
    "POLITENESS_ON_CEILING": "suspend",
    "POLITENESS_SUSPEND_COOLDOWN": None,
    "POLITENESS_SUSPEND_MAX_COOLDOWN": 3600.0,
    "POLITENESS_WAIT_FOR_SUSPENDED": False,
    "POLITENESS_MAX_CRAWL_DELAY": 60.0,
    "POLITENESS_CRAWL_DELAY_OVER_MAX": "skip",
    "POLITENESS_MAX_RETRY_AFTER": 600.0,
    "POLITENESS_HOSTS": {},
    "POLITENESS_HOST_GROUPING": "host",
    "POLITENESS_IP_EXEMPT": [],
    "POLITENESS_CDN_EDGES": True,
    "POLITENESS_EDGE_FLOOR": 0.0,
    "POLITENESS_SEND_MARGIN": 0.01,
    "POLITENESS_IDLE_TTL": 300.0,
    "POLITENESS_DNS_NAMESERVERS": [],
    "POLITENESS_DNS_TIMEOUT": 5.0,
    "POLITENESS_DNS_MIN_TTL": 5.0,
    "POLITENESS_DNS_MAX_TTL": 3600.0,
    "POLITENESS_DNS_NEGATIVE_TTL": 30.0,
    "POLITENESS_DNS_PIN": True,
    "POLITENESS_DNS_HOSTS_FILE": "/etc/hosts",
    "POLITENESS_DNS_RESOLV_CONF": "/etc/resolv.conf",
    "POLITENESS_PROXY_LOCAL_DNS": True,
    "POLITENESS_DNS_CONCURRENCY": 32,
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
    "POLITENESS_GC_FREEZE": False,
}

_OVER_MAX = ("skip", "cap", "honour")
_ON_CEILING = ("suspend", "dead")
_GROUPING = ("host", "domain")
_ON_LOSS = ("hold", "local")


class _SettingsLike(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


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
    dns_resolv_conf: str | None
    proxy_local_dns: bool
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
    gc_freeze: bool = False
    ip_model: str = "decoupled"
    on_ceiling: str = "suspend"
    suspend_cooldown: float | None = None
    suspend_max_cooldown: float = DEFAULTS["POLITENESS_SUSPEND_MAX_COOLDOWN"]
    wait_for_suspended: bool = False
    dns_concurrency: int = DEFAULTS["POLITENESS_DNS_CONCURRENCY"]
    cdn_edges: bool = True
    edge_floor: float = 0.0

    @classmethod
    def from_settings(cls, settings: _SettingsLike | Mapping[str, Any]) -> PolitenessSettings:
        def raw(name: str) -> Any:
            value = settings.get(name, None)
            return DEFAULTS[name] if value is None else value

        enabled = boolean("POLITENESS_ENABLED", raw("POLITENESS_ENABLED"))
        values = {f: number(s, raw(s)) for f, s in CONFIG_FIELDS.items()}
        recovery = choice("POLITENESS_RECOVERY", raw("POLITENESS_RECOVERY"), RECOVERIES)
        config = config_of("POLITENESS_*", values, recovery)

        grouping = raw("POLITENESS_HOST_GROUPING")
        if grouping not in _GROUPING:
            raise ValueError(f"POLITENESS_HOST_GROUPING must be one of {_GROUPING!r}, "
                             f"got {grouping!r}")
        hosts = host_overrides(raw("POLITENESS_HOSTS"), values, recovery, grouping)

        over_max = raw("POLITENESS_CRAWL_DELAY_OVER_MAX")
        if over_max not in _OVER_MAX:
            raise ValueError(f"POLITENESS_CRAWL_DELAY_OVER_MAX must be one of {_OVER_MAX!r}, "
                             f"got {over_max!r}")
        exempt = []
        for entry in str_list("POLITENESS_IP_EXEMPT", raw("POLITENESS_IP_EXEMPT")):
            try:
                exempt.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(
                    f"POLITENESS_IP_EXEMPT entries must be networks in CIDR form, got {entry!r}"
                ) from None
        nameservers = tuple(
            nameserver("POLITENESS_DNS_NAMESERVERS", e)
            for e in str_list("POLITENESS_DNS_NAMESERVERS", raw("POLITENESS_DNS_NAMESERVERS"))
        )
        min_ttl = number("POLITENESS_DNS_MIN_TTL", raw("POLITENESS_DNS_MIN_TTL"))
        max_ttl = number("POLITENESS_DNS_MAX_TTL", raw("POLITENESS_DNS_MAX_TTL"))
        if max_ttl < min_ttl:
            raise ValueError(f"POLITENESS_DNS_MAX_TTL ({max_ttl!r}) must be >= "
                             f"POLITENESS_DNS_MIN_TTL ({min_ttl!r})")
        hosts_file, resolv_conf = (optional_path(name, settings.get(name, DEFAULTS[name]))
                                   for name in ("POLITENESS_DNS_HOSTS_FILE",
                                                "POLITENESS_DNS_RESOLV_CONF"))
        return cls(
            enabled=enabled,
            config=config,
            hosts=hosts,
            dead_after=number("POLITENESS_DEAD_AFTER", raw("POLITENESS_DEAD_AFTER"),
                               minimum=1, integer=True),
            max_crawl_delay=number("POLITENESS_MAX_CRAWL_DELAY",
                                    settings.get("POLITENESS_MAX_CRAWL_DELAY",
                                                 DEFAULTS["POLITENESS_MAX_CRAWL_DELAY"]),
                                    allow_none=True),
            crawl_delay_over_max=over_max,
            max_retry_after=number("POLITENESS_MAX_RETRY_AFTER",
                                    raw("POLITENESS_MAX_RETRY_AFTER")),
            grouping=grouping,
            ip_exempt=tuple(exempt),
            send_margin=number("POLITENESS_SEND_MARGIN", raw("POLITENESS_SEND_MARGIN")),
            idle_ttl=number("POLITENESS_IDLE_TTL", raw("POLITENESS_IDLE_TTL"), minimum=1),
            dns_nameservers=nameservers,
            dns_timeout=number("POLITENESS_DNS_TIMEOUT", raw("POLITENESS_DNS_TIMEOUT"),
                                minimum=0.001),
            dns_min_ttl=min_ttl,
            dns_max_ttl=max_ttl,
            dns_negative_ttl=number("POLITENESS_DNS_NEGATIVE_TTL",
                                     raw("POLITENESS_DNS_NEGATIVE_TTL")),
            dns_pin=boolean("POLITENESS_DNS_PIN", raw("POLITENESS_DNS_PIN")),
            dns_hosts_file=hosts_file,
            dns_resolv_conf=resolv_conf,
            proxy_local_dns=boolean("POLITENESS_PROXY_LOCAL_DNS",
                                    raw("POLITENESS_PROXY_LOCAL_DNS")),
            report_hosts=number("POLITENESS_REPORT_HOSTS", raw("POLITENESS_REPORT_HOSTS"),
                                 integer=True),
            backend=backend_url(raw("POLITENESS_BACKEND")),
            namespace=optional_str("POLITENESS_NAMESPACE", settings.get("POLITENESS_NAMESPACE")),
            backend_on_loss=choice("POLITENESS_BACKEND_ON_LOSS",
                                    raw("POLITENESS_BACKEND_ON_LOSS"), _ON_LOSS),
            log_interval=number("POLITENESS_LOG_INTERVAL", raw("POLITENESS_LOG_INTERVAL")),
            trace=optional_path("POLITENESS_TRACE", settings.get("POLITENESS_TRACE")),
            trace_buffer=number("POLITENESS_TRACE_BUFFER", raw("POLITENESS_TRACE_BUFFER"),
                                 minimum=1, integer=True),
            persist=boolean("POLITENESS_PERSIST", raw("POLITENESS_PERSIST")),
            report_stat=boolean("POLITENESS_REPORT_STAT", raw("POLITENESS_REPORT_STAT")),
            robots_prefetch=boolean("POLITENESS_ROBOTS_PREFETCH",
                                    raw("POLITENESS_ROBOTS_PREFETCH")),
            gc_freeze=boolean("POLITENESS_GC_FREEZE", raw("POLITENESS_GC_FREEZE")),
            ip_model=choice("POLITENESS_IP_MODEL", raw("POLITENESS_IP_MODEL"), IP_MODELS),
            on_ceiling=choice("POLITENESS_ON_CEILING", raw("POLITENESS_ON_CEILING"), _ON_CEILING),
            suspend_cooldown=number("POLITENESS_SUSPEND_COOLDOWN",
                                    settings.get("POLITENESS_SUSPEND_COOLDOWN", None),
                                    minimum=0.001, allow_none=True),
            suspend_max_cooldown=number("POLITENESS_SUSPEND_MAX_COOLDOWN",
                                        raw("POLITENESS_SUSPEND_MAX_COOLDOWN"), minimum=0.001),
            wait_for_suspended=boolean("POLITENESS_WAIT_FOR_SUSPENDED",
                                       raw("POLITENESS_WAIT_FOR_SUSPENDED")),
            dns_concurrency=number("POLITENESS_DNS_CONCURRENCY",
                                   raw("POLITENESS_DNS_CONCURRENCY"), minimum=1, integer=True),
            cdn_edges=boolean("POLITENESS_CDN_EDGES", raw("POLITENESS_CDN_EDGES")),
            edge_floor=number("POLITENESS_EDGE_FLOOR", raw("POLITENESS_EDGE_FLOOR")),
        )

    def config_for(self, key: str) -> Config:
        return self.hosts.get(key, self.config)


