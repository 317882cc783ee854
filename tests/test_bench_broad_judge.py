"""bench/broad_judge.py's reading of nginx's log, on hand-made lines (no server)."""

from __future__ import annotations

from bench.broad_judge import nth_host_at, traffic
from bench.broad_servers import LogLine


def _line(at: float, host: str, uri: str = "/p0") -> LogLine:
    return LogLine(at, host, "127.1.0.1", 200, uri)


def test_the_nth_host_is_counted_at_its_first_page_not_its_robots_txt() -> None:
    log = [_line(1.0, "a", "/robots.txt"), _line(2.0, "b", "/robots.txt"), _line(3.0, "a"),
           _line(4.0, "a", "/p1"), _line(5.0, "b"), _line(6.0, "c", "/robots.txt")]
    assert nth_host_at(log, 1) == 3.0
    assert nth_host_at(log, 2) == 5.0
    assert nth_host_at(log, 3) is None


def test_the_log_is_read_in_time_order() -> None:
    log = [_line(5.0, "b"), _line(3.0, "a"), _line(4.0, "a")]
    assert nth_host_at(log, 2) == 5.0


def test_traffic_has_no_hosts_mark_below_the_mark() -> None:
    assert traffic([_line(1.0, "a"), _line(2.0, "b")]).hosts_mark_at is None
