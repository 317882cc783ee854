"""The broad-crawl bench's servers: one nginx for every host, one dnsmasq for every name.

A broad crawl meets many hosts on many machines. Both servers are Debian's,
started from configurations written here (every path under one directory):

- nginx with one catch-all ``server`` listening on every loopback address of
  the spec (127.1.x.y): any ``Host`` gets ``/robots.txt`` (allow all) and any
  page (a small HTML body). The access log, ``$msec $host $server_addr $status
  $request_uri``, judges the crawl from the server side;
- dnsmasq on 127.0.0.1 at a free port (not 53), answering the zone
  ``broad.test`` only: one wildcard sub-zone per address
  (``address=/s017.broad.test/127.1.0.18``), so ``h42.s017.broad.test`` and
  every other name under it resolve to that address; any other name is
  NXDOMAIN (``local=/broad.test/``), nothing is forwarded.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = ["ZONE", "BroadSpec", "Dnsmasq", "LogLine", "NginxCatchAll", "binaries_missing",
           "read_log"]

ZONE = "broad.test"
ROBOTS = "User-agent: *\\nAllow: /\\n"
PAGE = "<html><head><title>page</title></head><body><p>a page of a broad crawl</p></body></html>"


@dataclass(frozen=True)
class BroadSpec:
    """``hosts`` names spread round-robin over ``ips`` loopback addresses."""

    hosts: int
    ips: int

    def ip(self, j: int) -> str:
        """The j-th address: 127.1.0.1 ... 127.1.0.250, 127.1.1.1 ..."""
        return f"127.1.{j // 250}.{j % 250 + 1}"

    def host(self, i: int) -> str:
        return f"h{i}.s{i % self.ips}.{ZONE}"

    def addresses(self) -> list[str]:
        return [self.ip(j) for j in range(self.ips)]


@dataclass(frozen=True)
class LogLine:
    at: float  # nginx's $msec: when it logged the answer (server side)
    host: str
    ip: str
    status: int
    uri: str


def binaries_missing() -> list[str]:
    return [name for name in ("nginx", "dnsmasq") if _binary(name) is None]


def _binary(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if Path(p).exists()), None)


def _free_port(ips: list[str], kind: int = socket.SOCK_STREAM) -> int:
    """A port free on every address (the kernel picks one on the first). For UDP, free
    for TCP too: dnsmasq listens on both, and a crawl running beside holds thousands of
    loopback TCP ports (dnsmasq then failed with "Address already in use")."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind((ips[0], 0))
            port = int(s.getsockname()[1])
        try:
            for ip in ips[1:]:
                with socket.socket(socket.AF_INET, kind) as s:
                    s.bind((ip, port))
            if kind == socket.SOCK_DGRAM:
                for ip in ips:
                    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                        s.bind((ip, port))
            return port
        except OSError:
            continue
    raise RuntimeError("no port free on every address")


