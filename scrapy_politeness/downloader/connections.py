"""Which sends open a new connection, and what a new connection costs an IP.

On a real network a new connection's first request reaches the server one to
three round trips after it was sent (TCP, then TLS), a request on a kept-alive
connection at once. Spending the buckets at the send would let a warm request
of another vhost reach the same IP before a cold one sent earlier. So a cold
send spends its buckets at ``send + set-up``, the set-up learnt per IP from
the cold requests' first bytes (what they took beyond their host's usual
latency; a host with no usual latency yet counts whole, which only widens).

Scrapy keeps a host's connections alive in its pool; which one a request gets
is not visible, so the count here follows the pool's rule: an answer puts its
connection back, a send takes one if any is idle, else it opens one. A failed
download's connection is not counted back. Overestimating a set-up only
widens a gap; the answer then moves the spend back (``SendSlip``).
"""

from __future__ import annotations

__all__ = ["MAX_KEYS", "Connections"]

MAX_KEYS = 10_000  # hosts and IPs remembered; a broad crawl forgets rather than grow
_DECAY = 0.9  # a set-up estimate shrinks towards smaller ones slowly, grows at once


class Connections:
    """Idle kept-alive connections per host key, and the set-up per IP."""

    __slots__ = ("idle", "setup")

    def __init__(self) -> None:
        self.idle: dict[str, int] = {}
        self.setup: dict[str, float] = {}

    def cold(self, key: str) -> bool:
        """A send of ``key``: takes an idle connection (False) or opens one (True)."""
        n = self.idle.get(key, 0)
        if n:
            self.idle[key] = n - 1
            return False
        return True

    def setup_of(self, ip: str | None) -> float:
        return 0.0 if ip is None else self.setup.get(ip, 0.0)

    def answered(self, key: str, ip: str | None, cold: bool, excess: float) -> None:
        """Headers of a send of ``key`` on ``ip`` came, ``excess`` beyond its host's
        usual latency: its connection will be idle again; a ``cold`` one (it
        opened the connection) teaches the IP's set-up."""
        idle = self.idle
        if len(idle) >= MAX_KEYS and key not in idle:
            idle.clear()
        idle[key] = idle.get(key, 0) + 1
        if not cold or ip is None:
            return
        old = self.setup.get(ip, 0.0)
        new = excess if excess > old else old * _DECAY + excess * (1 - _DECAY)
        if len(self.setup) >= MAX_KEYS and ip not in self.setup:
            self.setup.clear()
        self.setup[ip] = new if new > 0.0 else 0.0
