"""The timeline: trace lines -> plot series (pure), and the PNG the command writes."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from scrapy_politeness.__main__ import MISSING_MATPLOTLIB, main
from scrapy_politeness.observe.plot import read_trace, series

TRACE: list[dict[str, Any]] = [
    {"type": "header", "version": 1, "wall": 1_700_000_000.0},
    {"type": "restored", "t": 0.0, "host": "b.test", "interval": 4.0},
    {"type": "dispatch", "t": 0.1, "host": "a.test", "ip": "127.0.9.1", "url": "u",
     "wait": 0.0, "interval": 1.0},
    {"type": "feedback", "t": 0.2, "host": "a.test", "ip": "127.0.9.1", "status": 429,
     "retry_after": 3.0, "latency": 0.01, "interval_before": 1.0, "interval_after": 3.0,
     "cause": "429"},
    {"type": "dispatch", "t": 0.5, "host": "b.test", "ip": "127.0.9.2", "url": "u",
     "wait": 0.5, "interval": 4.0},
    {"type": "crawl_delay", "t": 0.6, "host": "b.test", "delay": 5.0, "over_max": None},
    {"type": "feedback", "t": 0.7, "host": "b.test", "ip": "127.0.9.2", "status": 200,
     "retry_after": None, "latency": 0.01, "interval_before": 4.0, "interval_after": 5.0,
     "cause": None},
    {"type": "dispatch", "t": 3.2, "host": "a.test", "ip": "127.0.9.1", "url": "u",
     "wait": 3.0, "interval": 3.0},
    {"type": "feedback", "t": 3.3, "host": "a.test", "ip": "127.0.9.1", "status": 503,
     "retry_after": None, "latency": 0.01, "interval_before": 3.0, "interval_after": 6.0,
     "cause": "5xx"},
    {"type": "dispatch", "t": 3.4, "host": "c.test", "ip": "127.0.9.1", "url": "u",
     "wait": 0.0, "interval": 1.0},
    {"type": "feedback", "t": 9.4, "host": "c.test", "ip": "127.0.9.1", "status": 0,
     "retry_after": None, "latency": 0.0, "interval_before": 1.0, "interval_after": 2.0,
     "cause": "transport"},
    {"type": "dead", "t": 9.4, "host": "c.test", "interval": 2.0, "reason": "r"},
    {"type": "parked", "t": 9.5, "host": "d.test", "for": None, "reason": "r"},
    {"type": "end", "t": 9.6, "lines": 15, "dropped": 2},
]


def test_series_from_a_hand_made_trace() -> None:
    data = series(TRACE, top=10)
    assert data.wall == 1_700_000_000.0
    assert data.duration == 9.6
    assert data.dropped == 2
    assert [h.host for h in data.hosts] == ["a.test", "b.test", "c.test", "d.test"]
    a, b, c, d = data.hosts
    assert a.starts == [0.1, 3.2]
    assert a.steps == [(0.1, 1.0), (0.2, 3.0), (3.2, 3.0), (3.3, 6.0)]
    assert a.marks.by_kind == {"429": [0.2], "retry_after": [0.2], "5xx": [3.3]}
    assert b.steps == [(0.0, 4.0), (0.5, 4.0), (0.7, 5.0)]
    assert b.starts == [0.5]
    assert b.marks.by_kind == {"crawl_delay": [0.6]}
    assert c.marks.by_kind == {"transport": [9.4], "dead": [9.4]}
    assert (d.requests, d.steps, d.marks.by_kind) == (0, [], {"parked": [9.5]})
    # Fetch starts per IP in each second 0..9.
    assert data.ip_load == {"127.0.9.1": [1, 0, 0, 2, 0, 0, 0, 0, 0, 0],
                            "127.0.9.2": [1, 0, 0, 0, 0, 0, 0, 0, 0, 0]}


def test_series_keeps_the_hosts_with_most_requests() -> None:
    data = series(TRACE, top=1)
    assert [h.host for h in data.hosts] == ["a.test"]
    assert data.hosts_total == 4


def test_read_trace_skips_a_truncated_last_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    text = "\n".join(json.dumps(r) for r in TRACE[:3])
    path.write_text(text + '\n{"type": "disp', encoding="utf-8")
    assert read_trace(path) == TRACE[:3]
    path.write_text('{"type": "disp\n' + text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"t\.jsonl:1: not a JSON line"):
        read_trace(path)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, after checking the PNG signature."""
    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", raw[:8]
    length, kind = struct.unpack(">I4s", raw[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


@pytest.mark.parametrize(("size", "dpi"), [((1200, 800), 100), ((640, 400), 80)])
def test_plot_command_writes_a_png_of_the_requested_size(
        tmp_path: Path, size: tuple[int, int], dpi: int,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    trace = tmp_path / "trace.jsonl"
    trace.write_text("\n".join(json.dumps(r) for r in TRACE) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "timeline.png"
    rc = main(["plot", str(trace), "-o", str(out), "--width", str(size[0]),
               "--height", str(size[1]), "--dpi", str(dpi), "-n", "2"])
    assert rc == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert png_size(out) == size


def test_plot_command_without_matplotlib_says_how_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps(TRACE[0]) + "\n", encoding="utf-8")
    assert main(["plot", str(trace), "-o", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert MISSING_MATPLOTLIB in err
    assert "pip install matplotlib" in err
    assert not (tmp_path / "x.png").exists()


def test_plot_command_reports_an_unreadable_trace(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    assert main(["plot", str(tmp_path / "missing.jsonl")]) == 1
    assert "cannot read the trace" in capsys.readouterr().err


@pytest.mark.parametrize(("content", "why"), [
    ("", "it is empty"),
    ("\x00\x01 garbage, not JSON\n", "it is empty"),
    ('{"name": "x"}\n{"name": "y"}\n', "trace header"),
    (json.dumps(TRACE[0]) + "\n", "no request"),
])
def test_plot_command_refuses_what_is_not_a_trace(
        tmp_path: Path, content: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    trace = tmp_path / "trace.jsonl"
    trace.write_text(content, encoding="utf-8")
    out = tmp_path / "x.png"
    assert main(["plot", str(trace), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"cannot draw {trace}" in err
    assert why in err
    assert not out.exists()


def test_plot_help_says_where_the_picture_goes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["plot", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps to the terminal
    assert "default: timeline.png in the current directory" in text
