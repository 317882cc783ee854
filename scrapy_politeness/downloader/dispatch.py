"""A released request on its way, and how late its shared booking may still go.

Apart from :mod:`.send_lateness` (which re-exports them) so that the modules
that only carry a dispatch need not read the slip's corrections.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from scrapy_politeness.policy import HostState

__all__ = ["LEAD", "STALL", "AnswerBound", "Dispatch", "LateArrivals", "late_allowance"]

STALL = 0.004  # a loop turn this long may have held the sends still on their way
# The frontier hands a request out up to this long before the instant it booked.
LEAD = 0.05


def late_allowance(state: HostState, ip_spacing: float | None) -> float:
    """How late after its booked start a request may still go, its real start
    reported to the shared buckets at once (``ip_spacing``: what its start
    spends on its IP, ``IPTable.spacing``; None: no IP bucket).

    The next start on the same buckets is booked no sooner than one spacing
    after this booking, minus the frontier's lead; half of what is left leaves
    the report ample time to land first. Later than this: booked afresh.
    """
    spacing = state.clamped
    if ip_spacing is not None and ip_spacing < spacing:
        spacing = ip_spacing
    return max(0.0, (spacing - LEAD) / 2.0)


class AnswerBound(NamedTuple):
    """A frontier booking whose answer came (``answered``, the event loop's
    clock) sooner than where its pop spent the buckets (``spent``, the server's
    clock): the fetch's feedback moves them back to the answer less ``margin``."""

    ip: str | None
    answered: float
    spent: float
    ip_spacing: float
    margin: float


@dataclass(slots=True)
class Dispatch:
    """A request the gate let through, until its outcome comes back."""

    key: str
    at: float
    ip: str | None = None
    booked_slip: float = math.inf  # how late a start the shared booking already spent for
    spent: float = math.nan  # the host's last start this send left (see SendSlip.sent)
    ip_next: float = math.nan  # the IP's next-eligible instant this send left
    cold: bool = False  # sent with no kept-alive connection of its host known idle
    busy: float = 0.0  # the loop's accumulated lateness at the send (LoopMonitor.busy)
    loop_lag: float = math.nan  # the loop's lateness from the send to its headers
    proxied: bool = False  # through a proxy: its forwarding delay varies request by request
    until: float = -math.inf  # unwritten: its buckets are spent for a send no earlier than this
    unwritten: bool = False  # released, its write to the connection not seen yet
    # Sent as the frontier booked it: where its pop spent the shared buckets (the
    # server's clock); its answer, when sooner than that (headers_received)
    server_spent: float = math.nan
    answer: AnswerBound | None = None


class LateArrivals(Protocol):
    """Where a late arrival is reported with a shared backend (``SharedSync``)."""

    def late_arrival(self, dispatch: Dispatch, state: HostState, arrived: float,
                     now: float) -> None: ...
