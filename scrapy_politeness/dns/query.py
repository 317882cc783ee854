"""One DNS query over UDP on a plain socket: dnspython's nameserver, less plumbing.

dnspython's asyncio backend wraps every UDP query in a datagram transport, a
protocol, an ``asyncio.Queue`` and a ``wait_for`` task per read; at a new host
name per request that plumbing cost about as much as building and parsing the
messages. :class:`UdpNameserver` keeps everything else of dnspython (its
resolver: retries, CNAME chains, NXDOMAIN and SERVFAIL handling, the fall back
to TCP on a truncated answer) and sends each query from a NEW non-blocking
socket, read with ``loop.add_reader``:

- a fresh socket per query keeps a fresh random source port per query (RFC
  5452: the port and the message id together are what a spoofer must guess;
  one shared socket would leave only the id);
- the socket is ``connect``-ed to the nameserver, so the kernel drops
  datagrams from any other source (dnspython checks the source address; a
  connected socket does the same check before Python sees the datagram);
- an answer is accepted only if it parses and answers this query (its id and
  question: dnspython's ``Message.is_response``); anything else is read past,
  as dnspython does with ``ignore_errors``, until the timeout. So is an ICMP
  error, which only a connected socket reports (anyone can send one: failing
  the name on it would let a spoofer who guessed the port alone do that).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import dns.exception
import dns.inet
import dns.message
import dns.nameserver
import dns.resolver

__all__ = ["UdpNameserver", "exchange", "on_plain_sockets", "udp_query"]

_T = TypeVar("_T")

_MAX_DATAGRAM = 65535


class UdpNameserver(dns.nameserver.Do53Nameserver):
    """A Do53 nameserver whose UDP queries go through :func:`udp_query`.

    TCP (after a truncated answer), a fixed source address or port, and an
    event loop without ``add_reader`` take dnspython's own path.
    """

    async def async_query(  # noqa: PLR0917 - dnspython's signature
        self, request: dns.message.QueryMessage, timeout: float, source: str | None,
        source_port: int, max_size: bool, backend: Any, one_rr_per_rrset: bool = False,
        ignore_trailing: bool = False,
    ) -> dns.message.Message:
        if not (max_size or source or source_port):
            try:
                return await udp_query(request, self.address, self.port, timeout,
                                       one_rr_per_rrset=one_rr_per_rrset,
                                       ignore_trailing=ignore_trailing)
            except NotImplementedError:  # a loop without add_reader (Windows' proactor)
                pass
        return await super().async_query(
            request, timeout, source, source_port, max_size, backend,
            one_rr_per_rrset, ignore_trailing)


def on_plain_sockets(resolver: dns.resolver.BaseResolver) -> list[str | dns.nameserver.Nameserver]:
    """The resolver's nameservers, its plain Do53 ones as :class:`UdpNameserver`
    (DNS over HTTPS or TLS ones are left as they are)."""
    out: list[str | dns.nameserver.Nameserver] = []
    for ns in resolver.nameservers:
        if isinstance(ns, str) and dns.inet.is_address(ns):
            out.append(UdpNameserver(ns, resolver.nameserver_ports.get(ns, resolver.port)))
        elif type(ns) is dns.nameserver.Do53Nameserver:
            out.append(UdpNameserver(ns.address, ns.port))
        else:
            out.append(ns)
    return out


async def udp_query(query: dns.message.Message, where: str, port: int, timeout: float, *,
                    one_rr_per_rrset: bool = False,
                    ignore_trailing: bool = False) -> dns.message.Message:
    """Send ``query`` to ``where:port`` from a new socket; its answer.

    Raises ``dns.exception.Timeout`` when no acceptable answer came within
    ``timeout`` seconds, ``dns.message.Truncated`` for a truncated answer (the
    resolver then asks over TCP), ``OSError`` when sending fails.
    """
    def accept(wire: bytes) -> dns.message.Message | None:
        return _parse(wire, query, one_rr_per_rrset, ignore_trailing)

    return await exchange(query.to_wire(), where, port, timeout, accept)


async def exchange(wire: bytes, where: str, port: int, timeout: float,
                   accept: Callable[[bytes], _T | None]) -> _T:
    """Send ``wire`` to ``where:port`` from a new socket; the first datagram
    ``accept`` takes (returns not None for).

    ``accept`` returns None for a datagram that does not answer this query
    (it is read past); whatever it raises ends the exchange. Raises
    ``dns.exception.Timeout`` when nothing was accepted within ``timeout``
    seconds, ``OSError`` when sending fails.
    """
    loop = asyncio.get_running_loop()
    sock = socket.socket(dns.inet.af_for_address(where), socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        sock.connect((where, port))  # binds an ephemeral port the kernel picks at random
        reader = _Reader(loop)
        fd = sock.fileno()
        loop.add_reader(fd, reader.readable)  # first: a loop without it sends nothing twice
        timer = loop.call_later(timeout, reader.expire)
        try:
            sock.send(wire)
            while True:
                await reader.waiter
                answer = _read(sock, accept)
                if answer is not None:
                    return answer
                if reader.expired:
                    raise dns.exception.Timeout(timeout=timeout)  # type: ignore[no-untyped-call]
                reader.waiter = loop.create_future()
        finally:
            loop.remove_reader(fd)
            timer.cancel()
    finally:
        sock.close()


class _Reader:
    """Wakes the query when its socket is readable or its time is up."""

    __slots__ = ("expired", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.waiter: asyncio.Future[None] = loop.create_future()
        self.expired = False

    def readable(self) -> None:
        if not self.waiter.done():
            self.waiter.set_result(None)

    def expire(self) -> None:
        self.expired = True
        self.readable()


def _read(sock: socket.socket, accept: Callable[[bytes], _T | None]) -> _T | None:
    """The first datagram waiting that ``accept`` takes; None when none does."""
    while True:
        try:
            wire = sock.recv(_MAX_DATAGRAM)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:  # an ICMP error (unreachable, filtered): read past, see above
            continue
        answer = accept(wire)
        if answer is not None:
            return answer


def _parse(wire: bytes, query: dns.message.Message, one_rr_per_rrset: bool,
           ignore_trailing: bool) -> dns.message.Message | None:
    """``wire`` as dnspython's message if it answers ``query``; None otherwise."""
    try:
        answer = dns.message.from_wire(
            wire, keyring=query.keyring, request_mac=query.mac,
            one_rr_per_rrset=one_rr_per_rrset, ignore_trailing=ignore_trailing,
            raise_on_truncation=True)
    except dns.message.Truncated as exc:
        if query.is_response(exc.message()):  # type: ignore[no-untyped-call]
            raise
        return None
    except Exception:  # garbage on the wire: read past it, as dnspython does
        return None
    return answer if query.is_response(answer) else None
