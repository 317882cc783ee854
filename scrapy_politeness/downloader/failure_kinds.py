"""Scrapy and Twisted exception types mapped to :class:`FailureKind`.

The lists follow Scrapy's ``RETRY_EXCEPTIONS`` (import paths, loaded once);
the first list an exception matches decides, in this order. What matches no
list was raised on our side (another middleware, a handler bug) and reached
no server, so it never backs a host off.
"""

from __future__ import annotations

import errno
import logging
from functools import cache
from typing import Any

from scrapy.utils.misc import load_object
from twisted.internet.error import DNSLookupError

from scrapy_politeness.policy import FailureKind

__all__ = ["EXCEPTION_KINDS", "NameNotResolvedError", "classify_exception",
           "log_dns_errors_on_one_line", "not_connected"]

try:  # Scrapy 2.19 wraps Twisted's DNS error into its own type
    from scrapy.exceptions import CannotResolveHostError as _ScrapyDnsError
except ImportError:  # pragma: no cover - older Scrapy raises Twisted's
    _ScrapyDnsError = DNSLookupError  # type: ignore[assignment,misc]

EXCEPTION_KINDS: tuple[tuple[FailureKind, tuple[str, ...]], ...] = (
    (FailureKind.DNS_ERROR, (
        "scrapy.exceptions.CannotResolveHostError",
        "twisted.internet.error.DNSLookupError",
        "twisted.internet.error.UnknownHostError",
    )),
    (FailureKind.UNSUPPORTED_SCHEME, (
        "scrapy.exceptions.UnsupportedURLSchemeError",
        "scrapy.exceptions.NotSupported",
        "twisted.web.error.SchemeNotSupported",
    )),
    # Raised unwrapped only while setting TLS up locally (bad context, refused
    # protocol); a handshake the server broke arrives wrapped in ResponseFailed.
    (FailureKind.TLS_LOCAL, ("OpenSSL.SSL.Error",)),
    # Cancelled on our side (closing, a timeout of another component).
    (FailureKind.LOCAL_ERROR, ("scrapy.exceptions.DownloadCancelledError",
                               "twisted.internet.defer.CancelledError")),
    (FailureKind.CONNECTION, (
        "scrapy.exceptions.DownloadConnectionRefusedError",
        "scrapy.exceptions.DownloadFailedError",
        "scrapy.exceptions.DownloadTimeoutError",
        "scrapy.exceptions.ResponseDataLossError",
        "twisted.internet.error.ConnectionDone",
        "twisted.internet.error.ConnectError",
        "twisted.internet.error.ConnectionLost",
        "twisted.internet.error.TimeoutError",
        "twisted.internet.defer.TimeoutError",
        "twisted.web._newclient.ResponseFailed",
        "twisted.web._newclient.ResponseNeverReceived",
        "scrapy.core.downloader.handlers.http11.TunnelError",
        "builtins.OSError",  # ConnectionError, TimeoutError, a bad compressed body
    )),
    (FailureKind.INVALID_URL, ("builtins.ValueError",)),
)

# The connection to the address never opened: refused (nothing listens there),
# or no route to it (an IPv6 address on an IPv4-only network, a dead host that
# the kernel or a router reports). The name's next address may well answer.
_NOT_CONNECTED = (
    "scrapy.exceptions.DownloadConnectionRefusedError",
    "twisted.internet.error.ConnectionRefusedError",
    "twisted.internet.error.NoRouteError",
    "builtins.ConnectionRefusedError",
)
_UNREACHABLE = frozenset((errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH,
                          errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT))


@cache
def _not_connected_types() -> tuple[type[BaseException], ...]:
    return _types(_NOT_CONNECTED)


def not_connected(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection to the address never opened."""
    if isinstance(exc, _not_connected_types()):
        return True
    code = getattr(exc, "osError", None)  # Twisted's ConnectError keeps the errno
    if code is None and isinstance(exc, OSError):
        code = exc.errno
    return code in _UNREACHABLE


def _types(paths: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = []
    for path in paths:
        try:
            types.append(load_object(path))
        except (ImportError, AttributeError, NameError):  # not in this version
            continue
    return tuple(types)


@cache
def _load() -> list[tuple[FailureKind, tuple[type[BaseException], ...]]]:
    return [(kind, _types(paths)) for kind, paths in EXCEPTION_KINDS]


def classify_exception(exc: BaseException) -> FailureKind:
    """The kind of a download exception (``LOCAL_ERROR`` when no list matches)."""
    for kind, types in _load():
        if isinstance(exc, types):
            return kind
    return FailureKind.LOCAL_ERROR


class NameNotResolvedError(_ScrapyDnsError, DNSLookupError):
    """A host name that did not resolve, raised before any server was reached.

    Both Scrapy's own DNS error type and Twisted's ``DNSLookupError``, so
    ``RetryMiddleware`` retries it and an errback checking either sees it.
    """

    def __init__(self, hostname: str, kind: FailureKind = FailureKind.DNS_ERROR,
                 *args: Any) -> None:
        super().__init__(f"politeness: cannot resolve {hostname} ({kind.value})", *args)
        self.hostname = hostname
        self.kind = kind

    def __reduce__(self) -> tuple[Any, ...]:
        return self.__class__, (self.hostname, self.kind)


class _OneLine(logging.Filter):
    """Drops the traceback of a :class:`NameNotResolvedError` from a log record.

    Scrapy 2.19 logs every download error with its traceback (``Error
    downloading <GET ...>`` and some 40 lines); for a name that does not
    resolve the frames say nothing: the one line and the error's message do.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, NameNotResolvedError):
            line, reason = record.getMessage(), str(exc)
            record.msg = line if reason in line else f"{line}: {reason}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


_ONE_LINE = _OneLine()
_LOGGERS = ("scrapy.core.scraper", "scrapy.downloadermiddlewares.robotstxt")


def log_dns_errors_on_one_line() -> None:
    """Where Scrapy logs a failed download (a request, its robots.txt), log
    our DNS error on one line. Idempotent: one filter object per logger."""
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(_ONE_LINE)
