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

__all__ = ["Pin", "PinnedNameResolver", "install", "install_on"]

logger = logging.getLogger(__name__)


@implementer(IHostResolution)
class _Resolution:
    def __init__(self, name: str) -> None:
        self.name = name

    def cancel(self) -> None:  # pragma: no cover - answered synchronously
        pass


@implementer(IHostnameResolver)
class PinnedNameResolver:
    """Answers pinned names with their pinned IP, delegates everything else.

    One is installed per reactor, shared by every crawler of the process:
    each crawler adds its pin lookup on open and removes it on close, and the
    last one out puts the wrapped resolver back. (A wrapper per crawler
    would leave a stale one installed when crawlers close out of order.)
    """

    def __init__(self, wrapped: Any, pinned: Callable[[str], str | None] | None = None) -> None:
        self.wrapped = wrapped
        self.lookups: list[Callable[[str], str | None]] = [] if pinned is None else [pinned]

    def _pinned(self, name: str) -> str | None:
        for lookup in self.lookups:
            ip = lookup(name)
            if ip is not None:
                return ip
        return None

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
    """One crawler's pin lookup in the reactor's shared resolver."""

    def __init__(self, reactor: Any, ours: PinnedNameResolver,
                 pinned: Callable[[str], str | None]) -> None:
        self._reactor = reactor
        self._ours = ours
        self._pinned = pinned

    def restore(self) -> None:
        """Withdraw this crawler's pins; the last crawler out restores the
        wrapped resolver (unless someone replaced ours since)."""
        lookups = self._ours.lookups
        if self._pinned in lookups:
            lookups.remove(self._pinned)
        if lookups:
            return
        if self._reactor.nameResolver is self._ours:
            self._reactor.installNameResolver(self._ours.wrapped)


def install_on(reactor: Any, pinned: Callable[[str], str | None]) -> Pin | None:
    """Add ``pinned`` to ``reactor``'s shared pinning resolver, installing it if needed."""
    current = getattr(reactor, "nameResolver", None)
    if current is None or not hasattr(reactor, "installNameResolver"):
        logger.warning("The reactor has no pluggable name resolver; downloads will not "
                       "be pinned to the IP the politeness gate accounted for")
        return None
    if isinstance(current, PinnedNameResolver):
        ours = current
        ours.lookups.append(pinned)
    else:
        ours = PinnedNameResolver(current, pinned)
        reactor.installNameResolver(ours)
    return Pin(reactor, ours, pinned)


def install(pinned: Callable[[str], str | None]) -> Pin | None:
    """Wrap the reactor's name resolver; None (with a warning) where impossible."""
    from scrapy.utils.reactor import is_reactor_installed

    if not is_reactor_installed():  # TWISTED_REACTOR_ENABLED = False
        logger.warning("No Twisted reactor: downloads will not be pinned to the IP the "
                       "politeness gate accounted for (POLITENESS_DNS_PIN)")
        return None
    from twisted.internet import reactor

    return install_on(reactor, pinned)
