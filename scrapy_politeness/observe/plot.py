"""The timeline picture of a decision trace (``POLITENESS_TRACE``).

``python -m scrapy_politeness plot trace.jsonl -o timeline.png`` draws one row
per host (the ``--hosts`` hosts with the most requests): the host's interval
over time as a step line, every fetch start as a tick under it, and the
outcomes that moved it marked (429, 5xx, Retry-After, transport errors,
Crawl-delay, dead/parked). A bottom panel shows the load per IP: fetch starts
per second.

:func:`series` is pure (trace lines in, plot data out) and is what the tests
check; :func:`render` only draws those series, with matplotlib (the optional
``plot`` extra) on the Agg backend.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scrapy_politeness.observe.live_line import plural

__all__ = ["HostSeries", "Marks", "TraceSeries", "read_trace", "render", "series"]

MARK_KINDS = ("429", "5xx", "retry_after", "transport", "crawl_delay", "dead", "parked")


@dataclass
class Marks:
    """Instants (s since crawl start) of the events marked on a host's row."""

    by_kind: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, t: float) -> None:
        self.by_kind.setdefault(kind, []).append(t)

    def get(self, kind: str) -> list[float]:
        return self.by_kind.get(kind, [])


@dataclass
class HostSeries:
    host: str
    steps: list[tuple[float, float]] = field(default_factory=list)  # (t, interval in force)
    starts: list[float] = field(default_factory=list)  # fetch starts (dispatch)
    marks: Marks = field(default_factory=Marks)

    @property
    def requests(self) -> int:
        return len(self.starts)


@dataclass
class TraceSeries:
    hosts: list[HostSeries]  # the top hosts, most requests first
    ip_load: dict[str, list[int]]  # ip -> fetch starts in second 0, 1, 2 ... of the crawl
    duration: float
    wall: float | None = None  # epoch of the crawl start (header line)
    dropped: int = 0  # lines the trace writer dropped (the end line)
    hosts_total: int = 0


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The JSON lines of a trace; a truncated last line (a crawl killed mid-write)
    is skipped, any other bad line raises ValueError naming its number."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    out: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if n == len(lines):
                break
            raise ValueError(f"{path}:{n}: not a JSON line") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{n}: not a JSON object")
        out.append(record)
    return out


def _status_kind(status: int) -> str | None:
    if status == 0:
        return "transport"
    if status == 429:
        return "429"
    if status >= 500:
        return "5xx"
    return None


def series(records: Iterable[dict[str, Any]], top: int = 8) -> TraceSeries:
    """Turn trace records into what the picture shows.

    Per host: ``steps`` are (t, interval) points of a post-step line: the
    interval at each dispatch and after each feedback (and at t=0 for a state
    restored from JOBDIR); ``starts`` the dispatch instants; ``marks`` the
    429 / 5xx / transport (by status), ``retry_after`` (a feedback carrying
    one), ``crawl_delay``, ``dead`` and ``parked`` instants. Hosts are ordered
    by requests (ties by name) and cut to ``top``. ``ip_load`` counts
    dispatches per IP in each whole second from 0 to the end of the trace.
    """
    hosts: dict[str, HostSeries] = {}
    per_ip: dict[str, dict[int, int]] = {}
    duration = 0.0
    wall: float | None = None
    dropped = 0

    def host(name: str) -> HostSeries:
        h = hosts.get(name)
        if h is None:
            h = hosts[name] = HostSeries(name)
        return h

    for rec in records:
        kind = rec.get("type")
        if kind == "header":
            wall = rec.get("wall")
            continue
        if kind == "end":
            dropped = int(rec.get("dropped") or 0)
        t = rec.get("t")
        if not isinstance(t, (int, float)):
            continue
        duration = max(duration, float(t))
        name = rec.get("host")
        if not isinstance(name, str):
            continue
        h = host(name)
        if kind == "dispatch":
            h.starts.append(t)
            h.steps.append((t, float(rec["interval"])))
            ip = rec.get("ip")
            if ip:
                sec = per_ip.setdefault(ip, {})
                sec[math.floor(t)] = sec.get(math.floor(t), 0) + 1
        elif kind == "feedback":
            h.steps.append((t, float(rec["interval_after"])))
            status_kind = _status_kind(int(rec.get("status", 200)))
            if status_kind is not None:
                h.marks.add(status_kind, t)
            if rec.get("retry_after") is not None:
                h.marks.add("retry_after", t)
        elif kind == "restored":
            h.steps.append((t, float(rec["interval"])))
        elif kind in ("crawl_delay", "dead", "parked"):
            h.marks.add(kind, t)
    ordered = sorted(hosts.values(), key=lambda h: (-h.requests, h.host))
    for h in ordered:
        h.steps.sort(key=lambda p: p[0])  # stable: same-instant points keep trace order
    seconds = math.floor(duration) + 1
    ip_load = {ip: [secs.get(i, 0) for i in range(seconds)]
               for ip, secs in sorted(per_ip.items())}
    return TraceSeries(ordered[:top], ip_load, duration, wall, dropped, len(hosts))


