"""Whose outcome a proxy's error answer is: the proxy's, or the site's behind it.

A site is backed off (and in the end given up) only for what it did. Behind
a proxy some answers come from the proxy itself:

- 407 (the proxy wants credentials) is always the proxy's;
- an answer about a name the proxy cannot resolve is the proxy's: squid marks
  its own pages with ``X-Squid-Error`` (``ERR_DNS_FAIL``), tinyproxy logs
  "Could not retrieve address info";
- a CONNECT answered 502, 503 or 504 says the proxy could not reach the site
  (a gateway error): the site's outcome, as a refused connection would be
  without the proxy. Any other refused CONNECT (403 by the proxy's rules, ...)
  is the proxy's.

tinyproxy says the same "500 Unable to connect" whether it could not resolve
the name or the site refused it. That answer is the site's only while the
same proxy has relayed another site's answer within ``REACHES_SITES_FOR``
seconds (its resolution works, so this site is the one that is down); from a
proxy that has not, it is the proxy's: a proxy that resolves nothing must not
back every site of the crawl off.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["GATEWAY_ERRORS", "PROXY_AUTH_REQUIRED", "REACHES_SITES_FOR", "ProxyEvidence",
           "Whose", "whose_answer", "whose_refused_tunnel"]

PROXY_AUTH_REQUIRED = 407
GATEWAY_ERRORS = frozenset((502, 503, 504))
REACHES_SITES_FOR = 60.0
"""Seconds a proxy's relayed answer counts as proof that it resolves and connects."""

_DNS_FAILURE_WORDS = ("could not retrieve address info", "err_dns_fail", "dns lookup fail",
                      "unable to determine ip address", "name resolution")
_CANNOT_CONNECT = "unable to connect"  # tinyproxy's page for either failure


class Whose(Enum):
    PROXY = "proxy"  # the site was not asked: nothing to learn about it
    SITE = "site"  # the site's own answer, or the proxy could not reach it
    UNSURE = "unsure"  # the proxy could not connect: the site's if the proxy reaches others


def _says_dns_failure(text: str) -> bool:
    text = text.lower()
    return any(words in text for words in _DNS_FAILURE_WORDS)


def whose_refused_tunnel(status: int | None, reason: str) -> Whose:
    """A CONNECT the proxy answered with ``status`` (None: unparsable)."""
    if status is None or status == PROXY_AUTH_REQUIRED or _says_dns_failure(reason):
        return Whose.PROXY
    if status in GATEWAY_ERRORS:
        return Whose.SITE
    if _CANNOT_CONNECT in reason.lower():
        return Whose.UNSURE
    return Whose.PROXY


def whose_answer(status: int, squid_error: str, server: str, body_start: str) -> Whose:
    """A proxied plain-HTTP answer: ``squid_error`` is its X-Squid-Error header,
    ``server`` its Server header, ``body_start`` the start of its body."""
    if status == PROXY_AUTH_REQUIRED:
        return Whose.PROXY
    if status < 500:
        return Whose.SITE
    if squid_error:
        return Whose.PROXY if _says_dns_failure(squid_error) else Whose.SITE
    if server.lower().startswith("tinyproxy"):
        if _says_dns_failure(body_start):
            return Whose.PROXY
        if _CANNOT_CONNECT in body_start.lower():
            return Whose.UNSURE
    return Whose.SITE


class ProxyEvidence:
    """When each proxy last relayed a site's answer (bounded: one entry per proxy)."""

    __slots__ = ("_relayed",)

    _MAX_PROXIES = 1024

    def __init__(self) -> None:
        self._relayed: dict[str, float] = {}

    def relayed(self, proxy: str, now: float) -> None:
        if proxy not in self._relayed and len(self._relayed) >= self._MAX_PROXIES:
            self._relayed.clear()
        self._relayed[proxy] = now

    def decide(self, whose: Whose, proxy: str, now: float) -> Whose:
        """``whose`` with UNSURE settled by what ``proxy`` relayed lately."""
        if whose is not Whose.UNSURE:
            return whose
        last = self._relayed.get(proxy)
        return Whose.SITE if last is not None and now - last <= REACHES_SITES_FOR else Whose.PROXY
