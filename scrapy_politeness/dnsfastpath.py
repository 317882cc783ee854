"""The common DNS answer read straight from the wire, without dnspython's objects.

Nearly every name a crawl resolves gets one plain answer: NOERROR, one
question (ours), A records for the name, perhaps after a CNAME chain. Building
and parsing that through ``dns.message`` (rdatasets, rrsets, enums, immutable
rdata per record, ``dns.name.Name`` objects) and the resolver's ``Answer`` cost
about 235 µs of CPU per name on the bench machine, this module about 110 µs
(``python -m bench.dns_cost``), and fewer objects wake the garbage collector
less often. :func:`ask_a` sends
the same query (dnspython's default: RD, no EDNS) and reads only what it
needs. Names are compared as their lower-cased wire form (DNS names compare
case-insensitively, RFC 4343; length octets are below 64 and so never change
case); a name is read by dnspython's rules (a compression pointer points
before the piece that holds it, at most 16 of them), so a pointer loop cannot
make the reader spin and nothing dnspython would refuse is taken.

Anything else is not decided here: a truncated answer, an rcode other than
NOERROR, no A record at the end of the chain, a chain longer than
:data:`MAX_CHAIN`, a name that is not plain ASCII labels. :func:`ask_a`
returns :data:`ASK_RESOLVER` for those, and the caller asks dnspython's
resolver, whose answer is the one that counts (negative TTLs from the SOA,
SERVFAIL across nameservers, TCP, AAAA, IDNA).
"""

from __future__ import annotations

import random
import socket
import struct
from typing import Final

from .dnswire import exchange

__all__ = ["ASK_RESOLVER", "MAX_CHAIN", "ask_a", "qname_wire", "query_wire", "read_answer",
           "read_name"]

MAX_CHAIN: Final = 8
"""CNAME links followed here; a longer chain goes to the resolver."""

ASK_RESOLVER: Final = ("", -1.0)
"""A real answer to our query that this module does not decide."""

_HEADER = struct.Struct("!HHHHHH")
_RR = struct.Struct("!HHIH")  # type, class, TTL, rdlength
_QR, _TC, _RD = 0x8000, 0x0200, 0x0100
_OPCODE_RCODE = 0x780F  # opcode (must be QUERY, 0) and rcode (must be NOERROR, 0)
_A, _CNAME, _IN = 1, 5, 1
_QUESTION_TAIL = struct.pack("!HH", _A, _IN)
_MAX_NAME = 255  # octets of a name in wire form (RFC 1035 2.3.4)
_MAX_HOPS = 16  # compression pointers in one name, as dnspython allows
_random = random.SystemRandom()  # the id is half of what a spoofer must guess


class BadWire(ValueError):
    """A datagram that is not a well-formed DNS message."""


def qname_wire(hostname: str) -> bytes | None:
    """``hostname`` as a lower-case absolute name in wire form; None for a name
    this module leaves to dnspython (not ASCII, an empty or too long label)."""
    try:
        raw = hostname.rstrip(".").lower().encode("ascii")
    except UnicodeEncodeError:
        return None
    out = bytearray()
    for label in raw.split(b"."):
        if not 0 < len(label) < 64 or b"\\" in label:
            return None
        out.append(len(label))
        out += label
    out.append(0)
    return bytes(out) if len(out) <= _MAX_NAME else None


def query_wire(qname: bytes, qid: int) -> bytes:
    """The A/IN query for ``qname`` (wire form) with id ``qid``."""
    return _HEADER.pack(qid, _RD, 1, 0, 0, 0) + qname + _QUESTION_TAIL


