"""Telling CDN edges (policy.cdn_edges) and spacing them per site: each signal,
the two-site rule, the bounds, the explicit override and the off switch."""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import pytest
from scrapy.http.headers import Headers
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from scrapy_politeness.downloader.cdn_edges import EdgeWatch
from scrapy_politeness.downloader.host_keys import HostKeys
from scrapy_politeness.policy.cdn_edges import (
    CNAME_SUFFIXES,
    SITES_NEEDED,
    CdnEdges,
    cdn_of_headers,
    cdn_of_name,
)
from scrapy_politeness.policy.ips import IPTable
from scrapy_politeness.settings import PolitenessSettings

IP = "127.0.9.1"
CLOUDFLARE = {"server": "cloudflare", "cf-ray": "8c1d2e3f4a5b6c7d-AMS"}


def header_of(headers: dict[str, str]) -> Any:
    return headers.get


@pytest.mark.parametrize(("name", "cdn"), [
    ("www.example.com.cdn.cloudflare.net.", "Cloudflare"),
    ("dualstack.n.sni.global.fastly.net", "Fastly"),
    ("n.sni.fastlylb.net", "Fastly"),
    ("d111111abcdef8.cloudfront.net", "CloudFront"),
    ("www.example.com.edgekey.net", "Akamai"),
    ("e1234.a.akamaiedge.net", "Akamai"),
    ("a1.g.akamai.net", "Akamai"),
    ("www.example.com.edgesuite.net", "Akamai"),
    ("EXAMPLE-abc.z01.AzureFD.net", "Azure Front Door"),
    ("cloudfront.net", "CloudFront"),
    ("notcloudfront.net", None),
    ("cloudflare.net", None),  # only the CDN's CNAME zone, not the company's every name
    ("cloudfront.net.example.com", None),
    ("example.com", None),
    ("", None),
])
def test_the_cname_chain_end_names_its_cdn(name: str, cdn: str | None) -> None:
    assert cdn_of_name(name) == cdn


def test_every_suffix_is_documented_in_the_table() -> None:
    """Each CDN's CNAME suffixes follow a comment with the URL that documents them."""
    import inspect

    import scrapy_politeness.policy.cdn_edges as module
    source = inspect.getsource(module)
    table = source[source.index("CNAME_SUFFIXES: dict"):source.index('"""CNAME target')]
    documented: str | None = None  # the CDN the last URL comment is for
    url = False
    seen = set()
    for raw in table.splitlines()[1:]:
        line = raw.strip()
        if line.startswith("# https://"):
            url, documented = True, None
        elif line.startswith('"'):
            suffix, cdn = (part.strip(' ",') for part in line.split(":"))
            assert url, suffix
            assert documented in (None, cdn), suffix
            documented = cdn
            seen.add(suffix)
    assert seen == set(CNAME_SUFFIXES)


@pytest.mark.parametrize(("headers", "cdn"), [
    (CLOUDFLARE, "Cloudflare"),
    ({"server": "Cloudflare ", "cf-ray": "x"}, "Cloudflare"),
    ({"cf-ray": "8c1d2e3f4a5b6c7d-AMS"}, None),  # CF-RAY alone: any origin can send it
    ({"server": "cloudflare"}, None),
    ({"server": "nginx", "cf-ray": "x"}, None),
    ({"x-amz-cf-id": "Xk9aV2n4Zw=="}, "CloudFront"),
    ({"x-served-by": "cache-ams21080-AMS"}, "Fastly"),
    ({"x-served-by": "cache-fra19142-FRA, cache-ams21080-AMS"}, "Fastly"),
    ({"x-served-by": "web-01"}, None),  # an origin's own X-Served-By
    ({"akamai-grn": "0.05313217.1567801841.1457a3"}, "Akamai"),
    ({"server": "nginx", "x-cache": "HIT"}, None),
    ({}, None),
])
def test_each_cdns_edge_headers(headers: dict[str, str], cdn: str | None) -> None:
    assert cdn_of_headers(header_of(headers)) == cdn


def test_one_cname_into_a_cdn_makes_an_edge_at_once() -> None:
    edges = CdnEdges()
    edge = edges.cname(IP, "shop.example.cdn.cloudflare.net.", "shop.example")
    assert edge is not None
    assert edge.cdn == "Cloudflare"
    assert edge.evidence == "CNAME (shop.example is a CNAME to shop.example.cdn.cloudflare.net)"
    assert IP in edges.edges
    assert edges.cname(IP, "other.cdn.cloudflare.net", "other.example") is None  # said once


