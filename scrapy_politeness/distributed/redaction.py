"""Credentials out of every message: backend URLs are shown with ``***``.

One place decides what a secret looks like, so the start-up check of
``POLITENESS_BACKEND``, the backend's own logs and its exception texts agree.
Redaction errs on the side of hiding: it works on the raw text (not a parsed
URL), so a value that is not a valid URL is still shown without its secret.
"""

from __future__ import annotations

from urllib.parse import unquote

__all__ = ["SCHEMES", "normalise_scheme", "redact_url", "secrets_of"]

SCHEMES = ("redis", "rediss", "unix")
MASK = "***"


def normalise_scheme(url: str) -> str:
    """``url`` with its scheme in lower case (schemes are case-insensitive, RFC 3986)."""
    scheme, sep, rest = url.partition("://")
    return scheme.lower() + sep + rest if sep else url


def _split(url: str) -> tuple[str, str, str, str]:
    """(scheme://, userinfo, the rest up to the query, ?query#fragment), on the raw text."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    else:
        scheme += sep
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority_and_path, tail = rest[:cut], rest[cut:]
    userinfo, at, after = authority_and_path.rpartition("@")
    if not at:
        return scheme, "", authority_and_path, tail
    return scheme, userinfo, after, tail


def _is_secret_key(key: str) -> bool:
    return "pass" in unquote(key).lower()


def redact_url(url: str) -> str:
    """``url`` with the userinfo password and any ``password=`` query value shown as ``***``.

    The user name stays (it names the account, and helps read the message);
    a userinfo that does not look like ``user:password`` is kept only when it
    holds no ``:``.
    """
    scheme, userinfo, rest, tail = _split(url)
    if ":" in userinfo:
        user = userinfo.partition(":")[0]
        userinfo = (user if "/" not in user else "") + ":" + MASK
    out = scheme + (userinfo + "@" if userinfo else "") + rest
    if not tail:
        return out
    query, hash_, fragment = tail[1:].partition("#") if tail[0] == "?" else ("", "", tail[1:])
    if tail[0] == "#":
        hash_ = "#"
    parts = []
    for part in query.split("&"):
        key, eq, _ = part.partition("=")
        parts.append(f"{key}={MASK}" if eq and _is_secret_key(key) else part)
    return out + ("?" + "&".join(parts) if tail[0] == "?" else "") + hash_ + fragment


def secrets_of(url: str) -> list[str]:
    """Every secret ``url`` holds, raw and percent-decoded, longest first (to scrub texts)."""
    _, userinfo, _, tail = _split(url)
    found = []
    if ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    if tail.startswith("?"):
        for part in tail[1:].partition("#")[0].split("&"):
            key, eq, value = part.partition("=")
            if eq and _is_secret_key(key):
                found.append(value)
    found += [unquote(s) for s in found] + [unquote(s.replace("+", " ")) for s in found]
    return sorted({s for s in found if s}, key=len, reverse=True)
