"""The per-IP bucket: one next-eligible instant per address, and its own pace.

Two models (``POLITENESS_IP_MODEL``):

- ``"coupled"`` (the reference design's ``IPTable.Spend``): each start pushes
  the IP by the starting host's interval. Two vhosts at interval I on one IP
  then each get 2I, and a host slowed by a 429 slows its neighbours too.
- ``"decoupled"`` (the plugin's default): the IP keeps its own interval,
  ``floor`` until IP-level evidence widens it. A 429, a Retry-After and a
  Crawl-delay are one site's policy (an nginx ``limit_req`` keyed by server
  name, an API's quota) and slow that host only. A server error or a
  transport failure is the machine's evidence only when its host's own
  controller does not explain it (the host was not running below a pace it
  had proven: a probe or the descent fails by itself) and it comes from a
  second vhost within ``WINDOW`` outcomes on the IP: one vhost failing is
  that site's limit (nginx answers 503 by default), several are the machine
  struggling. Then the IP's interval widens (``BACKOFF``); after ``CONFIRM``
  healthy outcomes in a row it narrows by ``SHRINK`` per healthy outcome, back
  to ``floor``.

A recognised CDN edge (``policy.cdn_edges``, given as ``edges``) is no one
machine: its spacing is ``edge_floor`` whatever its hosts do, and no outcome
widens it (a 429 or a 5xx from an edge is its site's).

Pure arithmetic on the caller's clock; the Redis backend books with the
spacing this table gives (reserve.lua's ``ip_spacing``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy_politeness.policy.idle_maps import refit

if TYPE_CHECKING:
    from scrapy_politeness.policy.cdn_edges import CdnEdges

__all__ = ["BACKOFF", "CONFIRM", "IP_MODELS", "MIN_PACE", "SHRINK", "WINDOW", "IPTable",
           "machine_evidence"]

IP_MODELS = ("decoupled", "coupled")
WINDOW = 8
"""Outcomes on one IP within which failures of two vhosts are one machine's."""
BACKOFF = 2.0
"""How much one piece of machine evidence widens the IP's interval."""
CONFIRM = 4
"""Healthy outcomes on the IP, in a row, before its widened interval narrows."""
SHRINK = 0.75
"""Narrowing per healthy outcome once confirmed (0.25 s from 1 s in 5 steps)."""
MIN_PACE = 0.05
"""The interval a widen starts from when the floor is 0."""


def _is_zero_ip(ip: str | None) -> bool:
    return not ip or ip == "0.0.0.0" or ip == "::"


def machine_evidence(status: int, retry_after: float, explained: bool) -> bool | None:
    """What one outcome says about the machine behind the IP.

    True: a failure the machine may be behind (transport, 5xx without
    Retry-After, not ``explained`` by its host's own probe); None: one site's
    policy (a 429, any Retry-After) or a failure its host explains, which
    neither widens nor confirms the IP; False: a healthy answer.
    """
    if status == 429 or retry_after > 0:
        return None
    if status == 0 or status >= 500:
        return None if explained else True
    return False


@dataclass(slots=True)
class _Pace:
    interval: float
    fail_key: str = ""
    fail_n: int = -WINDOW - 1  # the outcome count of the last unexplained failure
    n: int = 0  # outcomes seen on this IP
    run: int = 0  # healthy outcomes in a row


