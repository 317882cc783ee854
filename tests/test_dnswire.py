"""The UDP query path (scrapy_politeness.dns.query) against real loopback servers.

A small DNS server in the test (real UDP sockets on 127.0.0.1) answers as told:
a spoofed reply first (wrong id, wrong question, from another address), then
the right one, so each check dnspython makes is seen to hold on this path too.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import dns.exception
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import pytest
import pytest_twisted
from twisted.internet.defer import Deferred

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness.dns.cache import DnsCache
from scrapy_politeness.dns.query import UdpNameserver, udp_query

T = TypeVar("T")


def on_loop(coro: Awaitable[T]) -> Deferred[T]:
    return Deferred.fromFuture(asyncio.ensure_future(coro))


class Server(asyncio.DatagramProtocol):
    """Answers each query with ``reply(query)``: a list of (wire, from_other_address)."""

    def __init__(self, reply: Callable[[dns.message.Message], list[tuple[bytes, bool]]]) -> None:
        self.reply = reply
        self.sources: list[tuple[str, int]] = []
        self.transport: asyncio.DatagramTransport | None = None
        self.other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.other.bind(("127.0.0.3", 0))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.sources.append(addr)
        for wire, from_other in self.reply(dns.message.from_wire(data)):
            if from_other:
                self.other.sendto(wire, addr)
            else:
                assert self.transport is not None
                self.transport.sendto(wire, addr)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.other.close()


async def serve(reply: Callable[[dns.message.Message], list[tuple[bytes, bool]]],
                ) -> tuple[Server, int]:
    loop = asyncio.get_running_loop()
    transport, server = await loop.create_datagram_endpoint(
        lambda: Server(reply), local_addr=("127.0.0.1", 0))
    return server, transport.get_extra_info("sockname")[1]


def answer(query: dns.message.Message, ip: str, *, msg_id: int | None = None,
           name: str | None = None) -> bytes:
    response = dns.message.make_response(query)
    qname = query.question[0].name
    response.answer.append(dns.rrset.from_text(qname, 300, "IN", "A", ip))
    if msg_id is not None:
        response.id = msg_id
    if name is not None:  # the question of another query
        response.question = [dns.rrset.RRset(dns.name.from_text(name), dns.rdataclass.IN,
                                             dns.rdatatype.A)]
    return response.to_wire()


@pytest_twisted.ensureDeferred
async def test_only_the_answer_to_this_query_from_the_nameserver_is_taken() -> None:
    def reply(query: dns.message.Message) -> list[tuple[bytes, bool]]:
        return [
            (answer(query, "127.0.0.66"), True),  # from another address: dropped
            (answer(query, "127.0.0.67", msg_id=(query.id + 1) % 65536), False),  # wrong id
            (answer(query, "127.0.0.68", name="other.test."), False),  # wrong question
            (b"\x00garbage", False),  # does not parse
            (answer(query, "127.0.0.2"), False),
        ]

    async def run() -> str:
        server, port = await serve(reply)
        try:
            query = dns.message.make_query("a.test", "A")
            response = await udp_query(query, "127.0.0.1", port, 2.0)
            return str(response.answer[0][0])
        finally:
            server.close()

    assert await on_loop(run()) == "127.0.0.2"


@pytest_twisted.ensureDeferred
async def test_each_query_leaves_from_a_fresh_port() -> None:
    """RFC 5452: a spoofer must guess the source port as well as the id."""
    async def run() -> list[tuple[str, int]]:
        server, port = await serve(lambda q: [(answer(q, "127.0.0.2"), False)])
        try:
            await asyncio.gather(*(udp_query(dns.message.make_query(f"h{i}.test", "A"),
                                             "127.0.0.1", port, 2.0) for i in range(20)))
            return server.sources
        finally:
            server.close()

    sources = await on_loop(run())
    assert len(sources) == 20
    assert len({port for _, port in sources}) == 20


@pytest_twisted.ensureDeferred
async def test_no_acceptable_answer_times_out_and_frees_the_socket() -> None:
    def reply(query: dns.message.Message) -> list[tuple[bytes, bool]]:
        return [(answer(query, "127.0.0.67", msg_id=(query.id + 1) % 65536), False)]

    async def run() -> tuple[float, int]:
        server, port = await serve(reply)
        loop = asyncio.get_running_loop()
        readers = len(loop._selector.get_map())  # type: ignore[attr-defined]
        start = loop.time()
        try:
            with pytest.raises(dns.exception.Timeout):
                await udp_query(dns.message.make_query("a.test", "A"), "127.0.0.1", port, 0.3)
            return loop.time() - start, len(loop._selector.get_map()) - readers  # type: ignore[attr-defined]
        finally:
            server.close()

    took, readers_left = await on_loop(run())
    assert 0.25 <= took < 1.0
    assert readers_left == 0


@pytest_twisted.ensureDeferred
async def test_a_port_nobody_listens_on_times_out_as_a_silent_server() -> None:
    """The ICMP "port unreachable" a connected socket reports is read past (an
    unconnected one never sees it): the query waits out its timeout, as
    dnspython's own path does, so the resolver's retries behave the same."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nobody listens there now

    async def run() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(dns.exception.Timeout):
            await udp_query(dns.message.make_query("a.test", "A"), "127.0.0.1", port, 0.3)
        return loop.time() - start

    assert 0.25 <= await on_loop(run()) < 1.0


