"""The Arrival record: one HTTP request as seen by the server.

Shared by the server (which produces them) and the client (which parses the
control endpoint's JSON back into them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Arrival:
    """One request; ``t`` is time.monotonic() when its first byte arrived."""

    t: float
    wall: float
    host: str
    ip: str
    path: str
    status: int
    conn: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Arrival:
        """Inverse of to_dict (ignores unknown keys for forward compatibility)."""
        return cls(
            t=float(raw["t"]),
            wall=float(raw["wall"]),
            host=str(raw["host"]),
            ip=str(raw["ip"]),
            path=str(raw["path"]),
            status=int(raw["status"]),
            conn=int(raw["conn"]),
        )
