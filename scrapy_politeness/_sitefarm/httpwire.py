"""Minimal HTTP/1.x wire handling: incremental request parsing and response bytes.

The parser records, for every request, the time its FIRST byte reached the
socket — including later requests on a keep-alive or pipelined connection —
because the farm's whole purpose is measuring request spacing server-side.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from urllib.parse import urlsplit

MAX_HEAD = 64 * 1024


@dataclass
class Request:
    """A parsed request plus the arrival time of its first byte."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes
    t: float
    wall: float

    @property
    def path(self) -> str:
        """Path without query; absolute-form targets are reduced to their path."""
        return urlsplit(self.target).path or "/"

    @property
    def origin_target(self) -> str:
        """Path plus query as the client sent it (absolute-form reduced)."""
        parts = urlsplit(self.target)
        path = parts.path or "/"
        return f"{path}?{parts.query}" if parts.query else path

    @property
    def host(self) -> str:
        """Host header (or host of an absolute-form target), as sent."""
        netloc = urlsplit(self.target).netloc
        return netloc or self.headers.get("host", "")

    @property
    def keep_alive(self) -> bool:
        """HTTP/1.1 persists unless 'close'; HTTP/1.0 only with 'keep-alive'."""
        tokens = {t.strip().lower() for t in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


@dataclass
class BadRequest:
    """A request that could not be parsed; the connection closes after answering."""

    reason: str
    t: float
    wall: float


@dataclass
class Response:
    """What a handler wants sent back."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def normalise_host(raw: str) -> str:
    """Host header -> bare lower-case name: strip port, brackets and trailing dot."""
    raw = raw.strip()
    if raw.startswith("["):
        raw = raw[1 : raw.find("]")] if "]" in raw else raw[1:]
    elif raw.count(":") == 1:
        raw = raw.split(":", 1)[0]
    return raw.rstrip(".").lower()


def reason_phrase(status: int) -> str:
    """Standard reason phrase, or a generic one for unusual codes."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def encode_response(resp: Response, *, keep_alive: bool, head: bool = False) -> bytes:
    """Serialise a response with Content-Length and an explicit Connection header."""
    lines = [
        f"HTTP/1.1 {resp.status} {reason_phrase(resp.status)}",
        f"Date: {formatdate(usegmt=True)}",
        f"Content-Type: {resp.content_type}",
        f"Content-Length: {len(resp.body)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    if not any(name.lower() == "server" for name, _ in resp.headers):
        lines.insert(2, "Server: sitefarm")
    lines.extend(f"{name}: {value}" for name, value in resp.headers)
    head_bytes = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head_bytes if head else head_bytes + resp.body


class RequestReader:
    """Turns a byte stream into Requests, each stamped with its first byte's time."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._offset = 0  # stream offset of self._buf[0]
        # (stream offset where a received chunk starts, monotonic, wall)
        self._chunks: deque[tuple[int, float, float]] = deque()
        self.failed = False

    def feed(self, data: bytes, t: float, wall: float) -> list[Request | BadRequest]:
        """Add received bytes (and when they arrived); return completed requests."""
        if self.failed or not data:
            return []
        self._chunks.append((self._offset + len(self._buf), t, wall))
        self._buf += data
        out: list[Request | BadRequest] = []
        while not self.failed:
            item = self._next()
            if item is None:
                break
            out.append(item)
        return out

    def _time_at(self, stream_offset: int) -> tuple[float, float]:
        while len(self._chunks) > 1 and self._chunks[1][0] <= stream_offset:
            self._chunks.popleft()
        _, t, wall = self._chunks[0]
        return t, wall

    def _consume(self, n: int) -> None:
        del self._buf[:n]
        self._offset += n

    def _next(self) -> Request | BadRequest | None:
        # Tolerate stray CRLFs between requests (RFC 9112 section 2.2).
        while self._buf[:2] == b"\r\n" or self._buf[:1] == b"\n":
            self._consume(2 if self._buf[:2] == b"\r\n" else 1)
        if not self._buf:
            return None
        t, wall = self._time_at(self._offset)
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                return self._fail("request head too large", t, wall)
            return None
        head = bytes(self._buf[:end]).decode("latin-1")
        request_line, *header_lines = head.split("\r\n")
        parts = request_line.split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return self._fail(f"bad request line {request_line!r}", t, wall)
        headers: dict[str, str] = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                return self._fail(f"bad header line {line!r}", t, wall)
            headers[name.strip().lower()] = value.strip()
        if "transfer-encoding" in headers:
            return self._fail("chunked request bodies are not supported", t, wall)
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            return self._fail("bad Content-Length", t, wall)
        if length < 0:
            return self._fail("bad Content-Length", t, wall)
        total = end + 4 + length
        if len(self._buf) < total:
            return None
        body = bytes(self._buf[end + 4 : total])
        self._consume(total)
        return Request(parts[0], parts[1], parts[2], headers, body, t, wall)

    def _fail(self, reason: str, t: float, wall: float) -> BadRequest:
        self.failed = True
        self._buf.clear()
        return BadRequest(reason, t, wall)