class IPTable:
    """The shared per-IP state: one next-eligible instant per address.

    Many hosts can resolve to one address (shared hosting, a CDN); hammering
    that machine through a hundred vhosts is what the host bucket alone cannot
    catch. Instants are seconds on the caller's clock. ``model`` is one of
    ``IP_MODELS`` (see the module doc); the class default is the reference
    design's coupling, the plugin's setting defaults to ``"decoupled"``.
    """

    __slots__ = ("_high", "_next", "_pace", "coupled", "edge_floor", "edges", "floor", "model")

    def __init__(self, floor: float, model: str = "coupled", *, edges: CdnEdges | None = None,
                 edge_floor: float = 0.0) -> None:
        if floor < 0:
            raise ValueError(f"IPTable floor must not be negative, got {floor!r}")
        if model not in IP_MODELS:
            raise ValueError(f"IPTable model must be one of {IP_MODELS!r}, got {model!r}")
        self.floor = floor
        self.model = model
        self.coupled = model == "coupled"
        self.edges = edges  # recognised CDN edges: spaced by ``edge_floor`` only
        self.edge_floor = edge_floor
        # Least recently pushed first: eviction pops from the front (O(evicted)).
        self._next: OrderedDict[str, float] = OrderedDict()
        self._high = 0  # the high-water mark of ``_next`` (policy.idle_maps)
        self._pace: dict[str, _Pace] = {}  # decoupled: the IPs widened past the floor

    def __len__(self) -> int:
        return len(self._next)

    def eligible_at(self, ip: str | None) -> float:
        """The instant ``ip`` may next be fetched; 0 when unknown or unresolved."""
        if _is_zero_ip(ip):
            return 0.0
        return self._next.get(ip, 0.0)  # type: ignore[arg-type]

    def interval(self, ip: str | None) -> float:
        """The IP's own interval (decoupled): ``floor`` unless evidence widened it."""
        pace = self._pace.get(ip) if ip else None
        return pace.interval if pace is not None else self.floor

    def spacing(self, ip: str | None, interval: float) -> float:
        """The spacing a start of a host at ``interval`` imposes on ``ip``."""
        if self.edges is not None and ip in self.edges.edges:
            return self.edge_floor
        if not self.coupled:
            interval = self.interval(ip)
        return interval if interval > self.floor else self.floor

    def spend(self, ip: str | None, now: float, interval: float) -> None:
        """Record a fetch to ``ip`` starting at ``now`` by a host at ``interval``.

        Pushes the IP's next-eligible to ``now + spacing(ip, interval)``; never
        moves it backwards. A no-op for the zero or unknown IP.
        """
        if _is_zero_ip(ip):
            return
        nxt = now + self.spacing(ip, interval)
        cur = self._next.get(ip, 0.0)  # type: ignore[arg-type]
        if nxt > cur:
            self._next[ip] = nxt  # type: ignore[index]
            self._next.move_to_end(ip)  # type: ignore[arg-type]

    def lower(self, ip: str | None, now: float, interval: float) -> None:
        """Move ``ip``'s next-eligible back to ``now + spacing(ip, interval)`` if
        that is sooner.

        The one way back, for a caller that learnt the fetch it spent for reached
        the server no later than ``now`` (its answer came back) and that nothing
        else spent the IP since.
        """
        if _is_zero_ip(ip):
            return
        nxt = now + self.spacing(ip, interval)
        if nxt < self._next.get(ip, 0.0):  # type: ignore[arg-type]
            self._next[ip] = nxt  # type: ignore[index]

    def feedback(self, ip: str | None, key: str, status: int, retry_after: float,
                 explained: bool) -> bool:
        """Fold one outcome of host ``key`` into ``ip``'s own interval (decoupled
        only); True when it widened. ``explained``: the host's own controller
        explains a failure (it ran below a pace it had proven)."""
        if self.coupled or _is_zero_ip(ip):
            return False
        if self.edges is not None and ip in self.edges.edges:
            return False  # an edge's answers are its sites'
        evidence = machine_evidence(status, retry_after, explained)
        if evidence is None:
            return False
        pace = self._pace.get(ip)  # type: ignore[arg-type]
        if not evidence:
            if pace is not None:
                pace.n += 1
                pace.run += 1
                if pace.run >= CONFIRM:
                    pace.interval *= SHRINK
                    if pace.interval <= self.floor:
                        del self._pace[ip]  # type: ignore[arg-type]
            return False
        if pace is None:
            pace = self._pace[ip] = _Pace(self.floor)  # type: ignore[index]
            # evicted with the IP's entry: one is made if the IP has none (yet)
            self._next.setdefault(ip, 0.0)  # type: ignore[arg-type]
        pace.n += 1
        pace.run = 0
        machine = pace.fail_key != key and pace.n - pace.fail_n <= WINDOW
        pace.fail_key, pace.fail_n = key, pace.n
        if not machine:
            return False
        base = pace.interval if pace.interval > MIN_PACE else MIN_PACE
        pace.interval = base * BACKOFF
        return True

    def items(self) -> list[tuple[str, float]]:
        """Every tracked IP with its next-eligible instant (for saving with JOBDIR)."""
        return list(self._next.items())

    def set_eligible(self, ip: str, at: float) -> None:
        """Let ``ip`` start no earlier than ``at`` (a restored wait); never moves it backwards."""
        if not _is_zero_ip(ip) and at > self._next.get(ip, 0.0):
            self._next[ip] = at
            self._next.move_to_end(ip)

    def evict(self, cutoff: float) -> int:
        """Drop IPs whose next-eligible instant is at or before ``cutoff``.

        Such an IP's bucket is full again, so forgetting it changes no
        decision (a widened pace goes with it: the machine had the idle time
        to recover). Pops from the least recently pushed end, so the cost is
        the IPs evicted; an IP pushed far ahead (a long interval) keeps the
        ones pushed after it for at most that long. Returns the number evicted.
        """
        entries = self._next
        self._high = max(self._high, len(entries))
        evicted = 0
        while entries:  # least recently pushed first; a later push is later, or near
            ip, nxt = next(iter(entries.items()))
            if nxt > cutoff:
                break
            del entries[ip]
            self._pace.pop(ip, None)
            evicted += 1
        self._next, self._high = refit(entries, self._high)
        return evicted