def test_a_cname_elsewhere_is_no_evidence() -> None:
    edges = CdnEdges()
    assert edges.cname(IP, "lb.hosting.example.net.", "shop.example") is None
    assert IP not in edges.edges


def test_edge_headers_need_two_different_sites() -> None:
    """One site cannot talk the crawler into unspacing its neighbours."""
    assert SITES_NEEDED == 2
    edges = CdnEdges()
    for _ in range(5):
        assert edges.headers(IP, "liar.example", header_of(CLOUDFLARE)) is None
    assert IP not in edges.edges
    assert edges.headers(IP, "plain.example", header_of({})) is None
    edge = edges.headers(IP, "second.example", header_of(CLOUDFLARE))
    assert edge is not None
    assert edge.cdn == "Cloudflare"
    assert edge.evidence == "CF-RAY from 2 sites"
    assert IP in edges.edges
    assert edges.headers(IP, "third.example", header_of(CLOUDFLARE)) is None  # said once


def test_two_sites_with_two_cdns_headers_are_no_edge() -> None:
    """Headers of different CDNs on one address do not add up."""
    edges = CdnEdges()
    edges.headers(IP, "a.example", header_of(CLOUDFLARE))
    assert edges.headers(IP, "b.example", header_of({"x-amz-cf-id": "x"})) is None
    assert IP not in edges.edges
    assert edges.headers(IP, "c.example", header_of({"x-amz-cf-id": "y"})) is not None
    assert edges.edges[IP].cdn == "CloudFront"


def test_evidence_on_one_address_says_nothing_of_another() -> None:
    edges = CdnEdges()
    edges.headers("127.0.9.1", "a.example", header_of(CLOUDFLARE))
    assert edges.headers("127.0.9.2", "b.example", header_of(CLOUDFLARE)) is None
    assert not edges.edges


def test_memory_is_bounded_least_recently_seen_forgotten() -> None:
    edges = CdnEdges(max_edges=3, max_pending=2)
    for i in range(5):
        edges.headers(f"10.0.0.{i}", "a.example", header_of(CLOUDFLARE))
    assert len(edges._pending) == 2
    assert edges.headers("10.0.0.0", "b.example", header_of(CLOUDFLARE)) is None  # forgotten
    assert edges.headers("10.0.0.4", "b.example", header_of(CLOUDFLARE)) is not None
    for i in range(5):
        edges.cname(f"10.0.1.{i}", "x.cloudfront.net")
    assert list(edges.edges) == ["10.0.1.2", "10.0.1.3", "10.0.1.4"]


def test_an_edge_is_spaced_by_the_edge_floor_only_and_never_widened() -> None:
    edges = CdnEdges()
    ips = IPTable(0.25, "decoupled", edges=edges, edge_floor=0.05)
    edges.cname(IP, "x.cloudfront.net")
    assert ips.spacing(IP, 2.0) == 0.05
    assert ips.spacing("127.0.9.2", 2.0) == 0.25
    coupled = IPTable(0.25, "coupled", edges=edges)
    assert coupled.spacing(IP, 2.0) == 0.0
    assert coupled.spacing("127.0.9.2", 2.0) == 2.0
    # 503s from several of its sites are those sites' answers, not one machine's
    for host in ("a.example", "b.example", "c.example", "a.example", "b.example"):
        assert not ips.feedback(IP, host, 503, 0.0, explained=False)
    assert ips.spacing(IP, 0.25) == 0.05
    # the same on an address that is no edge widens it
    widened = [ips.feedback("127.0.9.2", host, 503, 0.0, explained=False)
               for host in ("a.example", "b.example")]
    assert widened == [False, True]


def test_an_edge_has_no_ip_bucket_without_an_edge_floor() -> None:
    edges = CdnEdges()
    keys = HostKeys("host", (), edges)
    assert keys.ip_bucket(IP) == IP
    edges.cname(IP, "x.cloudfront.net")
    assert keys.ip_bucket(IP) is None
    assert keys.ip_bucket("127.0.9.2") == "127.0.9.2"


def test_the_exempt_networks_stay_the_explicit_override() -> None:
    """POLITENESS_IP_EXEMPT unspaces its networks with recognition on or off."""
    net = (ipaddress.ip_network("127.0.9.0/24"),)
    for edges in (CdnEdges(), None):
        keys = HostKeys("host", net, edges)
        assert keys.ip_bucket(IP) is None
        assert keys.ip_bucket("127.0.8.1") == "127.0.8.1"


