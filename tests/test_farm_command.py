"""``python -m scrapy_politeness farm``: starts the demo farm and says how to crawl it."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
READY = "scrapy crawl farm"


def _read_until_ready(proc: subprocess.Popen[str], timeout: float = 20.0) -> str:
    assert proc.stdout is not None
    out = ""
    deadline = time.monotonic() + timeout
    while READY not in out:
        left = deadline - time.monotonic()
        assert left > 0, f"no instructions printed: {out!r}"
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536).decode()
            assert chunk, f"the command exited ({proc.poll()}): {out!r}"
            out += chunk
    return out


@pytest.mark.integration
def test_farm_command_serves_the_urls_it_prints(tmp_path: Path) -> None:
    spider = tmp_path / "spiders" / "farm.py"
    with subprocess.Popen(
        [sys.executable, "-m", "scrapy_politeness", "farm", "--spider", str(spider)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            _check(proc, spider)
        finally:
            err = _interrupt(proc)
    assert proc.returncode == 0, err


def _interrupt(proc: subprocess.Popen[str]) -> str:
    """Ctrl-C the command; kill it (and fail) if it is still there 10 s later, so that
    the test never waits forever (a shell's background job inherits SIGINT ignored)."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=10)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        err = proc.communicate()[1]
        ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        raise AssertionError(f"the farm command did not stop on SIGINT (ignored here: "
                             f"{ignored}): {err[-2000:]}") from None


def _check(proc: subprocess.Popen[str], spider: Path) -> None:
    out = _read_until_ready(proc)
    dns = re.search(r"POLITENESS_DNS_NAMESERVERS = \['(127\.0\.0\.1:\d+)'\]", out)
    assert dns, out
    urls = re.findall(r"^  (http://\S+)$", out, flags=re.M)
    assert len(urls) >= 8
    assert "ADDONS = {\"scrapy_politeness.Addon\": 300}" in out
    # The spider file holds the same URLs and compiles.
    source = spider.read_text(encoding="utf-8")
    compile(source, str(spider), "exec")
    assert all(repr(u) in source for u in urls)
    # A printed URL answers (the farm's names are resolved by hand here: loopback IP).
    host, port = re.match(r"http://([^:/]+):(\d+)/", urls[0]).groups()  # type: ignore[union-attr]
    ip = re.search(rf"^  {re.escape(host)}\s+(127\.\S+)", out, flags=re.M)
    assert ip, out
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(f"http://{ip.group(1)}:{port}/", headers={"Host": host})
    with opener.open(req, timeout=10) as resp:
        assert resp.status == 200


@pytest.mark.integration
def test_a_new_project_crawls_the_farm_as_the_readme_says(tmp_path: Path) -> None:
    """Fresh HOME, `scrapy startproject`, the ADDONS line, the farm command, `scrapy crawl`."""
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    scrapy = [sys.executable, "-m", "scrapy"]
    subprocess.run([*scrapy, "startproject", "newbie"], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=60)
    project = tmp_path / "newbie"
    with (project / "newbie" / "settings.py").open("a", encoding="utf-8") as fh:
        fh.write('\nADDONS = {"scrapy_politeness.Addon": 300}\n')
    spider = project / "newbie" / "spiders" / "farm.py"
    with subprocess.Popen(
        [sys.executable, "-m", "scrapy_politeness", "farm", "--spider", str(spider)],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True) as farm:
        try:
            _read_until_ready(farm)
            crawl = subprocess.run([*scrapy, "crawl", "farm"], cwd=project, env=env,
                                   capture_output=True, text=True, timeout=180, check=False)
        finally:
            farm.send_signal(signal.SIGINT)
            farm.communicate(timeout=10)
    log = crawl.stdout + crawl.stderr
    assert crawl.returncode == 0, log[-4000:]
    assert "DOWNLOAD_DELAY = 1 (from project) is set to 0" in log  # startproject's value
    assert "scrapy-politeness on: per host start 0.5s" in log
    assert "Politeness report (hosts that held the crawl longest):" in log
    assert "Host broken.farm.test suspended" in log
    assert "'politeness/dispatched':" in log
    assert "'politeness/report'" not in log


def _free_port() -> int:
    """A port nothing listens on (TCP and UDP) on 127.0.0.1 right now."""
    import socket

    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        port = int(tcp.getsockname()[1])
        udp.bind(("127.0.0.1", port))
    return port


@pytest.mark.integration
def test_dns_port_fixes_the_farms_name_server_across_restarts(tmp_path: Path) -> None:
    """--port and --dns-port: the farm comes back where a spider written earlier looks."""
    import dns.message
    import dns.query

    http_port, dns_port = _free_port(), _free_port()
    command = [sys.executable, "-m", "scrapy_politeness", "farm", "--port", str(http_port),
               "--dns-port", str(dns_port), "--spider", str(tmp_path / "farm.py")]
    for _ in range(2):
        with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as proc:
            try:
                out = _read_until_ready(proc)
                assert f"POLITENESS_DNS_NAMESERVERS = ['127.0.0.1:{dns_port}']" in out
                assert f"farm --port {http_port} --dns-port {dns_port} --spider" in out
                query = dns.message.make_query("alpha.farm.test", "A")
                answer = dns.query.udp(query, "127.0.0.1", port=dns_port, timeout=5)
                assert answer.answer, answer
            finally:
                proc.send_signal(signal.SIGINT)
                _, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err


def test_a_stale_farm_spider_asks_whether_the_farm_is_running(tmp_path: Path) -> None:
    """A spider written for a farm that no longer answers stops with one clear ERROR line,
    no traceback, and ``scrapy`` exits with 1 (a script or CI notices)."""
    from scrapy_politeness._sitefarm.command import spider_source

    dead = f"127.0.0.1:{_free_port()}"
    source = spider_source(["http://fast1.farm.test:1/"], {"POLITENESS_DNS_NAMESERVERS": [dead]},
                           [dead], "python -m scrapy_politeness farm --port 1 --dns-port 2")
    (tmp_path / "farm.py").write_text(source, encoding="utf-8")
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    run = subprocess.run(
        [sys.executable, "-m", "scrapy", "runspider", "farm.py",
         "-s", 'ADDONS={"scrapy_politeness.Addon": 300}', "-s", "TELNETCONSOLE_ENABLED=False"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False)
    log = run.stdout + run.stderr
    assert run.returncode == 1, log[-4000:]
    errors = [line for line in log.splitlines() if " ERROR: " in line or " CRITICAL: " in line]
    assert len(errors) == 1, log[-4000:]
    assert f"The demo farm does not answer at {dead}: is the farm running?" in errors[0]
    assert "--port 1 --dns-port 2" in errors[0]
    assert "Traceback" not in log
    assert "Spider opened" not in log  # nothing was sent to a farm that is not there
