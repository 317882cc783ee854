"""nginx's own rate limiter as a test and bench server: ``limit_req``, judged from its log.

A polite crawler is judged by servers it did not write. This writes an nginx
configuration (vhosts sharing 127.0.0.x addresses, ``limit_req`` zones per
``$server_name`` and per ``$server_addr``, burst 0: a leaky bucket that refuses
any request closer than ``1 / rate`` to the last one it took) and runs Debian's
nginx unprivileged: ``nginx -c FILE -p DIR -g 'daemon off;'``. A refusal is
nginx's default 503, or 429 with ``Retry-After`` (``limit_req_status 429`` and
an ``error_page`` that adds the header). The access log, ``$msec $host $status
$uri``, is the judge: server-side instants, no client clock.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = ["NginxFarm", "NginxSpec", "Verdict", "Vhost", "judge", "nginx_binary"]


@dataclass(frozen=True)
class Vhost:
    """One server name on one address. ``rate``: requests/s its own zone takes
    (None: unlimited); ``status``: its refusals (503, nginx's default, or 429);
    ``retry_after``: seconds sent with a 429 (0: no header)."""

    name: str
    ip: str
    rate: float | None = None
    status: int = 503
    retry_after: int = 0


@dataclass(frozen=True)
class NginxSpec:
    vhosts: tuple[Vhost, ...]
    ip_rates: dict[str, float] = field(default_factory=dict)  # a zone per server address
    pages: int = 40

    def lower_bound(self) -> float:
        """T*: the least wall time the servers' own limits allow for every page
        (first start to last), per vhost and per address zone."""
        bound = 0.0
        per_ip: dict[str, int] = defaultdict(int)
        for v in self.vhosts:
            per_ip[v.ip] += self.pages
            if v.rate:
                bound = max(bound, (self.pages - 1) / v.rate)
        for ip, rate in self.ip_rates.items():
            bound = max(bound, (per_ip[ip] - 1) / rate)
        return bound


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if Path(p).exists()), None)


def _rate(rate: float) -> str:
    """nginx takes whole requests per second or per minute."""
    if rate == int(rate):
        return f"{int(rate)}r/s"
    per_minute = rate * 60
    if abs(per_minute - round(per_minute)) > 1e-9:
        raise ValueError(f"nginx cannot express {rate} r/s")
    return f"{round(per_minute)}r/m"


def _zone(name: str) -> str:
    return "z_" + "".join(c if c.isalnum() else "_" for c in name)


def config_text(spec: NginxSpec, root: Path, port: int) -> str:
    """The whole nginx.conf for ``spec`` (every path under ``root``)."""
    lines = [
        "worker_processes 1;", f"pid {root}/nginx.pid;", f"error_log {root}/error.log warn;",
        "events { worker_connections 1024; }", "http {",
        "  log_format judge '$msec $host $status $request_uri';",
        f"  access_log {root}/access.log judge;",
        *(f"  {kind}_temp_path {root}/tmp_{kind};"
          for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")),
        "  keepalive_timeout 30;",
    ]
    for v in spec.vhosts:
        if v.rate:
            lines.append(f"  limit_req_zone $server_name zone={_zone(v.name)}:1m "
                         f"rate={_rate(v.rate)};")
    for ip, rate in spec.ip_rates.items():
        lines.append(f"  limit_req_zone $server_addr zone={_zone(ip)}:1m rate={_rate(rate)};")
    for v in spec.vhosts:
        lines += ["  server {", f"    listen {v.ip}:{port};", f"    server_name {v.name};"]
        if v.rate:
            lines.append(f"    limit_req zone={_zone(v.name)};")
        if v.ip in spec.ip_rates:
            lines.append(f"    limit_req zone={_zone(v.ip)};")
        lines.append(f"    limit_req_status {v.status};")
        if v.status == 429 and v.retry_after:
            lines += ["    error_page 429 @refused;",
                      "    location @refused {",
                      f"      add_header Retry-After {v.retry_after} always;",
                      "      return 429 'rate limited\\n';", "    }"]
        # A content-phase answer: a ``return`` would answer in the rewrite phase,
        # before limit_req (preaccess) ever counted the request; empty_gif reads
        # no file (the workers run as nobody when started as root).
        lines += ["    location / { empty_gif; }", "  }"]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _free_port(ips: set[str]) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind((next(iter(ips)), 0))
            port = int(s.getsockname()[1])
        try:
            with contextlib.ExitStack() as stack:
                for ip in ips:
                    sock = stack.enter_context(socket.socket())
                    sock.bind((ip, port))
            return port
        except OSError:
            continue
    raise RuntimeError("no port free on every address")


class NginxFarm:
    """Runs nginx for ``spec`` in ``root`` while the ``with`` block lasts."""

    def __init__(self, spec: NginxSpec, root: Path) -> None:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("nginx is not installed (Debian package nginx)")
        self.binary = binary
        self.spec = spec
        self.root = root
        self.port = _free_port({v.ip for v in spec.vhosts})
        self.hosts_file = root / "hosts"
        self.conf = root / "nginx.conf"
        self._proc: subprocess.Popen[bytes] | None = None

    def url(self, host: str, page: int) -> str:
        return f"http://{host}:{self.port}/p{page}"

    def urls(self) -> list[str]:
        """Every page of every vhost, the vhosts interleaved."""
        return [self.url(v.name, p) for p in range(self.spec.pages) for v in self.spec.vhosts]

    def static_hosts(self) -> dict[str, str]:
        return {v.name: v.ip for v in self.spec.vhosts}

    def __enter__(self) -> NginxFarm:
        self.root.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(config_text(self.spec, self.root, self.port), encoding="utf-8")
        self.hosts_file.write_text("".join(f"{v.ip} {v.name}\n" for v in self.spec.vhosts),
                                   encoding="utf-8")
        self._proc = subprocess.Popen(
            [self.binary, "-c", str(self.conf), "-p", str(self.root), "-e",
             str(self.root / "error.log"), "-g", "daemon off;"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10.0
        for v in self.spec.vhosts:
            while True:
                try:
                    socket.create_connection((v.ip, self.port), timeout=0.5).close()
                    break
                except OSError:
                    if self._proc.poll() is not None or time.monotonic() > deadline:
                        err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                        self.__exit__(None, None, None)
                        raise RuntimeError(f"nginx did not start: {err}") from None
                    time.sleep(0.02)
        self.reset_log()
        return self

    def reset_log(self) -> None:
        """Start the judged log afresh (nginx appends to the same open file)."""
        (self.root / "access.log").write_bytes(b"")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stderr is not None:
                self._proc.stderr.close()
            self._proc = None

    def log(self) -> list[tuple[float, str, int, str]]:
        """(instant, host, status, uri) for every request nginx answered."""
        out = []
        for line in (self.root / "access.log").read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 4:
                out.append((float(parts[0]), parts[1], int(parts[2]), parts[3]))
        return out


@dataclass(frozen=True)
class Verdict:
    wall: float  # first request to last, server side
    bound: float  # T*
    requests: int
    rejections: int
    pages: int  # distinct pages answered 200
    expected: int
    ra_violations: int  # requests inside a Retry-After window their host was given

    @property
    def ratio(self) -> float:
        return self.wall / self.bound if self.bound else float("nan")

    @property
    def rejected_share(self) -> float:
        return self.rejections / self.requests if self.requests else 0.0


def judge(spec: NginxSpec, log: list[tuple[float, str, int, str]]) -> Verdict:
    """What nginx saw: wall, rejections, pages, and Retry-After violations."""
    ra = {v.name: v.retry_after if v.status == 429 else 0 for v in spec.vhosts}
    until: dict[str, float] = {}
    violations = 0
    pages = set()
    rejections = 0
    for at, host, status, uri in sorted(log):
        if at < until.get(host, 0.0) - 0.001:  # nginx logs milliseconds
            violations += 1
        if status == 200:
            pages.add((host, uri))
        else:
            rejections += 1
            if status == 429 and ra.get(host):
                until[host] = max(until.get(host, 0.0), at + ra[host])
    times = [entry[0] for entry in log]
    wall = max(times) - min(times) if times else 0.0
    return Verdict(wall, spec.lower_bound(), len(log), rejections, len(pages),
                   spec.pages * len(spec.vhosts), violations)
