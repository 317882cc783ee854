"""Learnt per-host and per-IP state saved in ``JOBDIR`` and read back on resume.

With ``JOBDIR`` set (and ``POLITENESS_PERSIST`` left on), the middleware writes
``JOBDIR/politeness-state.json`` when the spider closes and reads it when the
spider opens, so a host that was backed off to 8 s starts the resumed crawl at
8 s, not at the default::

    {"version": 1, "saved_at": <wall-clock epoch>, "hosts": {
        "example.com": {"adaptive": 8.0, "crawl_delay": 0.0, "latency": 0.12,
                        "dead": false, "ceiling_streak": 0, "parked_for": 0.0,
                        "not_before_in": 0.0, "since_last_start": 0.4,
                        "idle_for": 0.4,
                        "recovery": {"fail_at": 0.42, "good_at": 0.52,
                                     "healthy_run": 7, "fail_cost": 2.0}}},
     "ips": {"203.0.113.7": 3.2},
     "suspended": {"down.example": {"probe_in": 95.0, "cooldown": 240.0, "probes": 1}}}

``recovery`` (only for a host the fast recovery learnt something of) is its
memory (policy/recovery.py): without it a resumed crawl would start the
bracket search afresh and pay another Retry-After pause to relearn the pace.

``ips`` holds, per IP, the seconds left until it may be fetched again: a
vhost resumed beside a backed-off neighbour must still wait out the spacing
that neighbour's last fetch imposed on their shared machine.

``suspended`` holds the hosts whose breaker was open (``jobdir.suspensions``).

Time-based fields are stored as *remaining* (or elapsed) seconds, never as
instants: the monotonic clock of the next process starts elsewhere. On restore
the wall-clock time between ``saved_at`` and now is taken off what remains
(``parked_for: "forever"`` is a park that never ends: a Crawl-delay above the
maximum with the ``skip`` policy).

A dead host's verdict is not kept forever: it is forgotten once
``POLITENESS_IDLE_TTL`` has passed after the last wait it encoded ran out,
counting the pause, which is when Redis lets the same host's key expire
(:func:`dead_verdict_expired`). The host then starts afresh at the default
interval and is declared dead again if it is still down.

The file is written atomically (a temporary file in the same directory, then
``os.replace``). A missing file means a fresh start; a corrupt, truncated or
foreign one (wrong version, wrong types) is ignored with one WARNING, never a
crash. With a shared backend (Redis) the state already persists there and no
file is used.

Pure Python on the policy tables: no Scrapy import.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scrapy_politeness.policy import HostState, HostTable, IPTable

__all__ = ["STATE_FILE", "STATE_VERSION", "StateError", "dead_verdict_expired", "load",
           "restore", "restore_ips", "save", "snapshot"]

STATE_FILE = "politeness-state.json"
STATE_VERSION = 1
FOREVER = "forever"


class StateError(ValueError):
    """The state file cannot be used (the message says why)."""


def _remaining(until: float, now: float) -> float | str:
    if math.isinf(until):
        return FOREVER
    return round(until - now, 3) if until > now else 0.0


def snapshot(hosts: Iterable[tuple[str, HostState]], now: float, wall: float,
             ips: Iterable[tuple[str, float]] = ()) -> dict[str, Any]:
    """The JSON document for ``hosts`` and ``ips`` (IP, next-eligible instant);
    ``now`` is on the tables' (monotonic) clock."""
    out: dict[str, dict[str, Any]] = {}
    for key, s in hosts:
        entry: dict[str, Any] = {
            "adaptive": s.adaptive,
            "default": s.config.default,
            "crawl_delay": s.crawl_delay,
            "latency": s.latency,
            "dead": s.dead,
            "ceiling_streak": s.ceiling_streak,
            "parked_for": _remaining(s.parked_until, now),
            "not_before_in": _remaining(s.not_before, now),
        }
        if math.isfinite(s.last_start):
            entry["since_last_start"] = round(max(0.0, now - s.last_start), 3)
        entry["idle_for"] = round(max(0.0, now - s.touched), 3)
        if s.fail_at > 0 or s.good_at > 0:
            entry["recovery"] = {"fail_at": s.fail_at, "good_at": s.good_at,
                                 "healthy_run": s.healthy_run, "fail_cost": s.fail_cost}
        out[key] = entry
    waits = {ip: round(at - now, 3) for ip, at in ips if at > now}
    return {"version": STATE_VERSION, "saved_at": wall, "hosts": out, "ips": waits}


