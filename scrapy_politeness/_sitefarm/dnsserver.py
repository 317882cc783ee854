"""Loopback authoritative DNS server for the farm's hostnames (UDP and TCP).

Lets the crawler resolve *.farm.test to per-host loopback IPs without touching
/etc/hosts, and lets tests inject DNS faults per host via the spec's "dns" key:
servfail, nxdomain, timeout (no answer), truncate (TC over UDP, normal over
TCP), cname (CNAME + target's records), rotate (successive A answers cycle
through "ips"), several (every A answer holds all of "ips", in order), v6only
(no A, AAAA ::1), nodata (the name exists with no address at all),
drop_first (the first UDP query of the name is lost, later ones answered),
drop (a "fraction" of its UDP queries lost at random: the n-th query of a
name is lost or not by the spec's "dns_seed", the same in every run).
Unknown names get NXDOMAIN. NXDOMAIN
and empty answers carry the zone's SOA in the authority section, as a real
server does (RFC 2308): its MINIMUM (the spec's "dns_negative_ttl") is how
long a resolver may cache the negative answer.
"""

from __future__ import annotations

import asyncio
import random
import struct
from typing import cast

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from scrapy_politeness._sitefarm.spec import HostSpec, normalise_name
from scrapy_politeness._sitefarm.state import FarmState


class DnsResolver:
    """Builds the farm's answer for one query message (transport-independent)."""

    def __init__(self, state: FarmState) -> None:
        self._state = state

    def respond(self, wire: bytes, over_tcp: bool) -> bytes | None:
        """Wire-format answer, or None to stay silent (timeout mode, garbage)."""
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return None
        reply = self.answer(query, over_tcp)
        return None if reply is None else reply.to_wire(want_shuffle=False)  # "several": in order

    def answer(self, query: dns.message.Message, over_tcp: bool) -> dns.message.Message | None:
        """Answer a parsed query; None means 'never answer'."""
        resp = dns.message.make_response(query)
        resp.flags |= dns.flags.AA
        if not query.question:
            resp.set_rcode(dns.rcode.FORMERR)
            return resp
        question = query.question[0]
        name = normalise_name(question.name.to_text())
        self._state.dns_queries[name] += 1
        host = self._state.spec.hosts.get(name)
        if host is None:
            resp.set_rcode(dns.rcode.NXDOMAIN)
            resp.authority.append(self._soa())
            return resp
        if question.rdclass != dns.rdataclass.IN:
            return resp
        mode = host.dns.mode if host.dns else None
        if mode == "timeout" or (not over_tcp and self._lost(host)):
            return None
        if mode == "servfail":
            resp.set_rcode(dns.rcode.SERVFAIL)
        elif mode == "nxdomain":
            resp.set_rcode(dns.rcode.NXDOMAIN)
            resp.authority.append(self._soa())
        elif mode == "truncate" and not over_tcp:
            resp.flags |= dns.flags.TC
        elif mode == "cname" and host.dns and host.dns.target:
            target = host.dns.target
            resp.answer.append(
                dns.rrset.from_text(question.name, self._ttl(host), "IN", "CNAME", target + ".")
            )
            target_host = self._state.spec.hosts.get(target)
            if target_host is not None:
                owner = dns.name.from_text(target)
                resp.answer.extend(self._addresses(target_host, owner, question.rdtype))
        else:
            resp.answer.extend(self._addresses(host, question.name, question.rdtype))
            if not resp.answer:  # NODATA: the name exists, not this type
                resp.authority.append(self._soa())
        return resp

    def _lost(self, host: HostSpec) -> bool:
        """Whether this UDP query of ``host`` is lost (drop modes; counted)."""
        fault = host.dns
        if fault is None or fault.mode not in ("drop_first", "drop"):
            return False
        nth = self._state.dns_udp_seen[host.name]
        self._state.dns_udp_seen[host.name] = nth + 1
        if fault.mode == "drop_first":
            lost = nth == 0
        else:  # seeded per (name, n): independent of the order names are asked in
            lost = random.Random(f"{self._state.spec.dns_seed}:{host.name}:{nth}").random() \
                < fault.fraction
        if lost:
            self._state.dns_dropped[host.name] += 1
        return lost

    def _soa(self) -> dns.rrset.RRset:
        minimum = self._state.spec.dns_negative_ttl
        return dns.rrset.from_text(
            "farm.test.", minimum, "IN", "SOA",
            f"ns.farm.test. hostmaster.farm.test. 1 3600 600 86400 {minimum}")

    def _ttl(self, host: HostSpec) -> int:
        return host.ttl if host.ttl is not None else self._state.spec.dns_ttl

    def _addresses(
        self, host: HostSpec, owner: dns.name.Name, rdtype: int
    ) -> list[dns.rrset.RRset]:
        mode = host.dns.mode if host.dns else None
        if mode == "nodata":
            return []
        ttl = self._ttl(host)
        if rdtype == dns.rdatatype.A:
            if mode == "v6only":
                return []
            if mode == "several" and host.dns:
                return [dns.rrset.from_text_list(owner, ttl, "IN", "A", list(host.dns.ips))]
            ip = host.ip
            if mode == "rotate" and host.dns:
                pos = self._state.rotate_pos[host.name]
                self._state.rotate_pos[host.name] = pos + 1
                ip = host.dns.ips[pos % len(host.dns.ips)]
            return [dns.rrset.from_text(owner, ttl, "IN", "A", ip)]
        if rdtype == dns.rdatatype.AAAA:
            v6 = host.ipv6 or ("::1" if mode == "v6only" else None)
            return [] if v6 is None else [dns.rrset.from_text(owner, ttl, "IN", "AAAA", v6)]
        return []


