"""Start, stop, kill and restart a throwaway ``redis-server`` on 127.0.0.1.

Outside CI the Redis tests skip when no ``redis-server`` binary exists; in CI
(``CI=true``) they fail instead, so a broken image cannot pass silently.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from scrapy_politeness.middleware import PolitenessMiddleware


def require_redis_server() -> str:
    """The ``redis-server`` path; skip (or fail in CI) the test when missing."""
    path = shutil.which("redis-server")
    if path is None:
        reason = ("redis-server is not installed (apt-get install -y redis-server); "
                  "the Redis backend tests need a real server")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One ``redis-server`` without persistence on a free loopback port."""

    def __init__(self, binary: str, port: int | None = None) -> None:
        self.binary = binary
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra_args: list[str] = []  # e.g. ["--requirepass", "pw"] for the next start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
             *self.extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                if self.command("PING") in ("+PONG", "-NOAUTH Authentication required."):
                    return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not answer PING within 10 s")

    def kill(self) -> None:
        """SIGKILL: the crawl sees its connections die without a goodbye."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(5)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def restart(self) -> RedisServer:
        """Start again on the same port (with an empty dataset: no persistence)."""
        self.stop()
        return self.start()

    def command(self, *args: str) -> str:
        """One RESP command over a raw socket; returns the first reply line."""
        payload = f"*{len(args)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(payload.encode())
            return sock.recv(65536).decode().split("\r\n", 1)[0]


def redis_server_fixture() -> Iterator[RedisServer]:
    """The body of the ``redis_server`` fixtures of the Redis test modules."""
    server = RedisServer(require_redis_server()).start()
    try:
        yield server
    finally:
        server.stop()


T = TypeVar("T")


def aio(coro: Coroutine[Any, Any, T]) -> Deferred[T]:
    """Run an asyncio coroutine on the reactor's loop from a Twisted test."""
    return Deferred.fromFuture(asyncio.ensure_future(coro))


async def opened_on_this_loop(mw: PolitenessMiddleware) -> asyncio.AbstractEventLoop:
    """Give ``mw`` (from :func:`shared_middleware`) the running loop and open its
    backend, as the spider's opening would; the loop."""
    assert mw.backend is not None
    loop = mw.loop = asyncio.get_running_loop()  # the setter gives it to the shared sync too
    await mw.backend.open()
    return loop


def shared_middleware(server: RedisServer) -> PolitenessMiddleware:
    """A politeness middleware on ``server`` in a namespace of its own, every
    spacing 0.3 s, no send margin, no hosts file (the shared-sync tests)."""
    import uuid

    from scrapy.utils.test import get_crawler

    from scrapy_politeness.middleware import PolitenessMiddleware

    return PolitenessMiddleware.from_crawler(get_crawler(settings_dict={
        "POLITENESS_BACKEND": server.url, "POLITENESS_NAMESPACE": f"t:{uuid.uuid4().hex[:8]}",
        "POLITENESS_DEFAULT": 0.3, "POLITENESS_FLOOR": 0.3, "POLITENESS_IP_FLOOR": 0.3,
        "POLITENESS_SEND_MARGIN": 0.0, "POLITENESS_DNS_HOSTS_FILE": None}))
