"""Running one broad-bench crawl from the bench: a subprocess, its RSS, its CPU, its stop.

The crawl (:mod:`bench.broad_crawl`) runs in a child process; this side reads
its RSS from ``/proc/<pid>/status`` every 0.25 s (a sampler thread, so a busy
crawl loop does not delay the samples), its user + sys CPU from ``os.wait4``,
and can stop it like a user would: SIGINT after some seconds (Scrapy's
graceful shutdown), timing how long it takes to exit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .broad_dns import ENV_VAR
from .runner import ROOT

__all__ = ["ChildRun", "run_child"]


@dataclass
class ChildRun:
    ok: bool
    result: dict[str, Any]  # what the child wrote: stats, marks, queue
    cpu: float  # user + sys of the crawl process
    peak_rss_kb: int  # ru_maxrss
    samples: list[tuple[float, int]] = field(default_factory=list)  # (time.time(), RSS kB)
    log: str = ""
    exit_code: int = 0
    stopped_at: float | None = None  # time.time() of the SIGINT
    exited_at: float = 0.0
    done_at: float | None = None  # time.time() once the crawl's main() had written its result

    @property
    def close_seconds(self) -> float | None:
        """From the SIGINT to the process's exit."""
        return None if self.stopped_at is None else self.exited_at - self.stopped_at

    def close_steps(self) -> dict[str, float]:
        """Seconds each step of the close took, from the SIGINT to the exit: ``signal`` (to
        the engine's "Closing spider"), ``spider`` (to "Spider closed": in-flight
        downloads, the scheduler's close, ``spider_closed`` handlers), ``engine`` (to
        ``engine_stopped``: the download handlers' close), ``reactor`` (to the reactor's
        stop), ``result`` (the bench writing its result) and ``exit`` (the interpreter's
        own teardown). Steps whose marks are missing are left out."""
        marks = self.result.get("marks", {})
        instants = [("signal", marks.get("closing")), ("spider", marks.get("spider_closed")),
                    ("engine", marks.get("engine_stopped")),
                    ("reactor", marks.get("reactor_stopped")), ("result", self.done_at),
                    ("exit", self.exited_at)]
        steps, last = {}, self.stopped_at
        for name, at in instants:
            if last is not None and at is not None:
                steps[name] = at - last
                last = at
        return steps


def _rss_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run_child(job: dict[str, Any], workdir: Path, *, dns: str, stop_after: float | None = None,
              crawling: Callable[[], bool] | None = None, timeout: float = 3600.0) -> ChildRun:
    """Run one crawl; with ``stop_after``, send SIGINT that many seconds after launch,
    or after ``crawling()`` first said yes (the servers saw a request)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "result.json"
    out.unlink(missing_ok=True)
    Path(str(out) + ".done").unlink(missing_ok=True)
    job_file = workdir / "job.json"
    job_file.write_text(json.dumps({**job, "out": str(out)}), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env[ENV_VAR] = dns
    log_path = workdir / "crawl.log"
    samples: list[tuple[float, int]] = []
    done = threading.Event()
    stopped: list[float] = []
    with open(log_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "bench.broad_crawl", str(job_file)],
                                cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
        launched = time.monotonic()
        clock = [None if crawling else launched]

        def sample() -> None:
            while not done.wait(0.25):
                kb = _rss_kb(proc.pid)
                if kb is not None:
                    samples.append((time.time(), kb))
                if clock[0] is None and crawling is not None and crawling():
                    clock[0] = time.monotonic()
                if stop_after is not None and not stopped and clock[0] is not None and \
                        time.monotonic() - clock[0] >= stop_after:
                    stopped.append(time.time())
                    os.kill(proc.pid, signal.SIGINT)
                if time.monotonic() - launched > timeout:
                    proc.kill()

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            exited = time.time()
            done.set()
            sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    log = log_path.read_text(encoding="utf-8", errors="replace")
    result = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    marker = Path(str(out) + ".done")
    done_at = float(marker.read_text(encoding="utf-8")) if marker.exists() else None
    return ChildRun(proc.returncode == 0 and bool(result), result,
                    usage.ru_utime + usage.ru_stime, usage.ru_maxrss, samples, log,
                    proc.returncode, stopped[0] if stopped else None, exited, done_at)