def read_name(wire: bytes, pos: int) -> tuple[bytes, int]:
    """(the name at ``pos``, lower-cased wire form with pointers followed; the
    position after it). Raises :class:`BadWire` for a bad label type, a
    pointer that does not point backwards, a jump target running into the
    piece it was reached from, more than :data:`_MAX_HOPS` pointers, a name
    past the end or too long: dnspython's rules (``dns.name.from_wire_parser``)."""
    out = bytearray()
    end = -1
    start = pos  # where the piece being read began; a jump must land below it
    limit = len(wire)  # after a jump, the piece read must not reach the one before
    hops = 0
    while True:
        if pos >= limit:
            raise BadWire("name runs past its end")
        count = wire[pos]
        if count == 0:
            pos += 1
            break
        if count < 64:
            nxt = pos + 1 + count
            if nxt > limit:
                raise BadWire("label runs past its end")
            out += wire[pos:nxt]
            pos = nxt
        elif count >= 192:
            if pos + 1 >= limit:
                raise BadWire("pointer runs past its end")
            target = (count & 0x3F) << 8 | wire[pos + 1]
            hops += 1
            if target >= start or hops > _MAX_HOPS:
                raise BadWire("pointer does not point backwards, or too many")
            if end < 0:
                end = pos + 2
            limit, start, pos = start, target, target
        else:
            raise BadWire("bad label type")
    if len(out) >= _MAX_NAME:
        raise BadWire("name too long")
    out.append(0)
    return bytes(out).lower(), end if end >= 0 else pos


def read_answer(wire: bytes, qid: int, qname: bytes) -> tuple[str, float] | None:
    """(first address, TTL) from the answer to our query; :data:`ASK_RESOLVER`
    for an answer to it this module does not decide; None for a datagram that
    does not answer it (another id or question, not a response, garbage).

    The TTL is the least along the chain, as dnspython's ``Answer`` has it.
    """
    try:
        rid, flags, qdcount, ancount, _ns, _ar = _HEADER.unpack_from(wire)
        if rid != qid or not flags & _QR or qdcount != 1:
            return None
        pos = _HEADER.size
        end = pos + len(qname)
        if wire[pos:end].lower() != qname or wire[end:end + 4] != _QUESTION_TAIL:
            return None
        if flags & (_TC | _OPCODE_RCODE):
            return ASK_RESOLVER
        pos = end + 4
        records: list[tuple[bytes, int, int, bytes]] = []
        for _ in range(ancount):
            owner, pos = read_name(wire, pos)
            rdtype, rdclass, ttl, rdlength = _RR.unpack_from(wire, pos)
            pos += _RR.size
            rdata_end = pos + rdlength
            if rdata_end > len(wire):
                return None
            if rdclass == _IN and rdtype == _CNAME:
                target, after = read_name(wire, pos)
                if after != rdata_end:
                    return None
                records.append((owner, rdtype, ttl, target))
            elif rdclass == _IN and rdtype == _A:
                records.append((owner, rdtype, ttl, wire[pos:rdata_end]))
            pos = rdata_end
    except (BadWire, struct.error):
        return None
    return _follow(records, qname)


def _follow(records: list[tuple[bytes, int, int, bytes]], qname: bytes) -> tuple[str, float]:
    """The first A record of the chain from ``qname``, order-independent."""
    name, least = qname, -1
    for _ in range(MAX_CHAIN + 1):
        cname: tuple[bytes, int] | None = None
        for owner, rdtype, ttl, value in records:
            if owner != name:
                continue
            if rdtype == _A and len(value) == 4:
                return socket.inet_ntoa(value), float(ttl if least < 0 else min(least, ttl))
            if rdtype == _CNAME and cname is None:
                cname = (value, ttl)
        if cname is None:
            return ASK_RESOLVER
        name, least = cname[0], cname[1] if least < 0 else min(least, cname[1])
    return ASK_RESOLVER


async def ask_a(hostname: str, where: str, port: int, timeout: float) -> tuple[str, float]:
    """(address, TTL) of ``hostname``'s A record from ``where:port``, or
    :data:`ASK_RESOLVER`. Raises ``dns.exception.Timeout`` when nothing that
    answers the query came within ``timeout``, ``OSError`` when sending fails.
    """
    qname = qname_wire(hostname)
    if qname is None:
        return ASK_RESOLVER
    qid = _random.getrandbits(16)
    return await exchange(query_wire(qname, qid), where, port, timeout,
                          lambda wire: read_answer(wire, qid, qname))