def _free_udp_and_tcp_port() -> int:
    """A port of 127.0.0.1 free for UDP and TCP both (dnsmasq binds the two)."""
    for _ in range(50):
        port = _free_port(["127.0.0.1"], socket.SOCK_DGRAM)
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    raise RuntimeError("no port free for UDP and TCP")


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class NginxCatchAll:
    """nginx serving robots.txt and pages for any host on every address of ``spec``."""

    def __init__(self, spec: BroadSpec, root: Path) -> None:
        binary = _binary("nginx")
        if binary is None:
            raise RuntimeError("nginx is not installed (Debian package nginx)")
        self.binary, self.spec, self.root = binary, spec, root
        self.port = _free_port(spec.addresses())
        self.access_log = root / "access.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def config(self) -> str:
        root = self.root
        listens = "".join(f"    listen {ip}:{self.port} default_server;\n"
                          for ip in self.spec.addresses())
        return (
            "worker_processes 1;\n"
            f"pid {root}/nginx.pid;\n"
            f"error_log {root}/error.log warn;\n"
            f"worker_rlimit_nofile {2 * self.spec.ips + 8192};\n"
            "events { worker_connections 8192; }\n"
            "http {\n"
            "  log_format judge '$msec $host $server_addr $status $request_uri';\n"
            f"  access_log {root}/access.log judge;\n"
            + "".join(f"  {kind}_temp_path {root}/tmp_{kind};\n"
                      for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            + "  keepalive_timeout 30;\n"
            "  default_type text/html;\n"
            "  server {\n"
            f"{listens}"
            "    server_name _;\n"
            f"    location = /robots.txt {{ default_type text/plain; return 200 \"{ROBOTS}\"; }}\n"
            f"    location / {{ return 200 '{PAGE}'; }}\n"
            "  }\n"
            "}\n")

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"

    def __enter__(self) -> NginxCatchAll:
        self.root.mkdir(parents=True, exist_ok=True)
        conf = self.root / "nginx.conf"
        conf.write_text(self.config(), encoding="utf-8")
        self._proc = subprocess.Popen(
            [self.binary, "-c", str(conf), "-p", str(self.root), "-e",
             str(self.root / "error.log"), "-g", "daemon off;"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20.0
        for ip in (self.spec.ip(0), self.spec.ip(self.spec.ips - 1)):
            while True:
                try:
                    socket.create_connection((ip, self.port), timeout=0.5).close()
                    break
                except OSError:
                    if self._proc.poll() is not None or time.monotonic() > deadline:
                        self.__exit__(None, None, None)
                        err = (self.root / "error.log").read_text(errors="replace")
                        raise RuntimeError(f"nginx did not start: {err[-500:]}") from None
                    time.sleep(0.05)
        self.reset_log()
        return self

    def reset_log(self) -> None:
        """Start the judged log afresh (nginx appends to the same open file)."""
        self.access_log.write_bytes(b"")

    def crawled(self) -> bool:
        """Whether a request came since the log was reset."""
        return self.access_log.stat().st_size > 0

    def log(self) -> list[LogLine]:
        return read_log(self.access_log)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _stop(self._proc)
        self._proc = None


def read_log(path: Path) -> list[LogLine]:
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 5:
            out.append(LogLine(float(parts[0]), parts[1], parts[2], int(parts[3]), parts[4]))
    return out


class Dnsmasq:
    """dnsmasq answering ``*.s<j>.broad.test`` with address j, on 127.0.0.1:port."""

    def __init__(self, spec: BroadSpec, root: Path) -> None:
        binary = _binary("dnsmasq")
        if binary is None:
            raise RuntimeError("dnsmasq is not installed (Debian package dnsmasq-base)")
        self.binary, self.spec, self.root = binary, spec, root
        self.port = _free_udp_and_tcp_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """As ``POLITENESS_DNS_NAMESERVERS`` takes it."""
        return f"127.0.0.1:{self.port}"

    def config(self) -> str:
        lines = [f"port={self.port}", "listen-address=127.0.0.1", "bind-interfaces",
                 "no-resolv", "no-hosts", "no-poll", f"pid-file={self.root}/dnsmasq.pid",
                 f"local=/{ZONE}/", "local-ttl=3600", "cache-size=0"]
        lines += [f"address=/s{j}.{ZONE}/{self.spec.ip(j)}" for j in range(self.spec.ips)]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> Dnsmasq:
        import dns.resolver

        self.root.mkdir(parents=True, exist_ok=True)
        conf = self.root / "dnsmasq.conf"
        conf.write_text(self.config(), encoding="utf-8")
        with open(self.root / "dnsmasq.err", "wb") as stderr:
            self._proc = subprocess.Popen(
                [self.binary, "--keep-in-foreground", f"--conf-file={conf}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = ["127.0.0.1"]
        resolver.port = self.port
        deadline = time.monotonic() + 10.0
        while True:
            try:
                answer = resolver.resolve(self.spec.host(self.spec.ips - 1), "A", lifetime=0.5)
                assert answer[0].address == self.spec.ip(self.spec.ips - 1), answer[0]
                return self
            except dns.exception.DNSException:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    err = (self.root / "dnsmasq.err").read_text(errors="replace")
                    raise RuntimeError(f"dnsmasq did not start: {err[-500:]}") from None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _stop(self._proc)
        self._proc = None
