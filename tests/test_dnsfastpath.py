"""The common DNS answer read from the wire (scrapy_politeness.dnsfastpath).

Answers are built with dnspython's own message API (as a real server's would
be, with name compression), so each case is a well-formed message; the name
reader is held to dnspython's parser on arbitrary bytes. The last tests run
``DnsCache`` against the farm's real loopback DNS server with and without the
wire path and compare what each cached.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rrset
import dns.wire
import pytest
import pytest_twisted
from fakeclock import Clock
from hypothesis import example, given
from hypothesis import strategies as st
from test_dns import SPEC, _cache, resolve

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness.dnsfastpath import (
    ASK_RESOLVER,
    MAX_CHAIN,
    BadWire,
    qname_wire,
    query_wire,
    read_answer,
    read_name,
)
from scrapy_politeness.policy import FailureKind

QID = 0x1234
NAME = "www.example.test"
QNAME = qname_wire(NAME)
assert QNAME is not None


def response(records: list[tuple[str, int, str, str]], *, qid: int = QID, question: str = NAME,
             rcode: dns.rcode.Rcode = dns.rcode.NOERROR, flags: int = 0) -> bytes:
    """The answer to our query for ``question`` holding (owner, ttl, type, value) records."""
    query = dns.message.from_wire(query_wire(QNAME, qid))  # type: ignore[arg-type]
    asked = dns.rrset.RRset(dns.name.from_text(question), 1, 1)  # type: ignore[arg-type]
    query.question = [asked]  # type: ignore[list-item]
    reply = dns.message.make_response(query)
    reply.set_rcode(rcode)
    reply.flags |= flags
    for owner, ttl, rdtype, value in records:
        owner_name = dns.name.from_text(owner)
        reply.answer.append(dns.rrset.from_text(owner_name, ttl, "IN", rdtype, value))
    return reply.to_wire()


def test_the_query_is_the_one_dnspython_would_send() -> None:
    ours = dns.message.from_wire(query_wire(QNAME, QID))  # type: ignore[arg-type]
    theirs = dns.message.make_query(NAME, "A")
    theirs.id = QID
    assert ours == theirs
    assert ours.flags == dns.flags.RD
    assert ours.edns < 0


def test_a_plain_answer_gives_its_address_and_ttl() -> None:
    wire = response([(NAME, 300, "A", "192.0.2.7")])
    assert read_answer(wire, QID, QNAME) == ("192.0.2.7", 300.0)


def test_names_compare_without_regard_to_case() -> None:
    wire = response([("WWW.Example.TEST", 60, "A", "192.0.2.7")], question="WWW.EXAMPLE.test")
    assert read_answer(wire, QID, QNAME) == ("192.0.2.7", 60.0)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_cname_chain_is_followed_in_any_order_with_its_least_ttl(reverse: bool) -> None:
    records = [(NAME, 500, "CNAME", "a.example.test."),
               ("a.example.test", 40, "CNAME", "b.other."), ("b.other", 300, "A", "192.0.2.9")]
    wire = response(records[::-1] if reverse else records)
    assert read_answer(wire, QID, QNAME) == ("192.0.2.9", 40.0)


def test_a_chain_longer_than_max_chain_is_the_resolvers() -> None:
    names = [NAME] + [f"c{i}.example.test" for i in range(MAX_CHAIN + 1)]
    records = [(a, 60, "CNAME", b + ".") for a, b in itertools.pairwise(names)]
    wire = response([*records, (names[-1], 60, "A", "192.0.2.1")])
    assert read_answer(wire, QID, QNAME) is ASK_RESOLVER
    fits = response([*records[:MAX_CHAIN], (names[MAX_CHAIN], 60, "A", "192.0.2.1")])
    assert read_answer(fits, QID, QNAME) == ("192.0.2.1", 60.0)


@pytest.mark.parametrize("records", [
    [],  # NODATA: the resolver asks for AAAA next
    [(NAME, 60, "AAAA", "2001:db8::1")],
    [("other.example.test", 60, "A", "192.0.2.1")],  # an address, but not on the chain
    [(NAME, 60, "CNAME", "loop.test."), ("loop.test", 60, "CNAME", NAME + ".")],
])
def test_an_answer_without_an_address_on_the_chain_is_the_resolvers(
        records: list[tuple[str, int, str, str]]) -> None:
    assert read_answer(response(records), QID, QNAME) is ASK_RESOLVER


@pytest.mark.parametrize(("rcode", "flags"), [
    (dns.rcode.NXDOMAIN, 0), (dns.rcode.SERVFAIL, 0), (dns.rcode.REFUSED, 0),
    (dns.rcode.NOERROR, dns.flags.TC),
])
def test_failures_and_truncation_are_the_resolvers(rcode: dns.rcode.Rcode, flags: int) -> None:
    wire = response([(NAME, 60, "A", "192.0.2.1")], rcode=rcode, flags=flags)
    assert read_answer(wire, QID, QNAME) is ASK_RESOLVER


def test_datagrams_that_do_not_answer_our_query_are_read_past() -> None:
    good = response([(NAME, 60, "A", "192.0.2.1")])
    assert read_answer(response([(NAME, 60, "A", "192.0.2.1")], qid=QID + 1), QID, QNAME) is None
    other = response([("evil.test", 60, "A", "192.0.2.66")], question="evil.test")
    assert read_answer(other, QID, QNAME) is None
    assert read_answer(query_wire(QNAME, QID), QID, QNAME) is None  # not a response
    aaaa_question = good[:12 + len(QNAME)] + b"\x00\x1c\x00\x01" + good[12 + len(QNAME) + 4:]
    assert read_answer(aaaa_question, QID, QNAME) is None
    for cut in range(len(good)):
        assert read_answer(good[:cut], QID, QNAME) in (None, ASK_RESOLVER)


@pytest.mark.parametrize(("hostname", "expected"), [
    ("Example.COM", b"\x07example\x03com\x00"),
    ("example.com.", b"\x07example\x03com\x00"),
    ("a..b", None), ("", None), ("x" * 64 + ".test", None), ("bücher.test", None),
    (".".join(["a" * 63] * 4), None),  # 257 octets
    (".".join(["a" * 63] * 3 + ["a" * 61]),
     (b"\x3f" + b"a" * 63) * 3 + b"\x3d" + b"a" * 61 + b"\0"),  # 255 octets
])
def test_names_this_module_can_send(hostname: str, expected: bytes | None) -> None:
    assert qname_wire(hostname) == expected


def _dnspython_name(wire: bytes, pos: int) -> tuple[bytes, int] | None:
    try:
        parser = dns.wire.Parser(wire, pos)
        name = dns.name.from_wire_parser(parser)
    except (dns.exception.DNSException, ValueError):
        return None
    return name.to_wire().lower(), parser.current  # type: ignore[union-attr]


_pieces = st.one_of(
    st.just(b"\x00"),
    st.binary(min_size=0, max_size=5).map(lambda b: bytes((len(b),)) + b),  # a label
    st.integers(0, 63).map(lambda n: bytes((0xC0, n))),  # a pointer, often backwards
    st.binary(min_size=1, max_size=2),  # anything
)


@given(st.lists(_pieces, max_size=30).map(b"".join), st.integers(0, 80))
@example(b"\x03x\xc0\x00\x00", 2)  # the jump's label runs into the pointer that led to it
def test_a_name_read_here_is_the_name_dnspython_reads(wire: bytes, pos: int) -> None:
    """Never more lenient than dnspython's parser, and never reading otherwise."""
    pos %= len(wire) + 1
    try:
        ours: tuple[bytes, int] | None = read_name(wire, pos)
    except BadWire:
        ours = None
    theirs = _dnspython_name(wire, pos)
    if ours is not None:
        assert ours == theirs
    elif pos < len(wire) and theirs is not None:
        pytest.fail(f"dnspython reads {theirs} at {pos} of {wire!r}; the reader refused it")


