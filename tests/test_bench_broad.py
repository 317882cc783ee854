"""bench/broad.py end to end, small: nginx and dnsmasq started, the plugin and stock crawling.

A harness test, not a timing assertion: 300 hosts over 30 loopback addresses,
robots.txt + one page each, then the JOBDIR variant (stopped with SIGINT,
resumed). It checks that the bench's machinery reports what the servers saw
(every page, robots.txt once per host, 0 violations for the plugin) and sane
figures (throughput, CPU, RSS samples, the first request's delay).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.broad import Row, ratios, run_scenario, table
from bench.broad_jobdir import jobdir_table, run_jobdir
from bench.broad_servers import BroadSpec, Dnsmasq, NginxCatchAll, binaries_missing

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(bool(binaries_missing()), reason="needs nginx and dnsmasq")]

SPEC = BroadSpec(hosts=300, ips=30)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[NginxCatchAll, Dnsmasq, Path]]:
    root = tmp_path_factory.mktemp("broad")
    with NginxCatchAll(SPEC, root / "nginx") as nginx, Dnsmasq(SPEC, root / "dns") as dns:
        yield nginx, dns, root


def test_the_servers_answer_any_host_on_its_own_address(
        servers: tuple[NginxCatchAll, Dnsmasq, Path]) -> None:
    import urllib.request

    import dns.resolver

    nginx, dnsmasq, _ = servers
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = ["127.0.0.1"]
    resolver.port = dnsmasq.port
    assert [resolver.resolve(SPEC.host(i), "A")[0].address for i in (0, 31, 299)] == [
        SPEC.ip(0), SPEC.ip(1), SPEC.ip(29)]
    nginx.reset_log()
    with urllib.request.urlopen(urllib.request.Request(
            f"http://{SPEC.ip(1)}:{nginx.port}/robots.txt", headers={"Host": SPEC.host(31)}),
            timeout=5) as resp:
        assert resp.read() == b"User-agent: *\nAllow: /\n"
    deadline = time.monotonic() + 5.0  # nginx logs a request after its answer is sent
    while not (lines := nginx.log()) and time.monotonic() < deadline:
        time.sleep(0.05)
    [line] = lines
    assert (line.host, line.ip, line.status, line.uri) == (SPEC.host(31), SPEC.ip(1), 200,
                                                           "/robots.txt")


def _check_sane(row: Row) -> None:
    t = row.traffic
    assert row.run.ok, row.run.log[-2000:]
    assert t.pages == SPEC.hosts
    assert t.robots == SPEC.hosts
    assert t.repeated == 0
    assert t.requests == 2 * SPEC.hosts
    assert t.rate > 0
    assert t.rate_first_fifth > 0
    assert t.rate_last_fifth > 0
    assert row.run.cpu > 0
    assert row.cpu_ms_per_request > 0
    assert 20 * 1024 < row.run.peak_rss_kb < 2048 * 1024
    assert row.run.samples
    assert row.rss_mib(row.mark("closed")) is not None
    assert row.first_delay is not None
    assert 0 <= row.first_delay < 60
    assert row.stat("finish_reason") == "finished"
    assert row.tracebacks == 0
    assert row.open_files_errors == 0


def test_once_plugin_and_stock_side_by_side(servers: tuple[NginxCatchAll, Dnsmasq, Path]) -> None:
    nginx, dnsmasq, root = servers
    rows = run_scenario("once", SPEC, 1, nginx=nginx, dns=dnsmasq, configs=("plugin", "stock"),
                        workdir=root, idle=1.0, stock_delay=1.0)
    plugin, stock = rows
    for row in rows:
        _check_sane(row)
    assert (plugin.traffic.host_viol, plugin.traffic.ip_viol) == (0, 0)
    # The judge sees the stock crawl's IP gaps: several hosts share each address.
    assert stock.traffic.min_ip_gap is not None
    assert stock.stat("politeness/dispatched") is None
    assert plugin.stat("politeness/dispatched") == 2 * SPEC.hosts
    lines = table(rows)
    assert len(lines) == 4
    assert lines[2].startswith("| once | plugin | 600 | 300/300 |")
    summary = ratios(rows)
    assert summary[0].startswith("- once: plugin RSS start list in -> last request ")
    assert any(line.startswith("- once: RSS start list in, plugin - stock ") for line in summary)
    assert summary[-1].startswith("- once: plugin/stock requests/s ")


def test_jobdir_stopped_and_resumed(servers: tuple[NginxCatchAll, Dnsmasq, Path]) -> None:
    nginx, dnsmasq, root = servers
    [row] = run_jobdir(SPEC, nginx=nginx, dns=dnsmasq, configs=("plugin",), workdir=root,
                       stop_after=3.0, stock_delay=1.0)
    assert row.first.result["stats"]["finish_reason"] == "shutdown", row.first.log[-2000:]
    assert row.first.close_seconds is not None
    assert row.first.close_seconds >= 0
    assert 0 < row.pages_first < row.expected == 2 * SPEC.hosts
    assert row.files > 0
    assert row.resumed.result["stats"]["finish_reason"] == "finished"
    assert row.missing == 0
    assert row.violations == (0, 0)
    assert "Too many open files" not in row.first.log + row.resumed.log
    assert jobdir_table([row])[2].startswith("| plugin | 300 x 2 | shutdown |")
