"""POLITENESS_TRACE: the buffered writer (unit) and one real crawl's trace."""

from __future__ import annotations

import io
import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from crawling import farm_settings, run_crawl

from scrapy_politeness.observe.trace import TRACE_VERSION, TraceWriter
from scrapy_politeness.settings import PolitenessSettings


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_writer_header_records_and_end(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "trace.jsonl"  # the directory is created
    w = TraceWriter(path, start=100.0, header={"spider": "s"})
    w.dispatch(100.5, "a.test", ip="127.0.0.2", url="http://a.test/", waited=0.25,
               interval=1.0)
    w.feedback(101.0, "a.test", ip="127.0.0.2", status=429, retry_after=2.0, latency=0.01,
               before=1.0, after=2.0, cause="429")
    w.crawl_delay(101.5, "b.test", 3.0, None)
    w.parked(102.0, "c.test", float("inf"), "why")
    w.parked(102.0, "d.test", 112.0, "why")
    w.dead(103.0, "e.test", 60.0, "dead")
    w.close(104.0)
    lines = _lines(path)
    assert [r["type"] for r in lines] == ["header", "dispatch", "feedback", "crawl_delay",
                                           "parked", "parked", "dead", "end"]
    header = lines[0]
    assert header["version"] == TRACE_VERSION
    assert header["spider"] == "s"
    assert isinstance(header["wall"], float)
    assert lines[1] == {"type": "dispatch", "t": 0.5, "host": "a.test", "ip": "127.0.0.2",
                        "url": "http://a.test/", "wait": 0.25, "interval": 1.0}
    assert lines[2] == {"type": "feedback", "t": 1.0, "host": "a.test", "ip": "127.0.0.2",
                        "status": 429, "retry_after": 2.0, "latency": 0.01,
                        "interval_before": 1.0, "interval_after": 2.0, "cause": "429"}
    assert lines[4]["for"] is None
    assert lines[5]["for"] == 10.0
    assert lines[-1] == {"type": "end", "t": 4.0, "lines": 8, "dropped": 0}
    assert w.lines == 8
    w.write({"type": "late"})  # after close: ignored, no error
    assert len(_lines(path)) == 8


def test_writer_flushes_every_n_lines_and_every_second(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    w = TraceWriter(path, start=0.0, flush_lines=3)
    w.write({"type": "x", "n": 1})
    w.write({"type": "x", "n": 2})  # with the header: 3 lines, handed to the thread

    def wait_for(n: int) -> None:  # the writer thread's turn: generous on a loaded machine
        for _ in range(3000):
            if len(path.read_text().splitlines()) == n:
                return
            threading.Event().wait(0.01)
        raise AssertionError(f"expected {n} lines, got {path.read_text()!r}")

    wait_for(3)
    with w._cond:  # the lines are on disk; the thread marks itself idle just after
        assert w._cond.wait_for(lambda: not w._busy, timeout=30)
    w.write({"type": "x", "n": 3})
    w.tick(0.5)  # less than a second since the last time-based flush: nothing
    assert len(w._buf) == 1  # still buffered: nothing was handed to the writer thread
    assert w._batch is None
    w.tick(1.0)
    wait_for(4)
    w.close()
    assert len(_lines(path)) == 5


class _SlowSink(io.StringIO):
    """A disk that blocks every write until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.writes = 0
        self.final = ""

    def write(self, s: str) -> int:
        self.writes += 1
        self.release.wait(10)
        return super().write(s)

    def close(self) -> None:
        self.final = self.getvalue()
        super().close()


def test_slow_disk_drops_and_counts_instead_of_growing(tmp_path: Path) -> None:
    sink = _SlowSink()
    w = TraceWriter(tmp_path / "unused.jsonl", start=0.0, flush_lines=2, max_buffer=10,
                    sink=sink)
    for i in range(100):
        w.write({"type": "x", "n": i})
    # The first batch (header + line 0) is stuck in the writer; then 10 buffered at most.
    assert len(w._buf) == 10
    assert w.dropped == 100 - 1 - 10
    sink.release.set()
    w.close()
    lines = [json.loads(x) for x in sink.final.splitlines()]
    assert lines[0]["type"] == "header"
    assert [r["n"] for r in lines[1:-1]] == list(range(11))  # the first lines are kept
    assert lines[-1] == {"type": "end", "lines": 13, "dropped": 89}
    assert not (tmp_path / "unused.jsonl").exists()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [("POLITENESS_TRACE", 5, "POLITENESS_TRACE must be a file path or empty, got 5"),
     ("POLITENESS_TRACE_BUFFER", 0, "POLITENESS_TRACE_BUFFER must be >= 1, got 0"),
     ("POLITENESS_TRACE_BUFFER", "1.5", "POLITENESS_TRACE_BUFFER must be a whole number")],
)
def test_trace_settings_are_validated(name: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        PolitenessSettings.from_settings({name: value})


def test_trace_settings_defaults_and_forms(tmp_path: Path) -> None:
    s = PolitenessSettings.from_settings({})
    assert (s.trace, s.trace_buffer) == (None, 100_000)
    assert PolitenessSettings.from_settings({"POLITENESS_TRACE": ""}).trace is None
    s = PolitenessSettings.from_settings({"POLITENESS_TRACE": tmp_path / "t.jsonl",
                                          "POLITENESS_TRACE_BUFFER": "500"})
    assert (s.trace, s.trace_buffer) == (str(tmp_path / "t.jsonl"), 500)


def test_crawl_trace_has_one_dispatch_per_arrival(farm_factory: Any, tmp_path: Path) -> None:
    spec: dict[str, Any] = {"ips": ["127.0.0.2", "127.0.0.3"], "hosts": {
        "a.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 3},
        "limited.farm.test": {"ip": "127.0.0.3", "kind": "rate_limited",
                              "rate_interval": 0.5, "retry_after": 1, "pages": 2},
    }}
    farm = farm_factory(spec)
    trace = tmp_path / "trace.jsonl"
    result = run_crawl(
        [farm.url(h) for h in spec["hosts"]],
        farm_settings(farm, POLITENESS_DEFAULT=0.3, POLITENESS_FLOOR=0.3,
                      POLITENESS_TRACE=str(trace), POLITENESS_LOG_INTERVAL=0.5))
    arrivals = farm.arrivals()
    lines = _lines(trace)
    assert lines[0]["type"] == "header"
    assert lines[-1]["type"] == "end"
    assert lines[-1]["dropped"] == 0
    assert lines[-1]["lines"] == len(lines)
    dispatch = [r for r in lines if r["type"] == "dispatch"]
    feedback = [r for r in lines if r["type"] == "feedback"]
    # One dispatch line per request the servers saw, same host, path and IP.
    assert Counter((r["host"], urlsplit(r["url"]).path, r["ip"]) for r in dispatch) == \
        Counter((a.host, a.path, a.ip) for a in arrivals)
    assert Counter(r["status"] for r in feedback) == Counter(a.status for a in arrivals)
    assert any(r["status"] == 429 and r["retry_after"] == 1.0 and r["cause"] == "429"
               and r["interval_after"] > r["interval_before"] for r in feedback)
    times = [r["t"] for r in lines[1:-1]]
    assert times == sorted(times)
    assert 0 <= times[0] < 5
    assert result.stat("politeness/trace/dropped") == 0
    assert result.stat("politeness/trace/lines") == len(lines)
    # response.meta["politeness"] matches the decision traced for that request.
    assert len(result.items) == len(spec["hosts"]) + 5
    for item in result.items:
        host = urlsplit(item["url"]).hostname
        mine = [r for r in dispatch if r["url"] == item["url"]]
        assert mine, item
        assert item["ip"] == spec["hosts"][host]["ip"]
        assert any(r["host"] == host and r["ip"] == item["ip"]
                   and r["wait"] == pytest.approx(item["waited"], abs=1e-5)
                   and r["interval"] == pytest.approx(item["interval"], abs=1e-4)
                   for r in mine), (item, mine)
    assert all(item["waited"] >= 0 and item["interval"] >= 0.3 for item in result.items)
    # The periodic log line ran (every 0.5 s here).
    assert re.search(r"Politeness: \d+ waiting in the scheduler.*; 2 hosts, \d+ backing off, "
                     r"\d+ dead", result.log)
