"""What a failed lookup was, and how long its answer may be believed.

dnspython raises one exception per kind of failure; the crawl counts and
caches them by kind (``politeness/dns/<kind>``). A negative answer (NXDOMAIN,
NODATA) is cached as long as its zone says (RFC 2308), no longer than the
setting; the other kinds are transient.
"""

from __future__ import annotations

import dns.exception
import dns.message
import dns.rdatatype
import dns.resolver

from scrapy_politeness.policy import FailureKind

__all__ = ["DEFINITE", "dns_failure_kind", "negative_ttl_of"]

DEFINITE = frozenset((FailureKind.DNS_NXDOMAIN, FailureKind.DNS_NO_ANSWER))
"""Failures that are the zone's answer (RFC 2308's negative answers); every
other kind (a timeout, SERVFAIL, a socket error) may go away when asked again."""


def dns_failure_kind(exc: BaseException) -> FailureKind:
    """NXDOMAIN, SERVFAIL (every nameserver failed), timeout, empty answer, or other."""
    if isinstance(exc, dns.resolver.NXDOMAIN):
        return FailureKind.DNS_NXDOMAIN
    if isinstance(exc, dns.resolver.NoNameservers):
        return FailureKind.DNS_SERVFAIL
    if isinstance(exc, (dns.exception.Timeout, TimeoutError)):
        return FailureKind.DNS_TIMEOUT
    if isinstance(exc, dns.resolver.NoAnswer):
        return FailureKind.DNS_NO_ANSWER
    return FailureKind.DNS_ERROR


def negative_ttl_of(exc: BaseException) -> float | None:
    """RFC 2308: min(SOA TTL, SOA MINIMUM) from the authority section, if any."""
    responses: list[dns.message.Message] = []
    if isinstance(exc, dns.resolver.NXDOMAIN):
        responses = [r for r in exc.responses().values()  # type: ignore[no-untyped-call]
                     if r is not None]
    elif isinstance(exc, dns.resolver.NoAnswer):
        response = exc.kwargs.get("response")
        if response is not None:
            responses = [response]
    ttls = [min(float(rrset.ttl), float(rrset[0].minimum))
            for response in responses for rrset in response.authority
            if rrset.rdtype == dns.rdatatype.SOA and len(rrset)]
    return min(ttls) if ttls else None
