"""IP gaps as the kernel saw the requests arrive on loopback (a diagnostic; needs root).

    sudo .venv/bin/python -m bench.wire_gaps capture OUT.jsonl &   # until SIGTERM
    .venv/bin/python -m bench --only many-hosts --configs plugin
    kill %1; .venv/bin/python -m bench.wire_gaps report OUT.jsonl --spacing 0.1

The farm stamps each arrival in its own event loop, so on a CPU-starved machine
a stall of the farm and a burst of the crawler look alike. This capture reads
every packet on ``lo`` with the kernel's receive timestamp (``SO_TIMESTAMPNS``
on an ``AF_PACKET`` socket) and keeps the segments that start an HTTP request;
``report`` gives the per-IP gaps from those instants.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import signal
import socket
import struct
import sys
from collections.abc import Iterable
from typing import Any

from .metrics import TOL

SO_TIMESTAMPNS = 35  # Linux
ETH_P_ALL = 0x0003
_METHODS = (b"GET ", b"HEAD", b"POST", b"PUT ")


def request_line(frame: bytes) -> tuple[str, str, str] | None:
    """(destination IP, Host, request line) of an IPv4 TCP segment on ``lo``
    (14-byte link header) whose payload starts an HTTP request, else None."""
    ip = frame[14:]
    if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
        return None
    tcp = ip[(ip[0] & 15) * 4:]
    if len(tcp) < 20:
        return None
    payload = tcp[(tcp[12] >> 4) * 4:]
    if payload[:4] not in _METHODS:
        return None
    head = payload.split(b"\r\n")
    host = next((h[5:].strip() for h in head[1:] if h.lower().startswith(b"host:")), b"")
    return socket.inet_ntoa(ip[16:20]), host.decode("latin-1"), head[0].decode("latin-1")


def capture(path: str) -> None:
    """Write one JSON line per request segment (kernel time, IP, Host, line) until SIGTERM."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 25)
    sock.settimeout(0.5)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(path, "w", encoding="utf-8") as out:
        while not stop:
            try:
                data, ancillary, _flags, addr = sock.recvmsg(65535, 1024)
            except TimeoutError:
                continue
            if addr[2] == socket.PACKET_OUTGOING:  # lo shows each packet twice
                continue
            seen = request_line(data)
            stamp = next((struct.unpack("qq", raw[:16]) for level, kind, raw in ancillary
                          if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS), None)
            if seen is not None and stamp is not None:
                out.write(json.dumps([stamp[0] + stamp[1] / 1e9, *seen]) + "\n")


def ip_gaps(rows: Iterable[list[Any]], spacing: float) -> tuple[int, list[tuple[float, str]]]:
    """IP violations (gaps below ``spacing`` - 15 ms, robots.txt aside) and the
    smallest gap of each IP, smallest first."""
    by_ip: dict[str, list[float]] = collections.defaultdict(list)
    for stamp, ip, _host, line in rows:
        if "/robots.txt" not in line:
            by_ip[ip].append(stamp)
    violations, smallest = 0, []
    for ip, stamps in by_ip.items():
        stamps.sort()
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        if gaps:
            smallest.append((min(gaps), ip))
        violations += sum(1 for g in gaps if g < spacing - TOL)
    smallest.sort()
    return violations, smallest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("capture", "report"))
    parser.add_argument("path")
    parser.add_argument("--spacing", type=float, default=0.1, help="the IP spacing due (s)")
    args = parser.parse_args(argv)
    if args.mode == "capture":
        capture(args.path)
        return 0
    with open(args.path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    violations, smallest = ip_gaps(rows, args.spacing)
    print(f"{len(rows)} requests, IP violations by kernel receive time: {violations}; "
          f"smallest gaps: " + ", ".join(f"{ip} {gap * 1000:.1f} ms" for gap, ip in smallest[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
