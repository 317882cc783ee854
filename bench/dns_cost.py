"""CPU per DNS lookup, wire answers vs dnspython's resolver: ``python -m bench.dns_cost``.

One farm DNS server (its own process, on loopback) holds N names; this process
resolves every one through :class:`scrapy_politeness.dns.DnsCache`, 32 lookups
in flight as in a crawl, once with the common answer read from the wire (the
default) and once with dnspython's resolver for every name
(``wire_answers=False``), alternated in rounds so a load change hits both
alike. Reports the process CPU (``time.process_time``) per lookup, the median
of the rounds, and the ratio wire / resolver. Both resolve every name to the
same address, which is checked.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness.dns import DnsCache

MODES = (("wire", True), ("resolver", False))


async def _resolve_all(cache: DnsCache, names: list[str]) -> list[str | None]:
    return list(await asyncio.gather(*(cache.resolve(name) for name in names)))


def measure(dns: str, names: list[str], wire: bool) -> tuple[float, list[str | None]]:
    """CPU seconds per lookup of every name with a new cache, and the answers."""
    host, port = dns.rsplit(":", 1)
    cache = DnsCache(nameservers=((host, int(port)),), hosts_file=None,
                     wire_answers=wire, timeout=5.0)
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
            for mode, wire in MODES:
                cost, answers = measure(farm.dns, names, wire)
                if answers != ips:
                    wrong = sum(a != b for a, b in zip(answers, ips, strict=True))
                    raise SystemExit(f"{mode}: {wrong} of {len(names)} names answered wrongly")
                per_lookup[mode].append(cost)
    med = {mode: statistics.median(costs) for mode, costs in per_lookup.items()}
    print(f"DNS CPU per lookup, {args.names} names, median of {args.rounds} rounds:")
    for mode, costs in per_lookup.items():
        runs = ", ".join(f"{c * 1e6:.0f}" for c in costs)
        print(f"  {mode:9s} {med[mode] * 1e6:6.1f} µs   (rounds: {runs})")
    print(f"  wire / resolver: {med['wire'] / med['resolver']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
