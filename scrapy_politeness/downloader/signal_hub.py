"""One connection per Scrapy signal for all of the plugin's handlers of it.

Scrapy dispatches a signal through ``robustApply``, which inspects each
receiver's signature on every call: several plugin handlers of a per-request
signal cost several of those per request. The hub connects one receiver per
signal and calls the plugin's handlers directly, in the order they were added,
each guarded as Scrapy guards a receiver (an error is logged, the others run).
Only for synchronous handlers of per-request signals.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

__all__ = ["SignalHub"]

logger = logging.getLogger(__name__)

_HUBS: weakref.WeakKeyDictionary[Any, SignalHub] = weakref.WeakKeyDictionary()


class SignalHub:
    """The plugin's handlers of each signal of one crawler, behind one receiver each.

    A handler is called with the signal's named arguments (``**kwargs``), as
    Scrapy would call a receiver that takes ``**kwargs``.
    """

    __slots__ = ("__weakref__", "_handlers", "_signals")

    def __init__(self, signals: Any) -> None:
        self._signals = weakref.ref(signals)  # the crawler's SignalManager (the registry's key)
        self._handlers: dict[object, list[Callable[..., Any]]] = {}

    @classmethod
    def of(cls, crawler: Crawler) -> SignalHub:
        """The hub of ``crawler`` (made on first use)."""
        hub = _HUBS.get(crawler.signals)
        if hub is None:
            hub = _HUBS[crawler.signals] = cls(crawler.signals)
        return hub

    def on(self, signal: object, handler: Callable[..., Any]) -> None:
        """Call ``handler(**named)`` whenever ``signal`` is sent."""
        handlers = self._handlers.get(signal)
        if handlers is None:
            handlers = self._handlers[signal] = []
            signals = self._signals()
            assert signals is not None  # alive: its crawler is adding handlers
            signals.connect(_receiver(handlers), signal=signal, weak=False)
        handlers.append(handler)

    def handlers(self, signal: object) -> int:
        """How many handlers ``signal`` has here (tests)."""
        return len(self._handlers.get(signal, ()))


def _receiver(handlers: list[Callable[..., Any]]) -> Callable[..., None]:
    def receive(**named: Any) -> None:
        for handler in handlers:
            try:
                handler(**named)
            except Exception:
                logger.exception("scrapy-politeness: error in signal handler %r", handler)
    return receive
