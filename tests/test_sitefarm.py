"""Tests for the sitefarm test harness (plain pytest, loopback only)."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from scrapy_politeness._sitefarm import (
    Arrival,
    Farm,
    FarmError,
    SpecError,
    demo_spec,
    host_gaps,
    ip_gaps,
    min_gap,
    parse_spec,
    starts_by,
    violations,
)

IP_A = "127.0.0.2"
IP_B = "127.0.0.3"
HTTP_DATE = "Wed, 21 Oct 2015 07:28:00 GMT"

SPEC: dict[str, Any] = {
    "ips": [IP_A, IP_B],
    "port": 0,
    "dns_ttl": 300,
    "hosts": {
        "a.farm.test": {"ip": IP_A, "kind": "normal", "pages": 4},
        "b.farm.test": {"ip": IP_B, "kind": "normal", "pages": 2, "ttl": 60},
        "slow.farm.test": {"ip": IP_A, "kind": "slow", "latency": 0.3, "pages": 2},
        "polite.farm.test": {"ip": IP_B, "kind": "normal", "crawl_delay": 1.5, "pages": 2},
        "robots.farm.test": {
            "ip": IP_A,
            "kind": "normal",
            "robots": "User-agent: *\nCrawl-delay: 2\n",
            "pages": 1,
        },
        "limited.farm.test": {
            "ip": IP_B,
            "kind": "rate_limited",
            "rate_interval": 0.3,
            "retry_after": 2,
            "pages": 3,
        },
        "broken.farm.test": {"ip": IP_B, "kind": "always_503", "pages": 2},
        "script.farm.test": {
            "ip": IP_A,
            "kind": "normal",
            "pages": 2,
            "status_script": [200, 503, 429, 200],
            "retry_after_header": HTTP_DATE,
        },
        "v6.farm.test": {"ip": IP_A, "ipv6": "::1"},
        "servfail.farm.test": {"ip": IP_A, "dns": {"mode": "servfail"}},
        "gone.farm.test": {"ip": IP_A, "dns": {"mode": "nxdomain"}},
        "silent.farm.test": {"ip": IP_A, "dns": {"mode": "timeout"}},
        "big.farm.test": {"ip": IP_B, "dns": {"mode": "truncate"}},
        "alias.farm.test": {"ip": IP_A, "dns": {"mode": "cname", "target": "b.farm.test"}},
        "rr.farm.test": {"ip": IP_A, "dns": {"mode": "rotate", "ips": [IP_A, IP_B]}},
        "only6.farm.test": {"ip": IP_A, "dns": {"mode": "v6only"}},
        "lossy.farm.test": {"ip": IP_A, "dns": {"mode": "drop_first"}},
        **{f"drop{i}.farm.test": {"ip": IP_B, "dns": {"mode": "drop", "fraction": 0.3}}
           for i in range(10)},
    },
}


@pytest.fixture(scope="module")
def running_farm() -> Iterator[Farm]:
    with Farm(SPEC) as farm:
        yield farm


@pytest.fixture
def farm(running_farm: Farm) -> Farm:
    """The shared farm with all per-run state cleared."""
    running_farm.reset()
    return running_farm


def get(
    farm: Farm, ip: str, host: str, path: str = "/", headers: dict[str, str] | None = None
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One GET to ``ip`` with an explicit Host header, on a fresh connection."""
    conn = http.client.HTTPConnection(ip, farm.port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": host, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.msg, resp.read()
    finally:
        conn.close()


def dns_udp(farm: Farm, name: str, rdtype: str = "A", timeout: float = 2) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    return dns.query.udp(query, farm.dns_host, port=farm.dns_port, timeout=timeout)


def dns_tcp(farm: Farm, name: str, rdtype: str = "A") -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    return dns.query.tcp(query, farm.dns_host, port=farm.dns_port, timeout=2)


def addresses(msg: dns.message.Message) -> list[str]:
    return [
        rdata.to_text()
        for rrset in msg.answer
        if rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA)
        for rdata in rrset
    ]


