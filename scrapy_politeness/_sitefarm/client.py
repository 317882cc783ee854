"""Farm: start/stop the farm subprocess and talk to its control endpoint.

The farm runs in its own process so its timestamps are not disturbed by the
crawler's reactor (and so Twisted and asyncio loops never share a thread).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from scrapy_politeness._sitefarm.arrival import Arrival
from scrapy_politeness._sitefarm.spec import parse_spec

READY_TIMEOUT = 15.0
STOP_TIMEOUT = 5.0


class FarmError(RuntimeError):
    """The farm process failed to start or to answer."""


class Farm:
    """A running site farm; use as a context manager or call start()/stop()."""

    def __init__(self, spec: dict[str, Any]) -> None:
        parse_spec(spec)  # fail fast, in the caller's process, on a bad spec
        self.spec = spec
        self.port = 0
        self.dns = ""
        self.control = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._spec_path: Path | None = None
        self._stderr: IO[bytes] | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> Farm:
        """Launch the server process and wait for its ready line."""
        if self._proc is not None:
            raise FarmError("farm already started")
        fd, name = tempfile.mkstemp(prefix="sitefarm-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(self.spec, fh)
        self._spec_path = Path(name)
        # stderr goes to a file: a pipe nobody drains could block the server.
        self._stderr = tempfile.TemporaryFile(prefix="sitefarm-stderr-")  # noqa: SIM115
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "scrapy_politeness._sitefarm", "serve", "--spec", name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        try:
            ready = self._read_ready_line()
        except BaseException:
            self.stop()
            raise
        self.port = int(ready["port"])
        self.dns = str(ready["dns"])
        self.control = str(ready["control"])
        return self

    def _read_ready_line(self) -> dict[str, Any]:
        assert self._proc is not None
        assert self._proc.stdout is not None
        out = self._proc.stdout
        deadline = time.monotonic() + READY_TIMEOUT
        data = b""
        while b"\n" not in data:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FarmError(f"farm not ready after {READY_TIMEOUT:g}s{self._stderr_tail()}")
            readable, _, _ = select.select([out], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(out.fileno(), 4096)
            if not chunk:
                self._proc.wait(timeout=STOP_TIMEOUT)
                raise FarmError(
                    f"farm exited with code {self._proc.returncode}{self._stderr_tail()}"
                )
            data += chunk
        try:
            ready = json.loads(data.split(b"\n", 1)[0])
        except ValueError as exc:
            raise FarmError(f"bad ready line {data!r}{self._stderr_tail()}") from exc
        if not isinstance(ready, dict):
            raise FarmError(f"bad ready line {data!r}")
        return ready

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace").strip()
        return f"; stderr:\n{text[-4000:]}" if text else ""

    def stop(self) -> None:
        """Terminate the server (kill after 5 s) and clean up temp files."""
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self._spec_path is not None:
            self._spec_path.unlink(missing_ok=True)
            self._spec_path = None

    def __enter__(self) -> Farm:
        return self.start() if self._proc is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- helpers ---------------------------------------------------------
    @property
    def dns_host(self) -> str:
        """IP part of ``dns``."""
        return self.dns.rsplit(":", 1)[0]

    @property
    def dns_port(self) -> int:
        """Port part of ``dns``."""
        return int(self.dns.rsplit(":", 1)[1])

    def url(self, host: str, path: str = "/") -> str:
        """URL of ``path`` on virtual host ``host``, e.g. http://a.farm.test:P/."""
        if not path.startswith("/"):
            path = "/" + path
        return f"http://{host}:{self.port}{path}"

    def arrivals(self) -> list[Arrival]:
        """All requests the farm received so far, ordered by first-byte time."""
        return [Arrival.from_dict(raw) for raw in self._call("GET", "/arrivals")]

    def dns_queries(self) -> dict[str, int]:
        """Number of DNS queries per (lower-case, dotless) name."""
        return {str(k): int(v) for k, v in self._call("GET", "/dns_queries").items()}

    def dns_dropped(self) -> dict[str, int]:
        """Number of UDP queries per name left unanswered on purpose (drop modes)."""
        return {str(k): int(v) for k, v in self._call("GET", "/dns_dropped").items()}

    def reset(self) -> None:
        """Clear arrivals, DNS counts, rate-limit / script / rotation state."""
        self._call("POST", "/reset")

    def _call(self, method: str, path: str) -> Any:
        if not self.control:
            raise FarmError("farm not started")
        req = urllib.request.Request(
            f"http://{self.control}{path}", method=method, data=b"" if method == "POST" else None
        )
        # Never let an environment proxy intercept loopback control traffic.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(req, timeout=10) as resp:
            return json.loads(resp.read())