@pytest.mark.parametrize("hops", [1, 16, 17])
def test_a_name_takes_at_most_sixteen_pointers(hops: int) -> None:
    # "a." at 0, then pointers at 3, 5, ...: the first to 0, each next one to the one before
    wire = b"\x01a\x00" + b"".join(bytes((0xC0, 1 + 2 * i if i else 0)) for i in range(hops))
    pos = len(wire) - 2
    if hops <= 16:
        assert read_name(wire, pos) == (b"\x01a\x00", len(wire))
    else:
        with pytest.raises(BadWire):
            read_name(wire, pos)
    assert _dnspython_name(wire, pos) == (None if hops > 16 else (b"\x01a\x00", len(wire)))


@given(st.lists(st.from_regex(r"[a-zA-Z0-9-]{1,12}", fullmatch=True), min_size=1, max_size=5),
       st.lists(st.integers(0, 4), max_size=6))
def test_compressed_names_dnspython_writes_are_read(labels: list[str], cuts: list[int]) -> None:
    names = [".".join(labels[min(c, len(labels) - 1):]) for c in cuts] + [".".join(labels)]
    wire = response([(name, 60, "CNAME", names[-1] + ".") for name in names])
    # parsed whole (None would be a parse failure); no address on the chain from our question
    assert read_answer(wire, QID, QNAME) is ASK_RESOLVER
    pos = 12 + len(QNAME) + 4
    for name in names:
        owner, pos = read_name(wire, pos)
        assert owner == qname_wire(name)
        pos += 10
        target, pos = read_name(wire, pos)
        assert target == qname_wire(names[-1])


