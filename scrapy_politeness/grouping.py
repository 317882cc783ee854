"""Host name -> bucket key, per ``POLITENESS_HOST_GROUPING``."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from .policy import host_key

__all__ = ["make_key_function"]


def make_key_function(grouping: str) -> Callable[[str], str]:
    """``"host"``: the normalised host name; ``"domain"``: its registrable domain."""
    if grouping == "host":
        return lru_cache(maxsize=65536)(host_key)
    from tldextract import TLDExtract

    # The bundled public suffix list snapshot: no network fetch at start.
    extract = TLDExtract(suffix_list_urls=(), cache_dir=None)

    @lru_cache(maxsize=65536)
    def domain_key(hostname: str) -> str:
        key = host_key(hostname)
        result = extract(key)
        return result.top_domain_under_public_suffix or key

    return domain_key
