"""``python -m scrapy_politeness farm``: the demo site farm for trying the plugin.

Starts the bundled farm (HTTP virtual hosts on 127.0.0.2-4 and a DNS server on
127.0.0.1, loopback only) and prints what a Scrapy project needs to crawl it:
the settings, the start URLs and, with ``--spider``, a spider file. The farm
runs until Ctrl-C. Its hosts only exist in the farm's DNS, which is why the
printed ``POLITENESS_DNS_NAMESERVERS`` line is needed.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "demo_settings", "farm_addresses", "hosts_file", "instructions",
           "restart_command", "run", "spider_source", "start_urls"]

_SPIDER = '''"""The scrapy-politeness demo farm (from `python -m scrapy_politeness farm`)."""

import socket

import scrapy

from scrapy_politeness.startup import refuse_to_start

# Where the farm listened when this file was written, and how to start it there again.
FARM_ADDRESSES = {addresses!r}
FARM_COMMAND = {command!r}


class FarmSpider(scrapy.Spider):
    name = "farm"
    start_urls = {urls!r}
    # The farm's names exist only in its DNS server; the other values make the
    # always-503 host reach the ceiling (and be declared dead) within seconds.
    custom_settings = {settings!r}

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        # A farm that stopped or restarted on other ports would turn every URL into a
        # DNS or connection error: say so in one line instead, and exit with status 1.
        for address in FARM_ADDRESSES:
            host, port = address.rsplit(":", 1)
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
            except OSError:
                refuse_to_start(f"The demo farm does not answer at {{address}}: is the farm "
                                f"running? Start it with: {{FARM_COMMAND}}")
        return super().from_crawler(crawler, *args, **kwargs)

    def parse(self, response):
        yield {{"url": response.url, "status": response.status,
               "waited": response.meta.get("politeness", {{}}).get("waited")}}
        if isinstance(response, scrapy.http.TextResponse):
            yield from response.follow_all(css="a")
'''


def add_parser(sub: Any) -> None:
    farm = sub.add_parser(
        "farm", help="start the demo site farm on loopback and print how to crawl it",
        description="Start the demo site farm: 8 HTTP virtual hosts on 127.0.0.2-4 and a DNS "
                    "server on 127.0.0.1 (loopback only), then print the settings and start "
                    "URLs to crawl it. Runs until Ctrl-C.")
    farm.add_argument("--port", type=int, default=0,
                      help="HTTP port of every virtual host (default: any free port)")
    farm.add_argument("--dns-port", type=int, default=0,
                      help="port of the farm's DNS server on 127.0.0.1 (default: any free "
                           "port); with --port, a spider written once stays valid when the "
                           "farm restarts")
    farm.add_argument("--spider", metavar="FILE", default=None,
                      help="also write a spider crawling the farm to FILE, e.g. "
                           "myproject/spiders/farm.py")
    farm.add_argument("--hosts-file", metavar="FILE", default=None,
                      help="also write the farm's names in /etc/hosts form to FILE, for a "
                           "proxy to resolve them (docs/usage/proxies.md)")


def start_urls(farm: Any) -> list[str]:
    """Every host's front page; the always-503 host's pages too (no links lead there)."""
    urls = [farm.url(host) for host in farm.spec["hosts"]]
    for host, spec in farm.spec["hosts"].items():
        if spec.get("kind") == "always_503":
            urls += [farm.url(host, f"/p/{i}") for i in range(int(spec.get("pages", 0)))]
    return urls


def demo_settings(farm: Any) -> dict[str, Any]:
    """The settings a crawl of the farm needs (DNS) and those that keep it short."""
    return {"POLITENESS_DNS_NAMESERVERS": [farm.dns], **_SHORT}


# Seconds: start at 0.5 s per host, back off up to 4 s, a host 2 fetches at 4 s is dead.
_SHORT = {"POLITENESS_DEFAULT": 0.5, "POLITENESS_FLOOR": 0.3, "POLITENESS_CEILING": 4.0,
          "POLITENESS_DEAD_AFTER": 2}


def spider_source(urls: list[str], settings: dict[str, Any],
                  addresses: list[str] | None = None, command: str = "") -> str:
    """A spider over ``urls``; its start checks that the farm answers at ``addresses``."""
    return _SPIDER.format(urls=urls, settings=settings, addresses=addresses or [],
                          command=command or "python -m scrapy_politeness farm")


def hosts_file(farm: Any) -> str:
    """The farm's names as /etc/hosts lines: what a proxy needs to reach them."""
    return "".join(f"{h['ip']} {name}\n" for name, h in farm.spec["hosts"].items())