def save(path: str | os.PathLike[str], document: dict[str, Any]) -> None:
    """Write ``document`` atomically: a reader sees the old file or the new one."""
    target = Path(path)
    # One line, encoded by json's C encoder (``json.dump`` and any ``indent`` take the
    # pure-Python one: 3-5x slower, and this runs in the close, per host in the table).
    text = json.dumps(document, separators=(",", ":"), allow_nan=False)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _num(key: str, field: str, value: Any, *, integer: bool = False) -> float:
    ok = (not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
          and math.isfinite(value) and value >= 0)
    if not ok:
        kind = "a whole number" if integer else "a number"
        raise StateError(f"host {key!r}: {field} must be {kind} >= 0, got {value!r}")
    return value  # type: ignore[no-any-return]


def _remaining_field(key: str, field: str, value: Any) -> float:
    if value == FOREVER:
        return math.inf
    return _num(key, field, value)


def _check_recovery(key: str, memory: Any) -> None:
    if not isinstance(memory, dict):
        raise StateError(f"host {key!r}: recovery must be an object, got {memory!r}")
    for field in ("fail_at", "good_at", "fail_cost"):
        _num(key, f"recovery.{field}", memory.get(field, 0.0))
    _num(key, "recovery.healthy_run", memory.get("healthy_run", 0), integer=True)


