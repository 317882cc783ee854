"""Making the download connect to the IP the gate accounted for.

Scrapy's HTTP handler connects through Twisted's ``HostnameEndpoint``, which
asks ``reactor.nameResolver``. Wrapping that resolver (and handing every name
we did not pin to the one it wraps) is the clean seam: no custom download
handler, no rewritten URLs, Host header and TLS SNI untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IAddress, IHostnameResolver, IHostResolution
from zope.interface import implementer  # type: ignore[import-untyped]

__all__ = ["PinnedNameResolver"]


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