_MARK_STYLE: dict[str, tuple[str, str, str]] = {  # kind -> (marker, colour, legend label)
    "429": ("v", "tab:red", "429"),
    "5xx": ("x", "tab:purple", "5xx"),
    "transport": ("X", "black", "transport error"),
    "retry_after": ("o", "tab:orange", "Retry-After"),
    "crawl_delay": ("D", "tab:green", "Crawl-delay"),
    "dead": ("s", "dimgray", "dead"),
    "parked": ("P", "tab:brown", "parked"),
}


def _draw_host(ax: Any, h: HostSeries, end: float, legend: dict[str, Any]) -> None:
    """One host's row: interval steps, fetch-start ticks, event marks."""
    if h.steps:
        xs = [t for t, _ in h.steps] + [end]
        ys = [v for _, v in h.steps] + [h.steps[-1][1]]
        ax.step(xs, ys, where="post", color="tab:blue", linewidth=1.2)
    top = max([v for _, v in h.steps] or [1.0])
    ax.set_ylim(0, top * 1.4)
    ax.vlines(h.starts, 0.0, top * 0.12, color="tab:gray", linewidth=0.8)
    for kind in MARK_KINDS:
        times = h.marks.get(kind)
        if not times:
            continue
        marker, colour, label = _MARK_STYLE[kind]
        level = 1.22 if kind in ("429", "5xx", "transport") else 1.08  # no overlap
        (handle,) = ax.plot(times, [top * level] * len(times), linestyle="none",
                            marker=marker, color=colour, markersize=5)
        legend.setdefault(label, handle)
    ax.set_ylabel("s", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_title(f"{h.host}  ({plural(h.requests, 'request')})", loc="left", fontsize=8, pad=2)
    ax.grid(axis="y", alpha=0.3)


def _draw_load(ax: Any, data: TraceSeries, end: float) -> None:
    """The bottom panel: fetch starts per second per IP."""
    for ip, counts in data.ip_load.items():
        xs = list(range(len(counts) + 1))
        ax.step(xs, [*counts, counts[-1] if counts else 0], where="post", label=ip,
                linewidth=1.0)
    ax.set_ylabel("starts/s per IP", fontsize=7)
    ax.set_xlabel("seconds since crawl start", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.set_xlim(0, end)
    ax.set_ylim(bottom=0)
    if data.ip_load:
        ax.legend(fontsize=7, loc="upper right", ncol=min(4, len(data.ip_load)))


def _heading(data: TraceSeries, title: str | None) -> str:
    heading = title or "politeness timeline: interval per host (step), fetch starts (ticks)"
    if data.wall is not None:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(data.wall))
        heading += f"; crawl started {started}"
    if data.hosts_total > len(data.hosts):
        heading += f"; top {len(data.hosts)} of {plural(data.hosts_total, 'host')}"
    if data.dropped:
        heading += f"; {data.dropped} trace lines dropped"
    return heading


def render(data: TraceSeries, out: str | Path, *, width: int = 1200, height: int = 800,
           dpi: int = 100, title: str | None = None) -> Path:
    """Draw ``data`` to a PNG of exactly ``width`` x ``height`` pixels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(1, len(data.hosts))
    fig, axes = plt.subplots(
        rows + 1, 1, sharex=True, squeeze=False, figsize=(width / dpi, height / dpi), dpi=dpi,
        gridspec_kw={"height_ratios": [1.0] * rows + [1.4]},
    )
    end = max(data.duration, 1.0)
    legend: dict[str, Any] = {}  # label -> a handle, for one figure legend
    for ax, h in zip(axes[:-1, 0], data.hosts, strict=False):
        _draw_host(ax, h, end, legend)
    if not data.hosts:
        axes[0, 0].text(0.5, 0.5, "no dispatches in this trace", ha="center",
                        transform=axes[0, 0].transAxes)
    _draw_load(axes[-1, 0], data, end)
    if legend:
        fig.legend(list(legend.values()), list(legend), loc="upper right", fontsize=7,
                   ncol=len(legend), frameon=False)
    fig.suptitle(_heading(data, title), fontsize=9, x=0.01, ha="left")
    fig.subplots_adjust(left=0.05, right=0.99, top=0.92, bottom=0.07, hspace=0.45)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    plt.close(fig)
    return path
