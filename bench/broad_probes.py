"""What a broad crawl waited for, per window: ``python -m bench.broad_probes RESULT [SECONDS]``.

Reads the ``timeline`` and ``probes`` of a ``result.json`` kept by ``python -m bench.broad
... --timeline --keep DIR`` (``DIR/<scenario>-<config>/result.json``) and prints, per window
(25 s by default): requests/s; the crawl process's CPU and its run-queue wait
(``/proc/self/schedstat``: runnable, waiting for a CPU), in % of the window (their sum near
100 %: the process was CPU-bound on its share of the machine, whatever its CPU %); the
downloader's requests in progress; the engine's asks of the scheduler answered and
answered None a second (None while the downloader has room: the queue had nothing ready); the
robots.txt prefetch's hosts waiting for a fetch, fetches in flight, hosts ahead waiting for
their first page, and its pacing target. Then the robots.txt fetches' time from the prefetch's
ask to the downloader (the gate) and in the downloader, p50/p90, per fifth of the fetches.
"""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["main", "windows"]


def _q(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[int(p * (len(values) - 1))] if values else 0.0


def windows(result: dict[str, Any], seconds: int) -> list[str]:
    rows, probes = result.get("timeline"), result.get("probes")
    if not rows or not probes:
        return ["no probes in this result: run the bench with --timeline"]
    out = ["t(s) | req/s | CPU % | run-queue wait % | downloader active | asks answered/s | "
           "asks None/s | robots waiting | in flight | ahead | target"]
    for i in range(0, len(rows) - seconds, seconds):
        a, b, pa, pb = rows[i], rows[i + seconds], probes[i], probes[i + seconds]
        dt = b[0] - a[0]
        window = probes[i:i + seconds]

        def mean(k: int, window: list[list[float]] = window) -> float:
            return sum(p[k] for p in window) / len(window)
        out.append(f"{i} | {(b[2] - a[2]) / dt:.1f} | {100 * (pb[4] - pa[4]) / dt:.0f} | "
                   f"{100 * (pb[5] - pa[5]) / dt:.0f} | {mean(0):.1f} | "
                   f"{(pb[2] - pa[2]) / dt:.1f} | {(pb[3] - pa[3]) / dt:.1f} | {mean(6):.0f} | "
                   f"{mean(7):.1f} | {mean(8):.1f} | {mean(9):.1f}")
    fetches = sorted(v for v in result.get("robots_times", {}).values() if v[1] and v[2])
    if fetches:
        out.append("robots.txt fetches (by fifth): gate p50/p90 s | downloader p50/p90 s")
        n = len(fetches)
        for k in range(5):
            part = fetches[k * n // 5:(k + 1) * n // 5]
            gate, down = [f[1] - f[0] for f in part], [f[2] - f[1] for f in part]
            out.append(f"  {_q(gate, .5):.3f}/{_q(gate, .9):.3f} | "
                       f"{_q(down, .5):.3f}/{_q(down, .9):.3f}")
    return out


def main(argv: list[str]) -> None:
    with open(argv[0], encoding="utf-8") as fh:
        result = json.load(fh)
    print("\n".join(windows(result, int(argv[1]) if len(argv) > 1 else 25)))


if __name__ == "__main__":
    main(sys.argv[1:])
