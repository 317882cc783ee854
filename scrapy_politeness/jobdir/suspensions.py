"""Suspended hosts kept in ``JOBDIR`` across a pause (the ``suspended`` part of the state file).

Per host whose breaker was open (policy/breaker.py): the seconds left until its
probe, the cool-down that led to it and the failed probes so far. A suspended
host resumes suspended, and a probe that fails after the resume doubles the
cool-down it had reached, not the first one. Times are remaining seconds, as in
``jobdir.persistence``; the pause is taken off on restore.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scrapy_politeness.jobdir.persistence import StateError, _num
from scrapy_politeness.policy.breaker import Breaker, Suspension

__all__ = ["check", "restore", "snapshot"]


def snapshot(suspended: Iterable[tuple[str, Suspension]], now: float) -> dict[str, Any]:
    """The ``suspended`` object: per host, its probe in, cool-down and failed probes."""
    return {key: {"probe_in": round(s.until - now, 3) if s.until > now else 0.0,
                  "cooldown": s.cooldown, "probes": s.probes} for key, s in suspended}


def check(document: dict[str, Any]) -> None:
    """Raise ``StateError`` if the document's ``suspended`` object cannot be trusted."""
    suspended = document.get("suspended", {})
    if not isinstance(suspended, dict):
        raise StateError(f"suspended must be an object, got {suspended!r}")
    for key, entry in suspended.items():
        if not isinstance(entry, dict):
            raise StateError(f"suspended host {key!r}: expected an object, got {entry!r}")
        _num(key, "probe_in", entry.get("probe_in"))
        if _num(key, "cooldown", entry.get("cooldown")) <= 0:
            raise StateError(f"suspended host {key!r}: cooldown must be > 0")
        _num(key, "probes", entry.get("probes", 0), integer=True)


def restore(breaker: Breaker, document: dict[str, Any], now: float, wall: float) -> int:
    """Reopen the saved suspensions in ``breaker``, their probe instants less the
    pause (one already due is probed at once); returns how many."""
    elapsed = max(0.0, wall - float(document["saved_at"]))
    saved = document.get("suspended", {})
    for key, entry in saved.items():
        until = now + max(0.0, float(entry["probe_in"]) - elapsed)
        cooldown = min(float(entry["cooldown"]), breaker.max_cooldown)
        breaker.restore(key, Suspension(until, cooldown, int(entry.get("probes", 0))))
    return len(saved)
