"""Join a crawl's decision trace and nginx's access log: which path each IP gap took.

For every request the server logged (``$msec host ip status uri``) this finds
its dispatch in the plugin's trace (``POLITENESS_TRACE``; ``BENCH_BROAD_TRACE``
turns it on in :mod:`bench.broad`) and prints, for every IP gap shorter than
the floor less the tolerance (and for the tightest pairs), each request's
release-to-log delay, its kind (robots.txt or page) and the host's previous
request. A request that reached the server long after its release is what a
gap the gate kept can shrink by.

    python -m bench.gap_paths TRACE.jsonl ACCESS.log [--floor 0.25] [--tol 0.015]

With ``-`` for the trace, the log alone: the gaps and the silences before them.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
from collections import defaultdict
from urllib.parse import urlsplit

Sends = dict[tuple[str, str], list[float]]


def load_trace(path: str) -> tuple[float, Sends]:
    """The trace's wall-clock start and each (host, path)'s dispatch instants."""
    wall0 = 0.0
    sent: Sends = defaultdict(list)
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            kind = rec["type"]
            if kind == "header":
                wall0 = rec["wall"]
            elif kind == "dispatch":
                uri = urlsplit(rec["url"]).path
                sent[(rec["host"], uri)].append(rec["t"])
    return wall0, sent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("log")
    ap.add_argument("--floor", type=float, default=0.25)
    ap.add_argument("--tol", type=float, default=0.015)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    wall0, sent = load_trace(args.trace) if args.trace != "-" else (0.0, {})
    rows = []  # (msec, host, ip, uri, release wall)
    with open(args.log, encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 5:
                continue
            msec, host, ip, uri = float(parts[0]), parts[1], parts[2], parts[4]
            ts = sent.get((host, uri))
            rel = wall0 + ts.pop(0) if ts else float("nan")
            rows.append((msec, host, ip, uri, rel))
    delays = sorted(r[0] - r[4] for r in rows if not math.isnan(r[4]))
    offset = delays[0] if delays else 0.0  # the two clocks' offset: the smallest delay is ~0
    n = len(delays)
    print(f"{len(rows)} logged, {n} matched to a dispatch; clock offset {offset * 1e3:.1f} ms")
    for q in (0.5, 0.9, 0.99, 0.999, 1.0):
        if n:
            print(f"  release -> log delay p{q * 100:g}: "
                  f"{(delays[min(n - 1, int(q * n))] - offset) * 1e3:.1f} ms")
    by_ip: dict[str, list[tuple[float, str, str, float]]] = defaultdict(list)
    for msec, host, ip, uri, rel in rows:
        by_ip[ip].append((msec, host, uri, rel if math.isnan(rel) else rel - offset))
    pairs = []
    for ip, seq in by_ip.items():
        seq.sort()
        for a, b in itertools.pairwise(seq):
            pairs.append((b[0] - a[0], ip, a, b))
    pairs.sort()
    stamps = sorted(r[0] for r in rows)
    bad = [p for p in pairs if p[0] < args.floor - args.tol]
    print(f"IP violations (< {args.floor - args.tol:.3f} s): {len(bad)}")
    for gap, ip, a, b in pairs[:max(args.top, len(bad))]:
        rel_gap = b[3] - a[3]
        print(f"  {ip} log gap {gap * 1e3:6.1f} ms, release gap {rel_gap * 1e3:6.1f} ms, "
              f"silence before the first {silence_before(stamps, a[0]) * 1e3:.0f} ms | "
              f"{a[1]} {a[2]} delay {(a[0] - a[3]) * 1e3:.1f} ms | "
              f"{b[1]} {b[2]} delay {(b[0] - b[3]) * 1e3:.1f} ms")


def silence_before(stamps: list[float], at: float) -> float:
    """The longest stretch with no line in the whole log in the second before ``at``."""
    lo, hi = bisect.bisect_left(stamps, at - 1.0), bisect.bisect_right(stamps, at)
    window = [at - 1.0, *stamps[lo:hi], at]
    return max(b - a for a, b in itertools.pairwise(window))


if __name__ == "__main__":
    main()
