"""Whose outcome a proxy's error answer is (pure policy, fast tier)."""

from __future__ import annotations

from scrapy.core.downloader.handlers.http11 import TunnelError

from scrapy_politeness.downloader.proxies import tunnel_answer
from scrapy_politeness.policy.proxy_answers import (
    REACHES_SITES_FOR,
    ProxyEvidence,
    Whose,
    whose_answer,
    whose_refused_tunnel,
)

TINYPROXY_PAGE = "<html><head><title>500 Unable to connect</title></head>"


def test_a_connect_answered_with_a_gateway_error_is_the_sites() -> None:
    for status in (502, 503, 504):
        assert whose_refused_tunnel(status, "Bad Gateway") is Whose.SITE
    assert whose_refused_tunnel(407, "Proxy Authentication Required") is Whose.PROXY
    assert whose_refused_tunnel(403, "Forbidden") is Whose.PROXY
    assert whose_refused_tunnel(None, "garbage") is Whose.PROXY
    assert whose_refused_tunnel(503, "Could not retrieve address info") is Whose.PROXY
    assert whose_refused_tunnel(500, "Unable to connect") is Whose.UNSURE  # tinyproxy


def test_a_proxys_page_about_a_name_it_cannot_resolve_is_the_proxys() -> None:
    assert whose_answer(503, "ERR_DNS_FAIL 0", "squid/5.7", "") is Whose.PROXY
    assert whose_answer(503, "ERR_CONNECT_FAIL 111", "squid/5.7", "") is Whose.SITE
    assert whose_answer(500, "", "tinyproxy/1.11.1",
                        "Could not retrieve address info for a.test") is Whose.PROXY
    assert whose_answer(500, "", "tinyproxy/1.11.1", TINYPROXY_PAGE) is Whose.UNSURE
    assert whose_answer(500, "", "nginx", TINYPROXY_PAGE) is Whose.SITE  # the site's own page
    assert whose_answer(503, "", "", "") is Whose.SITE
    assert whose_answer(407, "", "", "") is Whose.PROXY
    assert whose_answer(200, "", "", "") is Whose.SITE


def test_unsure_is_the_sites_only_while_the_proxy_reaches_other_sites() -> None:
    evidence = ProxyEvidence()
    assert evidence.decide(Whose.UNSURE, "http://p:1", 10.0) is Whose.PROXY
    evidence.relayed("http://p:1", 10.0)
    assert evidence.decide(Whose.UNSURE, "http://p:1", 10.0 + REACHES_SITES_FOR) is Whose.SITE
    assert evidence.decide(Whose.UNSURE, "http://q:1", 10.0) is Whose.PROXY  # another proxy
    assert evidence.decide(Whose.UNSURE, "http://p:1", 11.0 + REACHES_SITES_FOR) is Whose.PROXY
    assert evidence.decide(Whose.SITE, "http://q:1", 0.0) is Whose.SITE


def test_the_status_of_a_refused_tunnel_is_read_from_scrapys_error() -> None:
    exc = TunnelError("Could not open CONNECT tunnel with proxy 127.0.0.9:3128 "
                      "[{'status': 502, 'reason': b'Bad Gateway'}]")  # as Scrapy 2.19 says it
    assert tunnel_answer(exc) == (502, "Bad Gateway")
    exc = TunnelError("... [{'status': 500, 'reason': 'Unable to connect'}]")
    assert tunnel_answer(exc) == (500, "Unable to connect")
    assert tunnel_answer(TunnelError("... [b'garbage']")) == (None, "... [b'garbage']")
    assert tunnel_answer(ValueError("x")) is None
