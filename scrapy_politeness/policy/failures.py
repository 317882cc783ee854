"""Which failures reached a server and which never did.

Only a server that struggled (429, 5xx, a refused, reset or timed-out
connection) is a reason to slow down for its host. A failure that never
reached a server (a name that does not resolve, an error raised on our side)
says nothing about the host's load: backing off for it would only stall the
crawl (a name that never resolves would climb to the ceiling and hold a
concurrency slot in the gate on every retry). The Scrapy glue maps exception
types to these kinds (:mod:`scrapy_politeness.downloader.failure_kinds`), as Scrapy's
``RETRY_EXCEPTIONS`` lists the retryable ones.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FailureKind", "backoff_cause", "next_address", "reached_server"]


class FailureKind(StrEnum):
    """A failure's kind; the value is its stat name under ``politeness/``."""

    # Reached no server: never backs a host off, never waits in the gate.
    DNS_NXDOMAIN = "dns/nxdomain"  # the name does not exist
    DNS_SERVFAIL = "dns/servfail"  # every nameserver failed (SERVFAIL, REFUSED)
    DNS_TIMEOUT = "dns/timeout"  # no answer within POLITENESS_DNS_TIMEOUT
    DNS_NO_ANSWER = "dns/no_answer"  # the name exists but has no A/AAAA record
    DNS_ERROR = "dns/error"  # any other resolution failure (malformed answer, ...)
    UNSUPPORTED_SCHEME = "local/unsupported_scheme"
    INVALID_URL = "local/invalid_url"
    TLS_LOCAL = "local/tls"  # TLS set-up refused on our side, before any byte was sent
    LOCAL_ERROR = "local/error"  # another component raised (a middleware, a handler bug)
    # Reached the server, and it struggled: backs the host off.
    CONNECTION = "transport"  # refused, reset, lost, or a timeout after connecting
    HTTP_429 = "429"
    HTTP_5XX = "5xx"


_SERVER = frozenset((FailureKind.CONNECTION, FailureKind.HTTP_429, FailureKind.HTTP_5XX))


def reached_server(kind: FailureKind) -> bool:
    """True when the failure tells us something about the server's load."""
    return kind in _SERVER


def backoff_cause(kind: FailureKind) -> str | None:
    """The ``politeness/backoff/<cause>`` name of a server struggle, else None."""
    return kind.value if kind in _SERVER else None


def next_address(addresses: tuple[str, ...], tried: tuple[str, ...]) -> str | None:
    """The address of a name's answer to connect to after ``tried`` failed to
    connect (refused, unreachable), as the system's connect loop and browsers
    do; None when every address was tried: only then does the failure count
    against the host. A refused connection is no server's struggle with load
    when another address of the same name answers."""
    for address in addresses:
        if address not in tried:
            return address
    return None