def recv_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


# --- HTTP -----------------------------------------------------------------


def test_ready_line_fields(farm: Farm) -> None:
    assert 20000 <= farm.port <= 60000
    assert farm.dns.startswith("127.0.0.1:")
    assert farm.control.startswith("127.0.0.1:")
    assert farm.url("a.farm.test") == f"http://a.farm.test:{farm.port}/"
    assert farm.url("a.farm.test", "/p/1") == f"http://a.farm.test:{farm.port}/p/1"


def test_vhost_routing_on_two_ips(farm: Farm) -> None:
    status, headers, body = get(farm, IP_A, f"a.farm.test:{farm.port}")
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert b"<title>a.farm.test</title>" in body
    for n in range(4):
        assert f'<a href="/p/{n}">'.encode() in body
    assert b'href="/p/4"' not in body

    status, _, body = get(farm, IP_B, "B.Farm.Test.")  # case and trailing dot
    assert status == 200
    assert b"<title>b.farm.test</title>" in body
    assert get(farm, IP_A, "nosuch.farm.test")[0] == 404


def test_pages(farm: Farm) -> None:
    status, _, body = get(farm, IP_A, "a.farm.test", "/p/3")
    assert status == 200
    assert b"page 3" in body
    assert get(farm, IP_A, "a.farm.test", "/p/4")[0] == 404
    assert get(farm, IP_A, "a.farm.test", "/nope")[0] == 404


def test_robots_variants(farm: Farm) -> None:
    assert get(farm, IP_A, "robots.farm.test", "/robots.txt")[2] == (
        b"User-agent: *\nCrawl-delay: 2\n"
    )
    assert get(farm, IP_B, "polite.farm.test", "/robots.txt")[2] == (
        b"User-agent: *\nCrawl-delay: 1.5\nAllow: /\n"
    )
    assert get(farm, IP_A, "a.farm.test", "/robots.txt")[2] == b"User-agent: *\nAllow: /\n"
    assert get(farm, IP_B, "broken.farm.test", "/robots.txt")[0] == 404


def test_rate_limited_answers_429_with_retry_after(farm: Farm) -> None:
    assert get(farm, IP_B, "limited.farm.test", "/p/0")[0] == 200
    status, headers, _ = get(farm, IP_B, "limited.farm.test", "/p/1")
    assert status == 429
    assert headers["Retry-After"] == "2"
    time.sleep(0.15)
    assert get(farm, IP_B, "limited.farm.test", "/p/1")[0] == 429  # 429s don't restart the clock
    time.sleep(0.2)  # now > 0.3 s after the last 200
    assert get(farm, IP_B, "limited.farm.test", "/p/1")[0] == 200


def test_always_503(farm: Farm) -> None:
    status, _, body = get(farm, IP_B, "broken.farm.test", "/")
    assert status == 503
    assert len(body) < 100


def test_slow_host_delays_without_blocking_others(farm: Farm) -> None:
    result: dict[str, float] = {}

    def fetch_slow() -> None:
        start = time.monotonic()
        assert get(farm, IP_A, "slow.farm.test", "/p/0")[0] == 200
        result["slow"] = time.monotonic() - start

    thread = threading.Thread(target=fetch_slow)
    thread.start()
    time.sleep(0.05)
    start = time.monotonic()
    assert get(farm, IP_A, "a.farm.test")[0] == 200
    fast = time.monotonic() - start
    thread.join()
    assert result["slow"] >= 0.3
    assert fast < 0.2


def test_status_script(farm: Farm) -> None:
    seen = []
    for _ in range(6):
        status, headers, _ = get(farm, IP_A, "script.farm.test", "/p/0")
        seen.append((status, headers.get("Retry-After")))
        if status == 503:  # robots.txt must not consume script entries
            assert get(farm, IP_A, "script.farm.test", "/robots.txt")[0] == 200
    assert seen == [
        (200, None),
        (503, HTTP_DATE),
        (429, HTTP_DATE),
        (200, None),
        (200, None),
        (200, None),
    ]


