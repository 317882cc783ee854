"""nginx's ``limit_req`` against three crawlers, side by side in one run.

``python -m bench.nginx_limits [--only NAME ...] [--configs plugin,...] [--out FILE]``

Each scenario runs Debian's nginx unprivileged on 127.0.0.x
(:mod:`scrapy_politeness._sitefarm.nginx`), vhosts sharing addresses, zones per
server name and per server address, burst 0. Each configuration crawls every
page of every vhost in its own process (:func:`bench.run.run_crawl`):

- ``plugin``: the add-on with its defaults, knowing nothing of the limits;
- ``plugin-coupled``: the same with ``POLITENESS_IP_MODEL = "coupled"``;
- ``autothrottle``: Scrapy's AutoThrottle from a 1 s start, no minimum delay;
- ``delay``: stock Scrapy with a download slot per vhost at its true limit
  (``DOWNLOAD_DELAY`` per slot, no jitter; an unlimited vhost at its
  address's limit, or none).

Judged from nginx's access log only: wall (first to last request) over T*
(what the limits allow), rejections, pages answered 200, and requests inside a
Retry-After window their vhost was given.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy_politeness._sitefarm.nginx import NginxFarm, NginxSpec, Verdict, Vhost, judge

from .runner import ADDON, STATIC_RESOLVER, run_crawl

__all__ = ["CONFIGS", "SCENARIOS", "Bound", "main", "run"]

A, B, C = "127.0.6.1", "127.0.6.2", "127.0.6.3"


@dataclass(frozen=True)
class Bound:
    """The issue's bounds on the plugin: wall/T*, rejected share, Retry-After violations."""

    ratio: float
    rejected: float = 0.05
    max_rejections: int | None = None


SCENARIOS: dict[str, tuple[NginxSpec, Bound]] = {
    # 4 vhosts on 2 IPs, 2 r/s each by server name, refused with nginx's default 503.
    "4x2-503": (NginxSpec(tuple(Vhost(f"v{i}.test", (A, B)[i // 2], 2.0) for i in range(4)),
                          pages=40), Bound(1.15)),
    # The same, refused with 429 + Retry-After: 1.
    "4x2-429": (NginxSpec(tuple(Vhost(f"v{i}.test", (A, B)[i // 2], 2.0, 429, 1)
                                for i in range(4)), pages=40), Bound(1.15)),
    # One IP: a fast vhost (503), a slow one answering 429 + Retry-After: 2, an
    # unlimited one, and a zone on the address itself.
    "mixed-ip": (NginxSpec((Vhost("fast.test", C, 4.0), Vhost("slow.test", C, 1.0, 429, 2),
                            Vhost("free.test", C)), ip_rates={C: 5.0}, pages=40),
                 Bound(1.20)),
    # A fast vhost answering its refusals with a long Retry-After, about 100 pages.
    "ra5": (NginxSpec((Vhost("ra5.test", A, 2.0, 429, 5),), pages=100),
            Bound(1.30, rejected=1.0, max_rejections=2)),
}
CONFIGS = ("plugin", "plugin-coupled", "autothrottle", "delay")


def settings_for(config: str, spec: NginxSpec, farm: NginxFarm) -> dict[str, Any]:
    # Every configuration connects through the same fixed name map (no DNS server).
    settings: dict[str, Any] = {"TWISTED_DNS_RESOLVER": STATIC_RESOLVER,
                                "CONCURRENT_REQUESTS": 16}
    if config.startswith("plugin"):
        settings.update(ADDONS=ADDON, POLITENESS_DNS_HOSTS_FILE=str(farm.hosts_file),
                        POLITENESS_ROBOTS_PREFETCH=False)
        if config == "plugin-coupled":
            settings["POLITENESS_IP_MODEL"] = "coupled"
        return settings
    if config == "autothrottle":
        settings.update(AUTOTHROTTLE_ENABLED=True, AUTOTHROTTLE_START_DELAY=1.0,
                        DOWNLOAD_DELAY=0.0)
        return settings
    if config == "delay":
        slots = {}
        for v in spec.vhosts:
            rate = v.rate or spec.ip_rates.get(v.ip)
            slots[v.name] = {"delay": 1.0 / rate if rate else 0.0, "concurrency": 1}
        settings.update(DOWNLOAD_SLOTS=slots, DOWNLOAD_DELAY_JITTER=0)
        return settings
    raise ValueError(config)


def run(name: str, configs: tuple[str, ...] = CONFIGS) -> list[tuple[str, Verdict | str]]:
    spec, _ = SCENARIOS[name]
    rows: list[tuple[str, Verdict | str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-nginx-") as tmp, \
            NginxFarm(spec, Path(tmp)) as farm:
        for config in configs:
            farm.reset_log()
            crawl = run_crawl(farm.urls(), settings_for(config, spec, farm),
                              static_hosts=farm.static_hosts(), timeout=600.0)
            if not crawl.ok:
                rows.append((config, crawl.error[-300:]))
                continue
            rows.append((config, judge(spec, farm.log())))
            print(f"  {name} {config}: {_cells(rows[-1][1])}", file=sys.stderr, flush=True)
    return rows


def _cells(v: Verdict | str) -> str:
    if isinstance(v, str):
        return f"crawl failed: {v}"
    return (f"wall {v.wall:.1f} s, T* {v.bound:.1f} s, wall/T* {v.ratio:.2f}, "
            f"{v.rejections}/{v.requests} rejected ({100 * v.rejected_share:.1f} %), "
            f"pages {v.pages}/{v.expected}, Retry-After violations {v.ra_violations}")


def within(v: Verdict, bound: Bound) -> bool:
    """Whether the plugin's verdict meets the scenario's bounds."""
    return (v.ratio <= bound.ratio and v.rejected_share <= bound.rejected
            and (bound.max_rejections is None or v.rejections <= bound.max_rejections)
            and v.pages == v.expected and v.ra_violations == 0)


def table(results: dict[str, list[tuple[str, Verdict | str]]]) -> list[str]:
    lines = ["| scenario | crawler | wall/T* | wall (s) | T* (s) | rejected | pages | "
             "Retry-After violations | within the bounds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, rows in results.items():
        bound = SCENARIOS[name][1]
        for config, v in rows:
            if isinstance(v, str):
                lines.append(f"| {name} | {config} | crawl failed | | | | | | |")
                continue
            ok = "yes" if within(v, bound) else "no"
            lines.append(f"| {name} | {config} | {v.ratio:.2f} | {v.wall:.1f} | {v.bound:.1f} | "
                         f"{v.rejections}/{v.requests} | {v.pages}/{v.expected} | "
                         f"{v.ra_violations} | {ok} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nginx_limits")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    configs = tuple(c for c in args.configs.split(",") if c)
    results = {name: run(name, configs) for name in (args.only or SCENARIOS)}
    lines = table(results)
    print("\n".join(lines))
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
