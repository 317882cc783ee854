"""The system's name configuration: /etc/hosts and resolv.conf, as libc reads them.

A name in the hosts file resolves from it with every address it is listed
with (IPv4 first, then IPv6, each in file order), as ``getaddrinfo`` returns
them; a trailing-dot name is the same name. resolv.conf gives the search list
and ``ndots`` (and the nameservers unless the crawl names its own): dnspython's
resolver reads the file, so a single-label name (``intranet``) is asked with
the search domains first, as the system's resolver asks it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import dns.asyncresolver
import dns.resolver

from scrapy_politeness.dns.query import UdpNameserver, on_plain_sockets
from scrapy_politeness.policy import ip_literal

__all__ = ["make_resolver", "read_hosts_file"]

logger = logging.getLogger(__name__)


def read_hosts_file(path: str | None) -> dict[str, tuple[str, ...]]:
    """Name -> its addresses from an /etc/hosts style file (IPv4 ones first)."""
    v4: dict[str, list[str]] = {}
    v6: dict[str, list[str]] = {}
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) < 2:
                continue
            addr = ip_literal(fields[0])
            if addr is None:
                continue
            target = v6 if ":" in addr else v4
            for name in fields[1:]:
                listed = target.setdefault(name.lower().rstrip("."), [])
                if addr not in listed:
                    listed.append(addr)
    table = {name: tuple(addrs + v6.pop(name, [])) for name, addrs in v4.items()}
    table.update((name, tuple(addrs)) for name, addrs in v6.items())
    table.setdefault("localhost", ("127.0.0.1",))
    return table


def make_resolver(nameservers: tuple[tuple[str, int], ...], timeout: float, tries: int,
                  resolv_conf: str | None) -> dns.asyncresolver.Resolver | None:
    """dnspython's resolver with ``resolv_conf``'s search list and ndots, asking
    ``nameservers`` (those of the file when empty); None when there are none
    (the caller resolves with getaddrinfo)."""
    resolver = dns.asyncresolver.Resolver(configure=False)
    found = False
    if resolv_conf:
        try:
            resolver.read_resolv_conf(resolv_conf)  # search and ndots even without nameservers
            found = True
        except dns.resolver.NoResolverConfiguration:
            pass
    if nameservers:
        resolver.nameservers = [UdpNameserver(ip, port) for ip, port in nameservers]
    elif found:
        resolver.nameservers = on_plain_sockets(resolver)
    else:
        try:  # the platform's own configuration (Windows: the registry)
            resolver = dns.asyncresolver.Resolver()
        except dns.resolver.NoResolverConfiguration:
            logger.warning("No nameserver in %s; resolving with getaddrinfo", resolv_conf)
            return None
        resolver.nameservers = on_plain_sockets(resolver)
    resolver.use_search_by_default = True
    resolver.lifetime = timeout
    resolver.timeout = timeout / tries
    resolver.cache = None  # our cache is the only one, so TTL policy is ours
    return resolver
