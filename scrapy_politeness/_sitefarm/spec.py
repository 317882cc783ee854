"""Parse and validate a farm spec (JSON dict) into frozen dataclasses.

Validating up front means a typo in a test's spec fails loudly at start-up
instead of producing a silently wrong server.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

KINDS = ("normal", "slow", "rate_limited", "always_503")
OUTAGE_MODES = ("503", "refuse")
RETRY_AFTER_FORMS = ("seconds", "date")
DNS_MODES = ("servfail", "nxdomain", "timeout", "truncate", "cname", "rotate", "v6only",
             "nodata", "drop_first", "drop", "several")


class SpecError(ValueError):
    """Raised for an invalid farm spec."""


@dataclass(frozen=True)
class DnsFault:
    """Per-host DNS misbehaviour (see the module docs of _sitefarm.dnsserver)."""

    mode: str
    target: str | None = None
    ips: tuple[str, ...] = ()
    fraction: float = 0.0  # "drop": the share of UDP queries lost


@dataclass(frozen=True)
class HostSpec:
    """One virtual host: where it lives, how it answers HTTP and DNS."""

    name: str
    ip: str
    kind: str = "normal"
    pages: int = 10
    latency: float = 0.0
    crawl_delay: float | None = None
    robots: str | None = None
    rate_interval: float = 1.0
    retry_after: float = 1
    burst: float = 1.0
    retry_after_form: str = "seconds"
    rate_change_after: int = 0  # served requests before rate_interval_after applies (0: never)
    rate_interval_after: float = 1.0
    status_script: tuple[int, ...] = ()
    retry_after_header: str | None = None
    ttl: int | None = None
    ipv6: str | None = None
    dns: DnsFault | None = None
    setup: float = 0.0  # a new connection's first request is read this long after it came
    # (after, for, mode): from ``after`` s past the farm's first request, for ``for`` s,
    # every request fails: "503" answers 503, "refuse" refuses (and resets) connections
    # to the host's IP (give the host an IP of its own).
    outage: tuple[float, float, str] | None = None
    headers: tuple[tuple[str, str], ...] = ()  # added to every answer (a CDN edge's headers)

    def down(self, t: float, first: float | None) -> str | None:
        """The outage mode at ``t`` (the farm's first request at ``first``), or None."""
        if self.outage is None or first is None:
            return None
        after, length, mode = self.outage
        return mode if first + after <= t < first + after + length else None

    def robots_txt(self) -> str:
        """The robots.txt body this host serves."""
        if self.robots is not None:
            return self.robots
        if self.crawl_delay is not None:
            return f"User-agent: *\nCrawl-delay: {self.crawl_delay:g}\nAllow: /\n"
        return "User-agent: *\nAllow: /\n"


@dataclass(frozen=True)
class FarmSpec:
    """The whole farm: listening IPs, port request, DNS default TTL, hosts."""

    ips: tuple[str, ...]
    port: int
    dns_ttl: int
    hosts: dict[str, HostSpec]
    dns_negative_ttl: int = 60  # the SOA's TTL and MINIMUM: how long NXDOMAIN may be cached
    dns_port: int = 0  # 0: any free port; a fixed one keeps a written spider valid
    dns_seed: int = 0  # "drop" mode: which queries are lost, the same in every run

    def host(self, name: str) -> HostSpec | None:
        """Look up a host by any spelling (case, trailing dot)."""
        return self.hosts.get(normalise_name(name))


def normalise_name(name: str) -> str:
    """Lower-case and drop a trailing dot so all spellings compare equal."""
    return name.strip().rstrip(".").lower()


def _loopback(ip: str, what: str) -> str:
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError as exc:
        raise SpecError(f"{what}: {ip!r} is not an IP address") from exc
    if not addr.is_loopback:
        raise SpecError(f"{what}: {ip!r} is not a loopback address")
    return str(addr)


def _number(raw: dict[str, Any], key: str, default: float, what: str) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise SpecError(f"{what}: {key} must be a non-negative number, got {value!r}")
    return float(value)


def _int(raw: dict[str, Any], key: str, default: int, what: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"{what}: {key} must be a non-negative integer, got {value!r}")
    return value


def _parse_dns(raw: Any, what: str) -> DnsFault | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise SpecError(f"{what}: dns must be an object")
    mode = raw.get("mode")
    if mode not in DNS_MODES:
        raise SpecError(f"{what}: dns mode must be one of {DNS_MODES}, got {mode!r}")
    target = raw.get("target")
    if mode == "cname":
        if not isinstance(target, str) or not target:
            raise SpecError(f"{what}: cname mode needs a 'target' hostname")
        target = normalise_name(target)
    ips: tuple[str, ...] = ()
    if mode in ("rotate", "several"):
        raw_ips = raw.get("ips")
        if not isinstance(raw_ips, list) or not raw_ips:
            raise SpecError(f"{what}: {mode} mode needs a non-empty 'ips' list")
        ips = tuple(_loopback(str(ip), what) for ip in raw_ips)
    fraction = _number(raw, "fraction", 0.5, what) if mode == "drop" else 0.0
    if fraction > 1:
        raise SpecError(f"{what}: dns fraction must be at most 1, got {fraction!r}")
    return DnsFault(mode=mode, target=target, ips=ips, fraction=fraction)


def _parse_host(name: str, raw: Any, farm_ips: tuple[str, ...]) -> HostSpec:
    what = f"host {name!r}"
    if not isinstance(raw, dict):
        raise SpecError(f"{what}: must be an object")
    ip = _loopback(str(raw.get("ip", "")), what)
    if ip not in farm_ips:
        raise SpecError(f"{what}: ip {ip} is not one of the farm ips {list(farm_ips)}")
    kind = raw.get("kind", "normal")
    if kind not in KINDS:
        raise SpecError(f"{what}: kind must be one of {KINDS}, got {kind!r}")
    script = raw.get("status_script", [])
    if not isinstance(script, list) or not all(
        isinstance(s, int) and 100 <= s <= 599 for s in script
    ):
        raise SpecError(f"{what}: status_script must be a list of HTTP statuses")
    crawl_delay = raw.get("crawl_delay")
    robots = raw.get("robots")
    if robots is not None and not isinstance(robots, str):
        raise SpecError(f"{what}: robots must be a string")
    ttl = raw.get("ttl")
    rah = raw.get("retry_after_header")
    form = raw.get("retry_after_form", "seconds")
    if form not in RETRY_AFTER_FORMS:
        raise SpecError(f"{what}: retry_after_form must be one of {RETRY_AFTER_FORMS}, "
                        f"got {form!r}")
    burst = _number(raw, "burst", 1.0, what)
    if burst < 1:
        raise SpecError(f"{what}: burst must be >= 1, got {burst!r}")
    return HostSpec(
        name=name,
        ip=ip,
        kind=kind,
        pages=_int(raw, "pages", 10, what),
        latency=_number(raw, "latency", 0.0, what),
        crawl_delay=None if crawl_delay is None else _number(raw, "crawl_delay", 0, what),
        robots=robots,
        rate_interval=_number(raw, "rate_interval", 1.0, what),
        retry_after=_number(raw, "retry_after", 1, what),
        burst=burst,
        retry_after_form=form,
        rate_change_after=_int(raw, "rate_change_after", 0, what),
        rate_interval_after=_number(raw, "rate_interval_after", 1.0, what),
        status_script=tuple(script),
        retry_after_header=None if rah is None else str(rah),
        ttl=None if ttl is None else _int(raw, "ttl", 0, what),
        ipv6=None if raw.get("ipv6") is None else str(raw["ipv6"]),
        dns=_parse_dns(raw.get("dns"), what),
        setup=_number(raw, "setup", 0.0, what),
        outage=_parse_outage(raw.get("outage"), what),
        headers=_parse_headers(raw.get("headers", {}), what),
    )


def _parse_headers(raw: Any, what: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in raw.items()):
        raise SpecError(f"{what}: headers must be an object of header names to strings, "
                        f"got {raw!r}")
    return tuple(raw.items())


def _parse_outage(raw: Any, what: str) -> tuple[float, float, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("mode", "503") not in OUTAGE_MODES:
        raise SpecError(f"{what}: outage must be {{'after': s, 'for': s, 'mode': one of "
                        f"{OUTAGE_MODES}}}, got {raw!r}")
    return (_number(raw, "after", 0.0, what), _number(raw, "for", 0.0, what),
            str(raw.get("mode", "503")))


def parse_spec(raw: dict[str, Any]) -> FarmSpec:
    """Validate a spec dict and return the typed FarmSpec."""
    if not isinstance(raw, dict):
        raise SpecError("spec must be a JSON object")
    raw_ips = raw.get("ips")
    if not isinstance(raw_ips, list) or not raw_ips:
        raise SpecError("spec: 'ips' must be a non-empty list")
    ips = tuple(dict.fromkeys(_loopback(str(ip), "spec ips") for ip in raw_ips))
    port = _int(raw, "port", 0, "spec")
    if port > 65535:
        raise SpecError(f"spec: port {port} out of range")
    dns_port = _int(raw, "dns_port", 0, "spec")
    if dns_port > 65535:
        raise SpecError(f"spec: dns_port {dns_port} out of range")
    raw_hosts = raw.get("hosts", {})
    if not isinstance(raw_hosts, dict):
        raise SpecError("spec: 'hosts' must be an object")
    hosts: dict[str, HostSpec] = {}
    for raw_name, raw_host in raw_hosts.items():
        name = normalise_name(str(raw_name))
        if name in hosts:
            raise SpecError(f"spec: duplicate host {name!r}")
        hosts[name] = _parse_host(name, raw_host, ips)
    return FarmSpec(ips=ips, port=port, dns_ttl=_int(raw, "dns_ttl", 300, "spec"), hosts=hosts,
                    dns_negative_ttl=_int(raw, "dns_negative_ttl", 60, "spec"), dns_port=dns_port,
                    dns_seed=_int(raw, "dns_seed", 0, "spec"))
