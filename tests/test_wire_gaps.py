"""bench.wire_gaps: the kernel-timestamp diagnostic's parsing and gap count (no capture)."""

from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.wire_gaps import ip_gaps, request_line


def _frame(dst: str, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", 40000, 8080, 0, 0, 5 << 4, 0x18, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0, 64, 6, 0,
                     socket.inet_aton("127.0.0.1"), socket.inet_aton(dst))
    return b"\0" * 14 + ip + tcp + payload


def test_a_request_segment_gives_its_ip_host_and_line() -> None:
    frame = _frame("127.0.0.9", b"GET /p/1 HTTP/1.1\r\nHost: a.farm.test:80\r\n\r\n")
    assert request_line(frame) == ("127.0.0.9", "a.farm.test:80", "GET /p/1 HTTP/1.1")
    assert request_line(_frame("127.0.0.9", b"HTTP/1.1 200 OK\r\n\r\n")) is None  # an answer
    assert request_line(_frame("127.0.0.9", b"")) is None  # an ACK


def test_gaps_per_ip_below_the_spacing_count_as_violations() -> None:
    rows = [[10.000, "127.0.0.2", "a", "GET /p/0 HTTP/1.1"],
            [10.020, "127.0.0.2", "b", "GET /p/0 HTTP/1.1"],  # 20 ms after: a violation
            [10.120, "127.0.0.2", "a", "GET /p/1 HTTP/1.1"],
            [10.005, "127.0.0.3", "c", "GET /robots.txt HTTP/1.1"],  # not counted
            [10.010, "127.0.0.3", "c", "GET /p/0 HTTP/1.1"],
            [10.096, "127.0.0.3", "c", "GET /p/1 HTTP/1.1"]]  # 86 ms: within 15 ms
    violations, smallest = ip_gaps(rows, 0.1)
    assert violations == 1
    assert [ip for _, ip in smallest] == ["127.0.0.2", "127.0.0.3"]
    assert abs(smallest[0][0] - 0.020) < 1e-9