@pytest_twisted.ensureDeferred
async def test_a_retransmission_is_a_new_query_from_a_new_port() -> None:
    """The first query is lost: the lookup sends it again with a fresh id from a
    fresh port, so a spoofer learns nothing from watching the first."""
    ids: list[int] = []

    def reply(query: dns.message.Message) -> list[tuple[bytes, bool]]:
        ids.append(query.id)
        return [] if len(ids) == 1 else [(answer(query, "127.0.0.2"), False)]

    async def run() -> tuple[str | None, list[tuple[str, int]]]:
        server, port = await serve(reply)
        try:
            cache = DnsCache(nameservers=(("127.0.0.1", port),), hosts_file=None, timeout=0.8)
            return await cache.resolve("a.test"), server.sources
        finally:
            server.close()

    ip, sources = await on_loop(run())
    assert ip == "127.0.0.2"
    assert len(ids) == len(sources) == 2
    assert ids[0] != ids[1]
    assert sources[0][1] != sources[1][1]


@pytest_twisted.ensureDeferred
async def test_a_negative_answer_without_an_soa_is_transient() -> None:
    """RFC 2308 section 5: NXDOMAIN without the zone's SOA is not cached as a
    negative answer: it is believed briefly, and a retried request asks again."""
    def reply(query: dns.message.Message) -> list[tuple[bytes, bool]]:
        response = dns.message.make_response(query)
        response.set_rcode(dns.rcode.NXDOMAIN)  # no authority section
        return [(response.to_wire(), False)]

    async def run() -> tuple[str | None, bool, int]:
        server, port = await serve(reply)
        try:
            cache = DnsCache(nameservers=(("127.0.0.1", port),), hosts_file=None,
                             negative_ttl=30.0)
            ip = await cache.resolve("gone.test")
            asked = len(server.sources)
            await cache.resolve("gone.test", ask_again=True)
            return ip, cache.transient("gone.test"), len(server.sources) - asked
        finally:
            server.close()

    ip, transient, asked_again = await on_loop(run())
    assert ip is None
    assert transient
    assert asked_again == 1


@pytest.fixture(scope="module")
def farm() -> Iterator[Farm]:
    with Farm({"ips": ["127.0.0.2"], "dns_ttl": 300,
               "hosts": {f"h{i}.farm.test": {"ip": "127.0.0.2"} for i in range(10)}}) as f:
        yield f


@pytest_twisted.ensureDeferred
async def test_a_lookup_runs_as_one_task_on_plain_sockets(farm: Farm) -> None:
    """dnspython's asyncio path made a datagram transport and, per read, a
    ``wait_for`` task: per new host name, about as much CPU as building and
    parsing the messages. A lookup is now the single-flight task alone."""
    host, port = farm.dns.rsplit(":", 1)
    cache = DnsCache(nameservers=((host, int(port)),), hosts_file=None)
    assert all(isinstance(ns, UdpNameserver) for ns in cache._resolver.nameservers)  # type: ignore[union-attr]

    async def run() -> tuple[list[str | None], int, int]:
        loop = asyncio.get_running_loop()
        tasks = 0
        old_factory = loop.get_task_factory()

        def counting(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
            nonlocal tasks
            tasks += 1
            return asyncio.Task(coro, loop=loop)

        transports = 0
        make_endpoint = loop.create_datagram_endpoint

        async def counting_endpoint(*args: Any, **kwargs: Any) -> Any:
            nonlocal transports
            transports += 1
            return await make_endpoint(*args, **kwargs)

        loop.set_task_factory(counting)  # type: ignore[arg-type]
        loop.create_datagram_endpoint = counting_endpoint  # type: ignore[method-assign]
        try:
            ips = [await cache.resolve(f"h{i}.farm.test") for i in range(10)]
        finally:
            loop.set_task_factory(old_factory)
            del loop.create_datagram_endpoint
        return ips, tasks, transports

    ips, tasks, transports = await on_loop(run())
    assert ips == ["127.0.0.2"] * 10
    assert tasks == 10
    assert transports == 0
