"""Making the download connect to the IP the gate accounted for.

Scrapy's HTTP handler connects through Twisted's ``HostnameEndpoint``, which
asks ``reactor.nameResolver``. Wrapping that resolver (and handing every name
we did not pin to the one it wraps) is the clean seam: no custom download
handler, no rewritten URLs, Host header and TLS SNI untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IAddress, IHostnameResolver, IHostResolution
from zope.interface import implementer  # type: ignore[import-untyped]

__all__ = ["PinnedNameResolver", "install"]

logger = logging.getLogger(__name__)


@implementer(IHostResolution)
class _Resolution:
    def __init__(self, name: str) -> None:
        self.name = name

    def cancel(self) -> None:  # pragma: no cover - answered synchronously
        pass


@implementer(IHostnameResolver)
class PinnedNameResolver:
    """Answers pinned names with their pinned IP, delegates everything else."""

    def __init__(self, wrapped: Any, pinned: Callable[[str], str | None]) -> None:
        self.wrapped = wrapped
        self._pinned = pinned

    def resolveHostName(
        self,
        resolutionReceiver: Any,  # an IResolutionReceiver
        hostName: str,
        portNumber: int = 0,
        addressTypes: Sequence[type[IAddress]] | None = None,
        transportSemantics: str = "TCP",
    ) -> Any:
        ip = self._pinned(hostName.lower().rstrip("."))
        if ip is None:
            return self.wrapped.resolveHostName(
                resolutionReceiver, hostName, portNumber, addressTypes, transportSemantics
            )
        resolution = _Resolution(hostName)
        resolutionReceiver.resolutionBegan(resolution)
        cls = IPv6Address if ":" in ip else IPv4Address
        if addressTypes is None or cls in addressTypes:
            resolutionReceiver.addressResolved(cls("TCP", ip, portNumber))
        resolutionReceiver.resolutionComplete()
        return resolution


class Pin:
    """An installed :class:`PinnedNameResolver`, restorable at spider close."""

    def __init__(self, reactor: Any, wrapped: Any, ours: PinnedNameResolver) -> None:
        self._reactor = reactor
        self._wrapped = wrapped
        self._ours = ours

    def restore(self) -> None:
        """Put the wrapped resolver back, unless someone replaced ours since."""
        if self._reactor.nameResolver is self._ours:
            self._reactor.installNameResolver(self._wrapped)


def install(pinned: Callable[[str], str | None]) -> Pin | None:
    """Wrap the reactor's name resolver; None (with a warning) where impossible."""
    from scrapy.utils.reactor import is_reactor_installed

    if not is_reactor_installed():  # TWISTED_REACTOR_ENABLED = False
        logger.warning("No Twisted reactor: downloads will not be pinned to the IP the "
                       "politeness gate accounted for (POLITENESS_DNS_PIN)")
        return None
    from twisted.internet import reactor

    current = getattr(reactor, "nameResolver", None)
    if current is None or not hasattr(reactor, "installNameResolver"):
        logger.warning("The reactor has no pluggable name resolver; downloads will not "
                       "be pinned to the IP the politeness gate accounted for")
        return None
    ours = PinnedNameResolver(current, pinned)
    reactor.installNameResolver(ours)
    return Pin(reactor, current, ours)
