"""Crawls through a real proxy (Debian's tinyproxy), spacing judged by the farm.

Behind a proxy the crawler never connects to the target: the proxy resolves
and connects. A target that only the proxy can resolve must still be fetched
(spaced by its host), one that resolves here too keeps both buckets, and the
proxy's own failures (refused connection, 407, a refused CONNECT tunnel) never
back the target off nor declare it dead.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from crawling import farm_settings, run_crawl
from test_integration import TOL, assert_spacing
from tinyproxy import Tinyproxy

from scrapy_politeness._sitefarm import starts_by, violations

pytestmark = pytest.mark.integration

INTERVAL, IP_FLOOR = 0.4, 0.25
HOSTS = ("a.corp.test", "b.corp.test", "c.corp.test", "d.corp.test")
PAGES = 5


def _spec(*, resolvable: bool) -> dict[str, Any]:
    dns = None if resolvable else {"mode": "nxdomain"}
    hosts = {h: {"ip": "127.0.0.2" if i < 2 else "127.0.0.3", "pages": PAGES,
                 **({"dns": dns} if dns else {})} for i, h in enumerate(HOSTS)}
    return {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": hosts}


def _settings(farm: Any, **extra: Any) -> dict[str, Any]:
    return farm_settings(farm, POLITENESS_DEFAULT=INTERVAL, POLITENESS_FLOOR=INTERVAL,
                         POLITENESS_IP_FLOOR=IP_FLOOR, POLITENESS_LATENCY_RISE=100.0,
                         **extra)


def test_targets_only_the_proxy_resolves_are_all_fetched(farm_factory: Any) -> None:
    """The crawler's DNS answers NXDOMAIN for every target (the farm's DNS
    fault); tinyproxy resolves them from a hosts file of its own. The proxy
    comes from the environment (``http_proxy``), as HttpProxyMiddleware reads it."""
    spec = _spec(resolvable=False)
    farm = farm_factory(spec)
    names = {h: raw["ip"] for h, raw in spec["hosts"].items()}
    with Tinyproxy(names) as proxy:
        result = run_crawl([farm.url(h) for h in HOSTS], _settings(farm),
                           env={"http_proxy": proxy.url, "no_proxy": ""})
    arrivals = farm.arrivals()
    assert len(arrivals) == len(HOSTS) * (1 + PAGES), result.log[-3000:]
    assert {a.status for a in arrivals} == {200}
    assert len([i for i in result.items if i.get("status") == 200]) == len(arrivals)
    assert result.stat("politeness/dns/nxdomain") == 0
    assert result.stat("politeness/proxy/host_only") == len(arrivals)
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        assert_spacing(f"proxied, host only: {host}", times, INTERVAL)
    assert "Traceback" not in result.log


def test_targets_that_resolve_here_keep_both_buckets(farm_factory: Any) -> None:
    """``Request.meta["proxy"]``; the names resolve here and at the proxy."""
    spec = _spec(resolvable=True)
    farm = farm_factory(spec)
    names = {h: raw["ip"] for h, raw in spec["hosts"].items()}
    with Tinyproxy(names) as proxy:
        result = run_crawl([farm.url(h) for h in HOSTS], _settings(farm),
                           meta={"proxy": proxy.url})
    arrivals = farm.arrivals()
    assert len(arrivals) == len(HOSTS) * (1 + PAGES), result.log[-3000:]
    assert result.stat("politeness/proxy/host_only") == 0
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        assert_spacing(f"proxied host {host}", times, INTERVAL)
    for ip, times in starts_by(arrivals, lambda a: a.ip).items():  # the IP's own floor
        assert not violations(times, IP_FLOOR, TOL), f"proxied IP {ip}"


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_proxy_asking_credentials_never_backs_the_target_off(
        farm_factory: Any, scheme: str) -> None:
    """407 to a plain request, a CONNECT refused with 407 (TunnelError) to an
    https one: the proxy's failures, not the target's."""
    spec = _spec(resolvable=True)
    farm = farm_factory(spec)
    with Tinyproxy(auth=("user", "secret")) as proxy:
        urls = [farm.url(h, f"/p/{n}").replace("http:", f"{scheme}:", 1)
                for h in HOSTS for n in range(PAGES)]
        result = run_crawl(urls, _settings(farm, POLITENESS_DEAD_AFTER=2),
                           meta={"proxy": proxy.url}, follow=False)
    assert farm.arrivals() == []
    tries = len(urls) * (1 if scheme == "http" else 3)  # TunnelError is retried twice
    assert result.stat("politeness/proxy/errors") == tries
    _assert_target_untouched(result)


def test_a_proxy_refusing_the_connection_never_backs_the_target_off(
        farm_factory: Any) -> None:
    spec = _spec(resolvable=True)
    farm = farm_factory(spec)
    closed = Tinyproxy()  # its port, never listened on
    from tinyproxy import _free_port

    urls = [farm.url(h, f"/p/{n}") for h in HOSTS for n in range(PAGES)]
    proxy_url = f"http://{closed.listen}:{_free_port(closed.listen)}"
    result = run_crawl(urls, _settings(farm, POLITENESS_DEAD_AFTER=2),
                       meta={"proxy": proxy_url}, follow=False)
    closed.stop()
    assert farm.arrivals() == []
    assert result.stat("politeness/proxy/errors") == len(urls) * 3  # refusals are retried twice
    _assert_target_untouched(result)


def _assert_target_untouched(result: Any) -> None:
    stats = result.stats
    assert not [k for k in stats if k.startswith("politeness/backoff/")], stats
    assert result.stat("politeness/dead_hosts") == 0
    assert result.stat("politeness/dropped/dead") == 0
    assert result.stat("politeness/suspended") == 0


DOWN = "127.0.0.61"  # nothing listens there: the proxy's connection is refused


def test_an_https_site_down_behind_the_proxy_is_backed_off_like_a_direct_one(
        farm_factory: Any) -> None:
    """tinyproxy answers the CONNECT to a site that refuses with "500 Unable to
    connect"; while it relays the other sites' answers, that is the site's
    outcome: backed off, then suspended, as a direct refused site is."""
    spec = _spec(resolvable=True)
    farm = farm_factory(spec)
    names = {h: raw["ip"] for h, raw in spec["hosts"].items()}
    names["down.corp.test"] = DOWN
    urls = [farm.url(h, f"/p/{n}") for h in HOSTS for n in range(PAGES)]
    down = [farm.url("down.corp.test", f"/p/{n}").replace("http:", "https:", 1)
            for n in range(PAGES)]
    with Tinyproxy(names) as proxy:
        result = run_crawl(urls + down, _settings(
            farm, POLITENESS_CEILING=0.8, POLITENESS_DEAD_AFTER=2),
            meta={"proxy": proxy.url}, follow=False)
    assert len(farm.arrivals()) == len(urls), result.log[-3000:]
    assert result.stat("politeness/proxy/site_unreachable") >= 1, result.log[-6000:]
    assert result.stat("politeness/backoff/transport") >= 1
    assert result.stat("politeness/suspended") == 1
    assert re.search(r"Host down\.corp\.test suspended", result.log)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_proxy_that_cannot_resolve_the_targets_backs_no_site_off(
        farm_factory: Any, scheme: str) -> None:
    """The crawler resolves every target, the proxy none (its DNS answers
    nothing): each answer is the proxy's "Unable to connect", never the site's."""
    spec = _spec(resolvable=True)
    farm = farm_factory(spec)
    urls = [farm.url(h, f"/p/{n}").replace("http:", f"{scheme}:", 1)
            for h in HOSTS for n in range(PAGES)]
    with Tinyproxy({}) as proxy:
        result = run_crawl(urls, _settings(farm, POLITENESS_CEILING=0.8,
                                           POLITENESS_DEAD_AFTER=2),
                           meta={"proxy": proxy.url}, follow=False)
    assert farm.arrivals() == []
    assert result.stat("politeness/proxy/errors") >= len(urls)
    _assert_target_untouched(result)


def test_proxied_names_can_skip_the_local_lookup(farm_factory: Any) -> None:
    """``POLITENESS_PROXY_LOCAL_DNS = False``: the crawler's DNS (the farm's,
    which knows every target) is never asked; each site is spaced by its host."""
    spec = _spec(resolvable=True)
    farm = farm_factory(spec)
    names = {h: raw["ip"] for h, raw in spec["hosts"].items()}
    with Tinyproxy(names) as proxy:
        result = run_crawl([farm.url(h) for h in HOSTS],
                           _settings(farm, POLITENESS_PROXY_LOCAL_DNS=False),
                           env={"http_proxy": proxy.url, "no_proxy": ""})
    arrivals = farm.arrivals()
    assert len(arrivals) == len(HOSTS) * (1 + PAGES), result.log[-3000:]
    assert farm.dns_queries() == {}
    assert result.stat("politeness/dns/lookups") == 0
    assert result.stat("politeness/proxy/host_only") == len(arrivals)
    for host, times in starts_by(arrivals, lambda a: a.host).items():
        assert_spacing(f"proxied, no local lookup: {host}", times, INTERVAL)
