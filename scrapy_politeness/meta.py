"""Per-request control through ``Request.meta``, as Scrapy's own middlewares offer it.

``politeness_bucket``: the host bucket this request counts against, instead of
the one its URL's host gives (like ``download_slot`` for Scrapy's slots): for
example several host names that are one site, or one host's API and pages
kept apart. The request's own host name is still resolved for the IP bucket.

``politeness_bypass``: True lets the request through without waiting and
without feeding the outcome back (like ``dont_obey_robotstxt``): for a request
that is not a fetch from the site, such as a health check of your own server.
"""

from __future__ import annotations

from typing import Any

from scrapy_politeness.policy import host_key

__all__ = ["BUCKET", "BYPASS", "bucket_of", "bypasses"]

BUCKET = "politeness_bucket"
BYPASS = "politeness_bypass"


def bypasses(meta: dict[str, Any]) -> bool:
    return bool(meta.get(BYPASS))


def bucket_of(meta: dict[str, Any], *, strict: bool = True) -> str | None:
    """The bucket ``meta`` asks for, normalised like a host name; None if it asks none.

    A bad value raises ValueError (failing that request) when ``strict``; the
    scheduler queue, which only estimates, passes False and ignores it.
    """
    bucket = meta.get(BUCKET)
    if bucket is None:
        return None
    if not isinstance(bucket, str) or not bucket.strip():
        if not strict:
            return None
        raise ValueError(f"Request.meta[{BUCKET!r}] must be a non-empty string, got {bucket!r}")
    return host_key(bucket)