def test_the_settings_and_their_checks() -> None:
    default = PolitenessSettings.from_settings({})
    assert default.cdn_edges is True
    assert default.edge_floor == 0.0
    off = PolitenessSettings.from_settings({"POLITENESS_CDN_EDGES": False,
                                            "POLITENESS_EDGE_FLOOR": "0.1"})
    assert (off.cdn_edges, off.edge_floor) == (False, 0.1)
    with pytest.raises(ValueError, match=r"POLITENESS_EDGE_FLOOR must be >= 0, got -1"):
        PolitenessSettings.from_settings({"POLITENESS_EDGE_FLOOR": -1})
    with pytest.raises(ValueError, match=r"POLITENESS_CDN_EDGES.*'maybe'"):
        PolitenessSettings.from_settings({"POLITENESS_CDN_EDGES": "maybe"})


def _middleware(**settings: Any) -> Any:
    from scrapy_politeness.middleware import PolitenessMiddleware

    crawler = get_crawler(settings_dict={"POLITENESS_DNS_HOSTS_FILE": "",
                                         "POLITENESS_BACKEND": "memory", **settings})
    crawler.stats = MemoryStatsCollector(crawler)
    return PolitenessMiddleware.from_crawler(crawler)


def test_the_off_switch_keeps_the_seeds_rule() -> None:
    """POLITENESS_CDN_EDGES = False: no evidence is gathered, every address keeps its bucket."""
    mw = _middleware(POLITENESS_CDN_EDGES=False)
    assert mw.edges is None
    assert mw.dns.on_cname is None
    assert mw.tickets.edges is None
    assert mw.ips.edges is None
    assert mw.keys.ip_bucket(IP) == IP


def test_the_middleware_says_once_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    mw = _middleware()
    watch: EdgeWatch = mw.edges
    assert mw.dns.on_cname == watch.cname
    cf = Headers({"Server": "cloudflare", "CF-RAY": "8c1d2e3f4a5b6c7d-AMS"})
    with caplog.at_level(logging.INFO, logger="scrapy_politeness.middleware"):
        watch.response(IP, "a.example", cf)
        watch.response(IP, "b.example", cf)
        watch.response(IP, "c.example", cf)
        watch.cname("shop.example", "shop.example.edgekey.net.", ("127.0.9.7",))
        watch.report()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:2] == [
        "127.0.9.1 is a Cloudflare edge (CF-RAY from 2 sites): spaced per site",
        "127.0.9.7 is an Akamai edge (CNAME (shop.example is a CNAME to "
        "shop.example.edgekey.net)): spaced per site"]
    assert lines[2].startswith("Politeness report: 2 addresses recognised as CDN edges")
    assert mw.stats.get_value("politeness/ip/cdn_edges") == 2
    assert mw.keys.ip_bucket(IP) is None
    floored = _middleware(POLITENESS_EDGE_FLOOR=0.1)
    floored.edges.cname("shop.example", "x.cloudfront.net", (IP,))
    assert floored.keys.ip_bucket(IP) == IP  # kept, spaced by the edge floor
    assert floored.ips.spacing(IP, 1.0) == 0.1


def test_edges_are_kept_in_the_jobdir_across_a_pause(tmp_path: Any) -> None:
    """Saved with the learnt state; a resumed crawl has them before its first request."""
    from scrapy.settings import Settings

    from scrapy_politeness.jobdir.learnt_state import JobState
    from scrapy_politeness.policy import Config, HostTable

    settings = PolitenessSettings.from_settings({})
    crawler = get_crawler()
    stats = MemoryStatsCollector(crawler)
    saved = CdnEdges()
    saved.cname(IP, "shop.example.edgekey.net.", "shop.example")
    JobState(settings, Settings({"JOBDIR": str(tmp_path)}), shared=False).save(
        HostTable(Config()), IPTable(0.25, "decoupled", edges=saved), 10.0, stats)
    edges = CdnEdges()
    ips = IPTable(0.25, "decoupled", edges=edges)
    JobState(settings, Settings({"JOBDIR": str(tmp_path)}), shared=False).restore(
        HostTable(Config()), ips, 0.0, stats, None)
    assert edges.edges[IP].cdn == "Akamai"
    assert edges.edges[IP].evidence == saved.edges[IP].evidence
    assert ips.spacing(IP, 1.0) == 0.0
    assert stats.get_value("politeness/ip/cdn_edges") == 1
    off = IPTable(0.25, "decoupled")  # POLITENESS_CDN_EDGES = False: nothing taken back
    JobState(settings, Settings({"JOBDIR": str(tmp_path)}), shared=False).restore(
        HostTable(Config()), off, 0.0, stats, None)
    assert off.spacing(IP, 1.0) == 0.25