def test_arrivals_are_recorded(farm: Farm) -> None:
    before = time.monotonic()
    get(farm, IP_A, "a.farm.test", "/p/1")
    get(farm, IP_B, "b.farm.test:1234", "/robots.txt")
    get(farm, IP_B, "broken.farm.test", "/")
    get(farm, IP_A, "nosuch.farm.test", "/x?y=1")
    after = time.monotonic()
    arrivals = farm.arrivals()
    assert [(a.host, a.ip, a.path, a.status) for a in arrivals] == [
        ("a.farm.test", IP_A, "/p/1", 200),
        ("b.farm.test", IP_B, "/robots.txt", 200),
        ("broken.farm.test", IP_B, "/", 503),
        ("nosuch.farm.test", IP_A, "/x?y=1", 404),
    ]
    times = [a.t for a in arrivals]
    assert times == sorted(times)
    assert before <= times[0]
    assert times[-1] <= after
    assert all(abs(a.wall - time.time()) < 10 for a in arrivals)
    assert len({a.conn for a in arrivals}) == 4


def test_keep_alive_is_one_connection_with_precise_times(farm: Farm) -> None:
    conn = http.client.HTTPConnection(IP_A, farm.port, timeout=5)
    try:
        for path in ("/p/0", "/p/1"):
            conn.request("GET", path, headers={"Host": "a.farm.test"})
            resp = conn.getresponse()
            assert resp.status == 200
            assert resp.getheader("Connection") == "keep-alive"
            resp.read()
            time.sleep(0.2)
    finally:
        conn.close()
    get(farm, IP_A, "a.farm.test", "/p/2")
    first, second, third = farm.arrivals()
    assert first.conn == second.conn != third.conn
    assert 0.19 <= second.t - first.t < 0.5


def test_pipelined_requests_and_connection_close(farm: Farm) -> None:
    req = b"GET /p/%d HTTP/1.1\r\nHost: a.farm.test\r\n%s\r\n"
    with socket.create_connection((IP_A, farm.port), timeout=5) as sock:
        sock.sendall(req % (0, b"") + req % (1, b"Connection: close\r\n"))
        data = recv_all(sock)  # server closes after the second response
    assert data.count(b"HTTP/1.1 200 OK") == 2
    assert b"Connection: close" in data
    first, second = farm.arrivals()
    assert first.conn == second.conn
    assert first.t == second.t  # both arrived in the same packet


