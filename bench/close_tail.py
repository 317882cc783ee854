"""The close tail: how long a crawl stays open after its last fetch.

``python -m bench.close_tail``. A healthy host beside one that dies (always 503,
dead after its first answer at the default 60 s ceiling; or suspended there, the
default: the crawl closes when only it is left), or beside a name that
does not resolve (NXDOMAIN, 5 URLs, Scrapy's 2 retries each), with the
plugin's defaults otherwise. The tail is the crawl's ``finish_time`` minus the
farm's last first-byte time (both wall clock, one machine); the target is 1 s
plus Scrapy's own idle check.
"""

from __future__ import annotations

import datetime
from typing import Any

from scrapy_politeness._sitefarm import Farm

from .runner import ADDON, run_crawl

DOMAIN = "farm.test"


def tail(kind: str) -> tuple[float, int]:
    """(seconds from the last fetch to the close, pages fetched) for one crawl."""
    other: dict[str, Any] = ({"kind": "always_503"} if kind in ("dead", "suspended")
                             else {"dns": {"mode": "nxdomain"}})
    spec = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        f"ok.{DOMAIN}": {"ip": "127.0.0.2", "pages": 10},
        f"other.{DOMAIN}": {"ip": "127.0.0.3", "pages": 10, **other}}}
    extra: dict[str, Any] = {}
    if kind in ("dead", "suspended"):
        extra = {"POLITENESS_BACKOFF": 200.0, "POLITENESS_DEAD_AFTER": 1,
                 "POLITENESS_ON_CEILING": kind.replace("suspended", "suspend")}
    with Farm(spec) as farm:
        urls = [farm.url(f"ok.{DOMAIN}", f"/p/{n}") for n in range(10)]
        urls += [farm.url(f"other.{DOMAIN}", f"/p/{n}") for n in range(5)]
        run = run_crawl(urls, {"ADDONS": ADDON, "POLITENESS_DNS_NAMESERVERS": [farm.dns],
                               "ROBOTSTXT_OBEY": False, "CLOSESPIDER_TIMEOUT": 240, **extra})
        arrivals = farm.arrivals()
    finish = datetime.datetime.fromisoformat(str(run.result["stats"]["finish_time"]))
    last = max(a.wall for a in arrivals)
    return finish.timestamp() - last, sum(a.status == 200 for a in arrivals)


def main() -> None:
    print("| scenario | pages 200 | last fetch to close |\n| --- | ---: | ---: |")
    for kind, about in (("dead", "a host dead at the default ceiling"),
                        ("suspended", "the same host suspended (POLITENESS_ON_CEILING default)"),
                        ("nxdomain", "a name answering NXDOMAIN (5 URLs, 2 retries each)")):
        seconds, pages = tail(kind)
        print(f"| {about} | {pages} | {seconds:.2f} s |")


if __name__ == "__main__":
    main()
