"""Debian's tinyproxy, run unprivileged from a config the test writes.

``names`` gives the proxy a view of host names of its own: tinyproxy then runs
in a user and mount namespace (``unshare -r -m``) with an /etc/hosts of those
names bind-mounted over the real one, so the proxy resolves names the crawler
cannot (an internal name behind a corporate proxy). Loopback only: the
proxy's own DNS is a resolv.conf of the test's (``resolv_conf``; by default a
nameserver nothing listens on, so a name outside ``names`` fails at once
rather than waiting on the machine's resolver).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

LISTEN = "127.0.0.9"


def _free_port(ip: str) -> int:
    with socket.socket() as sock:
        sock.bind((ip, 0))
        return int(sock.getsockname()[1])


class Tinyproxy:
    """One tinyproxy process; ``url`` is what ``Request.meta["proxy"]`` takes."""

    def __init__(self, names: dict[str, str] | None = None, *, auth: tuple[str, str] | None = None,
                 listen: str = LISTEN, resolv_conf: str = "nameserver 127.0.0.1\n") -> None:
        if shutil.which("tinyproxy") is None:
            pytest.skip("tinyproxy is not installed (Debian package tinyproxy)")
        self.listen = listen
        self.names = names
        self.auth = auth
        self.resolv_conf = resolv_conf
        self._tmp = tempfile.TemporaryDirectory(prefix="tinyproxy-")
        self.dir = Path(self._tmp.name)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.listen}:{self.port}"

    @property
    def log(self) -> str:
        path = self.dir / "tinyproxy.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> Tinyproxy:
        self.port = _free_port(self.listen)
        lines = [f"Port {self.port}", f"Listen {self.listen}", "Timeout 30", "MaxClients 200",
                 "Allow 127.0.0.0/8", "LogLevel Connect", "DisableViaHeader Yes",
                 f"LogFile \"{self.dir / 'tinyproxy.log'}\""]
        if self.auth is not None:
            lines.append(f"BasicAuth {self.auth[0]} {self.auth[1]}")
        conf = self.dir / "tinyproxy.conf"
        conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
        cmd = ["tinyproxy", "-d", "-c", str(conf)]
        if self.names is not None:
            hosts = self.dir / "hosts"
            hosts.write_text("".join(f"{ip} {name}\n" for name, ip in self.names.items()),
                             encoding="utf-8")
            resolv = self.dir / "resolv.conf"
            resolv.write_text(self.resolv_conf, encoding="utf-8")
            cmd = ["unshare", "-r", "-m", "sh", "-c",
                   f'mount --bind "{hosts}" /etc/hosts && '
                   f'mount --bind "{resolv}" /etc/resolv.conf && exec tinyproxy -d -c "{conf}"']
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                if self.names is not None and ("unshare" in err or "mount" in err):
                    pytest.skip(f"no unprivileged mount namespace here: {err.strip()}")
                raise RuntimeError(f"tinyproxy exited ({self.proc.returncode}): {err}")
            try:
                with socket.create_connection((self.listen, self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("tinyproxy did not start listening within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None
        self._tmp.cleanup()

    def __enter__(self) -> Tinyproxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