class DnsUdp(asyncio.DatagramProtocol):
    """UDP transport for DnsResolver."""

    def __init__(self, resolver: DnsResolver) -> None:
        self._resolver = resolver
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, int]) -> None:
        reply = self._resolver.respond(data, over_tcp=False)
        if reply is not None and self._transport is not None:
            self._transport.sendto(reply, addr)


class DnsTcp(asyncio.Protocol):
    """TCP transport for DnsResolver (2-byte length-prefixed messages)."""

    def __init__(self, resolver: DnsResolver) -> None:
        self._resolver = resolver
        self._transport: asyncio.Transport | None = None
        self._buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while len(self._buf) >= 2:
            (size,) = struct.unpack("!H", self._buf[:2])
            if len(self._buf) < 2 + size:
                return
            wire, self._buf = self._buf[2 : 2 + size], self._buf[2 + size :]
            reply = self._resolver.respond(wire, over_tcp=True)
            if reply is not None and self._transport is not None:
                self._transport.write(struct.pack("!H", len(reply)) + reply)


async def start_dns(
    state: FarmState, host: str = "127.0.0.1", port: int = 0
) -> tuple[int, asyncio.DatagramTransport, asyncio.Server]:
    """Bind UDP and TCP on one port of ``host`` (0: any free one); return (port, udp, tcp)."""
    loop = asyncio.get_running_loop()
    resolver = DnsResolver(state)
    last_error: OSError | None = None
    for _ in range(1 if port else 50):
        # Let the kernel choose the UDP port, then claim the same number for TCP.
        try:
            udp, _proto = await loop.create_datagram_endpoint(
                lambda: DnsUdp(resolver), local_addr=(host, port)
            )
        except OSError as exc:
            last_error = exc
            continue
        bound = int(udp.get_extra_info("sockname")[1])
        try:
            tcp = await loop.create_server(lambda: DnsTcp(resolver), host, bound)
        except OSError as exc:
            last_error = exc
            udp.close()
            continue
        return bound, udp, tcp
    raise OSError(f"could not bind DNS on {host}:{port or 'any'}: {last_error}")
