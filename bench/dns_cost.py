"""CPU per DNS lookup: ``python -m bench.dns_cost``.

One farm DNS server (its own process, on loopback) holds N names; this process
resolves every one through :class:`scrapy_politeness.dns.cache.DnsCache`, 32 lookups
in flight as in a crawl: dnspython's resolver builds every query and parses
every answer. Two ways of sending the UDP queries, alternated in rounds so a
load change hits both alike: the plugin's (``plain``: a plain socket per
query read with ``add_reader``, :mod:`scrapy_politeness.dns.query`) and
dnspython's own asyncio path (``dnspython``: a datagram transport, a protocol
and a task per read). Reports the process CPU (``time.process_time``) per
lookup, the median of the rounds, and the ratio plain / dnspython. Both
resolve every name to the same address, which is checked.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

import dns.nameserver

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness.dns.cache import DnsCache

MODES = (("plain", True), ("dnspython", False))


async def _resolve_all(cache: DnsCache, names: list[str]) -> list[str | None]:
    return list(await asyncio.gather(*(cache.resolve(name) for name in names)))


def measure(where: str, names: list[str], plain: bool) -> tuple[float, list[str | None]]:
    """CPU seconds per lookup of every name with a new cache, and the answers."""
    host, port = where.rsplit(":", 1)
    cache = DnsCache(nameservers=((host, int(port)),), hosts_file=None, timeout=5.0)
    if not plain:  # dnspython's own Do53 nameserver: its asyncio sockets
        resolver = cache._resolver  # the bench swaps the transport only
        assert resolver is not None
        resolver.nameservers = [dns.nameserver.Do53Nameserver(host, int(port))]
    gc.collect()
    start = time.process_time()
    ips = asyncio.run(_resolve_all(cache, names))
    return (time.process_time() - start) / len(names), ips


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    names = [f"n{i:05d}.farm.test" for i in range(args.names)]
    ips = [f"127.0.0.{2 + i % 30}" for i in range(args.names)]
    spec = {"ips": sorted(set(ips)),
            "hosts": {name: {"ip": ip} for name, ip in zip(names, ips, strict=True)}}
    per_lookup: dict[str, list[float]] = {mode: [] for mode, _ in MODES}
    with Farm(spec) as farm:
        for _ in range(args.rounds):
            for mode, plain in MODES:
                cost, answers = measure(farm.dns, names, plain)
                if answers != ips:
                    wrong = sum(a != b for a, b in zip(answers, ips, strict=True))
                    raise SystemExit(f"{mode}: {wrong} of {len(names)} names answered wrongly")
                per_lookup[mode].append(cost)
    med = {mode: statistics.median(costs) for mode, costs in per_lookup.items()}
    print(f"DNS CPU per lookup, {args.names} names, median of {args.rounds} rounds:")
    for mode, costs in per_lookup.items():
        runs = ", ".join(f"{c * 1e6:.0f}" for c in costs)
        print(f"  {mode:9s} {med[mode] * 1e6:6.1f} µs   (rounds: {runs})")
    print(f"  plain / dnspython: {med['plain'] / med['dnspython']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