def test_http10_closes_by_default(farm: Farm) -> None:
    with socket.create_connection((IP_B, farm.port), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\nHost: b.farm.test\r\n\r\n")
        data = recv_all(sock)
    assert data.startswith(b"HTTP/1.1 200 OK")
    assert b"Connection: close" in data
    assert data.endswith(b"</html>\n")


def test_reset_clears_arrivals_and_dns_counts(farm: Farm) -> None:
    get(farm, IP_A, "a.farm.test")
    dns_udp(farm, "a.farm.test")
    assert farm.arrivals()
    assert farm.dns_queries() == {"a.farm.test": 1}
    farm.reset()
    assert farm.arrivals() == []
    assert farm.dns_queries() == {}


# --- DNS ------------------------------------------------------------------


def test_dns_a_record_and_ttl(farm: Farm) -> None:
    msg = dns_udp(farm, "A.Farm.Test")
    assert msg.rcode() == dns.rcode.NOERROR
    assert addresses(msg) == [IP_A]
    assert msg.answer[0].ttl == 300
    msg = dns_tcp(farm, "b.farm.test")
    assert addresses(msg) == [IP_B]
    assert msg.answer[0].ttl == 60  # per-host ttl wins over dns_ttl
    assert farm.dns_queries() == {"a.farm.test": 1, "b.farm.test": 1}


def test_dns_aaaa(farm: Farm) -> None:
    msg = dns_udp(farm, "a.farm.test", "AAAA")
    assert msg.rcode() == dns.rcode.NOERROR
    assert msg.answer == []
    assert addresses(dns_udp(farm, "v6.farm.test", "AAAA")) == ["::1"]
    assert dns_udp(farm, "a.farm.test", "MX").answer == []


def test_dns_nxdomain_and_servfail(farm: Farm) -> None:
    assert dns_udp(farm, "unknown.farm.test").rcode() == dns.rcode.NXDOMAIN
    assert dns_udp(farm, "gone.farm.test").rcode() == dns.rcode.NXDOMAIN
    assert dns_udp(farm, "servfail.farm.test").rcode() == dns.rcode.SERVFAIL
    assert farm.dns_queries()["unknown.farm.test"] == 1


def test_dns_timeout_never_answers(farm: Farm) -> None:
    with pytest.raises(dns.exception.Timeout):
        dns_udp(farm, "silent.farm.test", timeout=0.3)
    assert farm.dns_queries() == {"silent.farm.test": 1}


def test_dns_truncate_udp_then_tcp(farm: Farm) -> None:
    msg = dns_udp(farm, "big.farm.test")
    assert msg.flags & dns.flags.TC
    assert msg.answer == []
    msg = dns_tcp(farm, "big.farm.test")
    assert not msg.flags & dns.flags.TC
    assert addresses(msg) == [IP_B]


def test_dns_cname(farm: Farm) -> None:
    msg = dns_udp(farm, "alias.farm.test")
    cname, a_record = msg.answer
    assert cname.rdtype == dns.rdatatype.CNAME
    assert cname[0].to_text() == "b.farm.test."
    assert a_record.name.to_text() == "b.farm.test."
    assert addresses(msg) == [IP_B]


def test_dns_rotate(farm: Farm) -> None:
    answers = [addresses(dns_udp(farm, "rr.farm.test"))[0] for _ in range(4)]
    assert answers == [IP_A, IP_B, IP_A, IP_B]


def test_dns_v6only(farm: Farm) -> None:
    assert dns_udp(farm, "only6.farm.test", "A").answer == []
    assert addresses(dns_udp(farm, "only6.farm.test", "AAAA")) == ["::1"]


def test_dns_drop_first_loses_the_first_udp_query_of_a_name_only(farm: Farm) -> None:
    with pytest.raises(dns.exception.Timeout):
        dns_udp(farm, "lossy.farm.test", timeout=0.3)
    assert addresses(dns_udp(farm, "lossy.farm.test")) == [IP_A]  # the retransmission
    assert addresses(dns_udp(farm, "lossy.farm.test")) == [IP_A]
    assert farm.dns_dropped() == {"lossy.farm.test": 1}
    farm.reset()  # a new run loses the first query again
    assert addresses(dns_tcp(farm, "lossy.farm.test")) == [IP_A]  # TCP loses nothing
    with pytest.raises(dns.exception.Timeout):
        dns_udp(farm, "lossy.farm.test", timeout=0.3)


def _lost_queries(farm: Farm) -> dict[str, list[int]]:
    """Which of the first 10 queries of each drop name were lost."""
    lost: dict[str, list[int]] = {}
    for i in range(10):
        for n in range(10):
            try:
                dns_udp(farm, f"drop{i}.farm.test", timeout=0.05)
            except dns.exception.Timeout:
                lost.setdefault(f"drop{i}.farm.test", []).append(n)
    return lost


def test_dns_drop_loses_the_seeded_fraction_the_same_in_every_run(farm: Farm) -> None:
    first = _lost_queries(farm)
    assert farm.dns_dropped() == {name: len(ns) for name, ns in first.items()}
    assert 15 <= sum(map(len, first.values())) <= 45  # 30 % of 100, give or take
    farm.reset()
    assert _lost_queries(farm) == first


def test_dns_drop_fraction_is_checked() -> None:
    with pytest.raises(SpecError, match="fraction"):
        parse_spec({"ips": [IP_A], "hosts": {
            "x.farm.test": {"ip": IP_A, "dns": {"mode": "drop", "fraction": 1.5}}}})


# --- spec and lifecycle ---------------------------------------------------


def test_demo_spec_is_valid() -> None:
    spec = parse_spec(demo_spec())
    assert spec.ips == ("127.0.0.2", "127.0.0.3", "127.0.0.4")
    assert len(spec.hosts) == 8
    kinds = {h.kind for h in spec.hosts.values()}
    assert kinds == {"normal", "slow", "rate_limited", "always_503"}
    assert any(h.crawl_delay == 1.5 for h in spec.hosts.values())


def test_bad_spec_is_rejected_before_spawning() -> None:
    with pytest.raises(SpecError, match="loopback"):
        Farm({"ips": ["192.0.2.1"], "hosts": {}})  # TEST-NET-1: rejected, never contacted
    with pytest.raises(SpecError, match="kind"):
        Farm({"ips": [IP_A], "hosts": {"x.farm.test": {"ip": IP_A, "kind": "weird"}}})


@pytest.mark.integration
def test_start_failure_reports_child_stderr() -> None:
    with socket.socket() as blocker:
        blocker.bind((IP_A, 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        farm = Farm({"ips": [IP_A], "port": port, "hosts": {}})
        with pytest.raises(FarmError, match="could not bind"):
            farm.start()


# --- gap helpers ------------------------------------------------------------


def arrival(t: float, host: str, ip: str) -> Arrival:
    return Arrival(t=t, wall=1000 + t, host=host, ip=ip, path="/", status=200, conn=1)


def test_gap_helpers() -> None:
    arrivals = [
        arrival(3.0, "a", IP_A),
        arrival(1.0, "a", IP_A),
        arrival(2.5, "b", IP_A),
        arrival(0.0, "b", IP_B),
        arrival(5.0, "c", IP_B),
    ]
    assert starts_by(arrivals, lambda a: a.host) == {"a": [1.0, 3.0], "b": [0.0, 2.5], "c": [5.0]}
    assert min_gap([3.0, 1.0, 1.5]) == 0.5
    assert min_gap([1.0]) is None
    assert min_gap([]) is None
    assert host_gaps(arrivals) == {"a": 2.0, "b": 2.5}  # "c" has a single arrival
    assert ip_gaps(arrivals) == {IP_A: 0.5, IP_B: 5.0}


def test_violations() -> None:
    times = [0.0, 1.5, 2.9, 4.5, 4.6]
    assert violations(times, required=1.5, tolerance=0.0) == [(1.5, 2.9), (4.5, 4.6)]
    assert violations(times, required=1.5, tolerance=0.15) == [(4.5, 4.6)]
    assert violations([4.6, 0.0, 4.5], required=1.0, tolerance=0.0) == [(4.5, 4.6)]
    assert violations([1.0], required=1.0, tolerance=0.0) == []


def test_the_farms_outage_window_counts_from_its_first_request() -> None:
    """The farm's ``outage`` (used by tests/test_suspended_hosts.py)."""
    spec = parse_spec({"ips": ["127.0.0.2"], "hosts": {"h.test": {
        "ip": "127.0.0.2", "outage": {"after": 3, "for": 20, "mode": "refuse"}}}})
    host = spec.hosts["h.test"]
    assert host.down(105.0, None) is None  # no request yet
    assert [host.down(t, 100.0) for t in (102.9, 103.0, 122.9, 123.0)] == [
        None, "refuse", "refuse", None]
    with pytest.raises(SpecError, match="outage"):
        parse_spec({"ips": ["127.0.0.2"], "hosts": {"h.test": {
            "ip": "127.0.0.2", "outage": {"after": 3, "for": 20, "mode": "flaky"}}}})
