"""Which backend a ``POLITENESS_BACKEND`` URL names.

Apart from ``base`` so that the interface does not import its implementations
(Redis imports the interface; the interface importing Redis back was a cycle).
"""

from __future__ import annotations

from scrapy_politeness.distributed.base import SharedBackend

__all__ = ["make_backend"]


def make_backend(url: str, *, namespace: str, on_loss: str, margin: float = 0.01,
                 idle_margin: float = 60.0) -> SharedBackend | None:
    """None for ``"memory"``; otherwise the shared backend the URL names.

    ``idle_margin``: how long shared state outlives the last wait it encodes
    (``POLITENESS_IDLE_TTL``, so Redis forgets a dead host when JOBDIR does).
    """
    if url == "memory":
        return None
    from scrapy_politeness.distributed.redaction import SCHEMES, normalise_scheme, redact_url

    url = normalise_scheme(url)
    if url.partition("://")[0] in SCHEMES:
        from scrapy_politeness.distributed.redis_backend import RedisBackend

        return RedisBackend(url, namespace=namespace, on_loss=on_loss, margin=margin,
                            idle_margin=idle_margin)
    raise ValueError(f"POLITENESS_BACKEND must be 'memory' or a redis:// URL, "
                     f"got '{redact_url(url)}'")