def load(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The validated document, or None when there is no file.

    Raises StateError for a file that cannot be trusted.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StateError(f"unreadable: {exc}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise StateError(f"not valid JSON (corrupt or truncated?): {exc}") from None
    if not isinstance(doc, dict):
        raise StateError(f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("version") != STATE_VERSION:
        raise StateError(f"unknown version {doc.get('version')!r} (this plugin reads "
                         f"version {STATE_VERSION})")
    saved_at = doc.get("saved_at")
    if isinstance(saved_at, bool) or not isinstance(saved_at, (int, float)) or not \
            math.isfinite(saved_at):
        raise StateError(f"saved_at must be a wall-clock epoch, got {saved_at!r}")
    hosts = doc.get("hosts")
    if not isinstance(hosts, dict):
        raise StateError(f"hosts must be an object, got {hosts!r}")
    for key, entry in hosts.items():
        if not isinstance(entry, dict):
            raise StateError(f"host {key!r}: expected an object, got {entry!r}")
        if _num(key, "adaptive", entry.get("adaptive")) <= 0:
            raise StateError(f"host {key!r}: adaptive must be > 0")
        _num(key, "crawl_delay", entry.get("crawl_delay", 0.0))
        _num(key, "latency", entry.get("latency", 0.0))
        _num(key, "ceiling_streak", entry.get("ceiling_streak", 0), integer=True)
        if not isinstance(entry.get("dead", False), bool):
            raise StateError(f"host {key!r}: dead must be true or false, "
                             f"got {entry.get('dead')!r}")
        _remaining_field(key, "parked_for", entry.get("parked_for", 0.0))
        _remaining_field(key, "not_before_in", entry.get("not_before_in", 0.0))
        if "default" in entry:
            _num(key, "default", entry["default"])
        for field in ("since_last_start", "idle_for"):
            if field in entry:
                _num(key, field, entry[field])
        _check_recovery(key, entry.get("recovery", {}))
    ips = doc.get("ips", {})
    if not isinstance(ips, dict):
        raise StateError(f"ips must be an object, got {ips!r}")
    for ip, wait in ips.items():
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not \
                math.isfinite(wait) or wait < 0:
            raise StateError(f"ip {ip!r}: the wait must be a number >= 0, got {wait!r}")
    return doc


def dead_verdict_expired(entry: dict[str, Any], ceiling: float, idle_ttl: float,
                         elapsed: float) -> bool:
    """Whether a saved dead host's verdict has run out ``elapsed`` s after saving.

    The same rule as Redis (``feedback.lua``): a host's key outlives the
    longest wait it encodes (the ceiling, the Crawl-delay, the Retry-After
    window, the last start's interval), counted from its last outcome, by
    ``POLITENESS_IDLE_TTL``. ``idle_for`` says how long before saving that
    outcome was.
    """
    idle = float(entry.get("idle_for", 0.0))
    waits = [ceiling - idle, float(entry.get("crawl_delay", 0.0)) - idle]
    window = entry.get("not_before_in", 0.0)
    if window != FOREVER:
        waits.append(float(window))
    if "since_last_start" in entry:
        interval = max(float(entry["adaptive"]), float(entry.get("crawl_delay", 0.0)))
        waits.append(interval - float(entry["since_last_start"]))
    return elapsed >= max(waits) + idle_ttl


def restore_ips(ips: IPTable, document: dict[str, Any], now: float, wall: float) -> int:
    """Fold the saved IP waits into ``ips``, less the pause; returns how many still hold."""
    elapsed = max(0.0, wall - float(document["saved_at"]))
    held = 0
    for ip, wait in document.get("ips", {}).items():
        if wait - elapsed > 0:
            ips.set_eligible(ip, now + wait - elapsed)
            held += 1
    return held


def restore(hosts: HostTable, document: dict[str, Any], now: float,
            wall: float, idle_ttl: float = math.inf) -> list[tuple[str, HostState]]:
    """Fold a validated document into ``hosts``; returns the restored states.

    ``now`` is the new process's monotonic clock, ``wall`` its wall clock: the
    time that passed since ``saved_at`` is taken off every remaining wait. The
    adaptive interval is restored only when it was learnt (it differs from
    that run's default, so a changed POLITENESS_DEFAULT takes effect for hosts
    with nothing learnt), clamped into the host's *current* band. A dead host
    whose verdict ran out (:func:`dead_verdict_expired`) comes back as new:
    its verdict and backoff are dropped; its Crawl-delay is kept (robots.txt
    is not fetched again).
    """
    elapsed = max(0.0, wall - float(document["saved_at"]))
    restored = []
    # The most idle first: the table is kept least recently touched first, so
    # its eviction pops these from the front.
    saved_hosts = sorted(document["hosts"].items(),
                         key=lambda kv: -float(kv[1].get("idle_for", 0.0)))
    for key, saved in saved_hosts:
        state = hosts.get(key)
        entry = saved
        if saved.get("dead", False) and dead_verdict_expired(
                saved, state.config.ceiling, idle_ttl, elapsed):
            entry = {"adaptive": state.adaptive, "default": state.adaptive,
                     "crawl_delay": saved.get("crawl_delay", 0.0),
                     "parked_for": saved.get("parked_for", 0.0),
                     "idle_for": saved.get("idle_for", 0.0)}
        adaptive = float(entry["adaptive"])
        if adaptive != entry.get("default"):  # learnt, not merely that run's default
            state.adaptive = state.config.host_interval(adaptive)
        state.crawl_delay = float(entry.get("crawl_delay", 0.0))
        state.latency = float(entry.get("latency", 0.0))
        state.ceiling_streak = int(entry.get("ceiling_streak", 0))
        state.dead = bool(entry.get("dead", False))
        memory = entry.get("recovery", {})
        state.fail_at = float(memory.get("fail_at", 0.0))
        state.good_at = float(memory.get("good_at", 0.0))
        state.healthy_run = int(memory.get("healthy_run", 0))
        state.fail_cost = float(memory.get("fail_cost", 0.0))
        parked = _remaining_field(key, "parked_for", entry.get("parked_for", 0.0)) - elapsed
        if parked > 0:
            state.parked_until = now + parked
        window = _remaining_field(key, "not_before_in", entry.get("not_before_in", 0.0))
        if window - elapsed > 0:
            state.not_before = max(state.not_before, now + window - elapsed)
        if "since_last_start" in entry:
            state.last_start = now - float(entry["since_last_start"]) - elapsed
        # Idle time keeps counting across the pause, so the usual eviction
        # (POLITENESS_IDLE_TTL) forgets what it would have forgotten anyway.
        state.touched = now - float(entry.get("idle_for", 0.0)) - elapsed
        restored.append((key, state))
    return restored
