"""When may a host's next request start: the one rule for "may it go now".

The gate enforces it and the scheduler queue estimates ahead with it, so the
two never disagree; ``distributed/lua/_eligibility.lua`` is its Redis mirror
(the shared budget and the frontier queue book by the same instants).

A start of host ``key`` on ``ip`` may go at ``max(host_ready, ip_ready)``:

- ``host_ready``: the host's last start plus its clamped interval, or the end
  of a Retry-After pause if later (:meth:`HostState.eligible_at`), plus the
  send margin; 0 for a host never started.
- ``ip_ready``: the IP bucket's next-eligible instant plus the send margin; 0
  for an IP never spent (or none: a request with no IP bucket).

The margin pads every spacing: a released request still crosses the event
loop before its bytes leave, and the margin absorbs that trip's jitter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy_politeness.policy.host_state import HostState
    from scrapy_politeness.policy.ips import IPTable
    from scrapy_politeness.policy.tables import HostTable

__all__ = ["Eligibility"]


class Eligibility:
    """The instants a host's and an IP's buckets let the next start go."""

    __slots__ = ("hosts", "ips", "margin")

    def __init__(self, hosts: HostTable, ips: IPTable, margin: float = 0.0) -> None:
        self.hosts = hosts
        self.ips = ips
        self.margin = margin

    def host_ready(self, key: str) -> float:
        """When host ``key``'s own bucket lets its next request start."""
        return self.state_ready(self.hosts.peek(key))

    def state_ready(self, state: HostState | None) -> float:
        """:meth:`host_ready` for a caller that already holds the host's state."""
        return 0.0 if state is None else state.eligible_at() + self.margin

    def ip_ready(self, ip: str | None) -> float:
        """When ``ip``'s bucket lets the next start on it go."""
        at = self.ips.eligible_at(ip)
        return at + self.margin if at else 0.0  # an unknown IP has no spacing to pad