def farm_addresses(farm: Any) -> list[str]:
    """The farm's DNS server and one HTTP listener: both answer while this farm runs."""
    return [farm.dns, f"{farm.spec['ips'][0]}:{farm.port}"]


def restart_command(farm: Any, spider_path: str | None) -> str:
    """The farm command that listens on the same ports again (and rewrites the spider)."""
    dns_port = farm.dns.rsplit(":", 1)[1]
    command = f"python -m scrapy_politeness farm --port {farm.port} --dns-port {dns_port}"
    return f"{command} --spider {spider_path}" if spider_path else command


def instructions(farm: Any, spider_path: str | None) -> str:
    """The text printed once the farm is up: settings, URLs, the crawl command."""
    spec = farm.spec
    lines = [
        f"Demo site farm running: {len(spec['hosts'])} hosts on {', '.join(spec['ips'])}, "
        f"HTTP port {farm.port}, DNS {farm.dns}. Ctrl-C stops it.",
        "",
        "Hosts:",
        *(f"  {name:<20} {h['ip']}  {_what(h)}" for name, h in spec["hosts"].items()),
        "",
        "Settings: the add-on in your project's settings.py,",
        '  ADDONS = {"scrapy_politeness.Addon": 300}',
        "and, for this farm (its names exist only in its DNS; short intervals for a short demo),",
        *(f"  {k} = {v!r}" for k, v in demo_settings(farm).items()),
        "",
        "Start URLs:",
        *(f"  {u}" for u in start_urls(farm)),
        "",
    ]
    if spider_path:
        lines += [f"Spider written to {spider_path}: name 'farm', these URLs, the farm settings "
                  "above. Crawl with (about 15 s):", "  scrapy crawl farm",
                  "The spider is valid while this farm runs; to start the farm on the same "
                  "ports again:", f"  {restart_command(farm, spider_path)}"]
    else:
        dash_s = " ".join(f"-s {k}={_cmdline(v)}" for k, v in demo_settings(farm).items())
        lines += ["Crawl with a spider that starts from these URLs (rerun with --spider "
                  "myproject/spiders/farm.py to get one), for example:",
                  f"  scrapy crawl SPIDER {dash_s}"]
    lines += ["", f"What the sites saw (every request, first-byte time t): "
                  f"curl -s http://{farm.control}/arrivals"]
    return "\n".join(lines)


def _cmdline(value: Any) -> str:
    return ",".join(value) if isinstance(value, list) else str(value)


def _what(host: dict[str, Any]) -> str:
    kind = host.get("kind", "normal")
    if kind == "rate_limited":
        return f"answers 429 + Retry-After unless requests are {host['rate_interval']:g} s apart"
    if kind == "slow":
        return f"answers after {host['latency']:g} s"
    if kind == "always_503":
        return "always 503 (will be declared dead)"
    if host.get("crawl_delay"):
        return f"robots.txt Crawl-delay {host['crawl_delay']:g}"
    return "normal"


def run(args: argparse.Namespace) -> int:
    from scrapy_politeness._sitefarm import Farm, FarmError, demo_spec

    spec = demo_spec()
    spec["port"] = args.port
    spec["dns_port"] = args.dns_port
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        farm = Farm(spec).start()
    except FarmError as exc:
        print(f"the farm did not start: {exc}", file=sys.stderr)
        return 1
    try:
        # Ctrl-C is the way to stop, also while the instructions are still being printed.
        with contextlib.suppress(KeyboardInterrupt):
            if args.spider:
                path = Path(args.spider)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(spider_source(start_urls(farm), demo_settings(farm),
                                              farm_addresses(farm),
                                              restart_command(farm, args.spider)),
                                encoding="utf-8")
            if args.hosts_file:
                Path(args.hosts_file).write_text(hosts_file(farm), encoding="utf-8")
            print(instructions(farm, args.spider), flush=True)
            stop.wait()
    finally:
        farm.stop()
    return 0