# Against the farm's real DNS server -------------------------------------------------------

# The test_dns farm, and a chain whose CNAME expires before its address.
CHAIN_SPEC = {**SPEC, "hosts": {**SPEC["hosts"], "short.farm.test": {
    "ip": "127.0.0.2", "ttl": 12, "dns": {"mode": "cname", "target": "ok.farm.test"}}}}


@pytest.fixture(scope="module")
def farm() -> Iterator[Farm]:
    with Farm(CHAIN_SPEC) as f:
        yield f


def _what_was_cached(cache: Any, clock: Clock, name: str) -> tuple[Any, ...]:
    ip, expiry = cache._cache[name]
    return ip, round(expiry - clock.now, 3), cache.failure(name) if ip is None else None


# Every fault the farm's server makes, and a name it does not know; not "moving",
# whose address changes with every query.
@pytest.mark.parametrize("name", [
    *sorted(n for n in CHAIN_SPEC["hosts"] if not n.startswith(("mute", "moving"))),
    "nowhere.farm.test"])
@pytest_twisted.ensureDeferred
async def test_the_wire_path_caches_what_the_resolver_caches(farm: Farm, name: str) -> None:
    results = []
    for wire in (True, False):
        clock = Clock()
        cache = _cache(farm, clock, timeout=0.3, wire_answers=wire)
        await resolve(cache, name)
        results.append(_what_was_cached(cache, clock, name))
    assert results[0] == results[1]
    if name == "short.farm.test":  # the CNAME's 12 s, not the address's 300 s
        assert results[0][1] == 12.0


@pytest_twisted.ensureDeferred
async def test_a_plain_answer_needs_no_dnspython_message(farm: Farm,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []
    real = dns.message.from_wire

    def counting(wire: bytes, *args: Any, **kwargs: Any) -> dns.message.Message:
        parsed.append(wire)
        return real(wire, *args, **kwargs)

    monkeypatch.setattr(dns.message, "from_wire", counting)
    cache = _cache(farm)
    assert await resolve(cache, "ok.farm.test") == "127.0.0.2"
    assert await resolve(cache, "alias.farm.test") == "127.0.0.2"
    assert parsed == []
    assert await resolve(cache, "gone.farm.test") is None  # the resolver decides a failure
    assert len(parsed) == 1


@pytest_twisted.ensureDeferred
async def test_a_silent_server_is_asked_once_and_fails_once(farm: Farm) -> None:
    """A timeout on the wire path is the resolver's too (its lifetime is one
    timeout): the name is not asked again, so the failure costs one timeout."""
    before = farm.dns_queries().get("mute23.farm.test", 0)
    cache = _cache(farm, timeout=0.3)
    assert await resolve(cache, "mute23.farm.test") is None
    assert cache.failure("mute23.farm.test") is FailureKind.DNS_TIMEOUT
    assert farm.dns_queries().get("mute23.farm.test", 0) == before + 1
