"""A probe is priced by the work left: the requests still queued for its host.

A refused probe costs a pause (up to its Retry-After); a faster pace pays back
only over the requests left. The fake-clock crawl of ``ratesim`` with the
queue's backlog against the same crawl without it.
"""

from __future__ import annotations

import pytest
from ratesim import TokenBucket, crawl

from scrapy_politeness.policy import Config, HostTable, Signal
from scrapy_politeness.policy.recovery import PATIENCE, pays_back


def test_pays_back() -> None:
    assert pays_back(-1, 0.001, 100.0)  # unknown backlog: the slack alone decides
    assert not pays_back(0, 1.0, 0.1)  # the end of a host's work: never
    assert pays_back(100, 0.05, 5.0)  # 100 x 0.05 x 0.7 = 3.5 >= 0.3 x 5
    assert not pays_back(10, 0.05, 5.0)  # 0.35 < 1.5
    assert pays_back(10, 0.05 / (1 - PATIENCE), 0.5 / PATIENCE)  # the break-even


def test_no_probe_at_the_end_of_a_hosts_work() -> None:
    """A held host whose slack paid for a probe holds when nothing is left."""
    config = Config(recovery="fast")
    for backlog, probes in ((0, False), (200, True)):
        table = HostTable(config)
        state = table.get("h")
        state.adaptive, state.fail_at, state.good_at, state.fail_cost = 0.9, 0.6, 0.9, 1.0
        state.gap, state.healthy_run, state.backlog = 0.9, 5, backlog
        table.feedback("h", Signal(200), 10.0)
        assert (state.adaptive < 0.9) is probes


@pytest.mark.parametrize("limit", [0.3, 0.5, 1.0])
def test_a_long_retry_after_is_paid_at_most_twice(limit: float) -> None:
    """A fast host answering its refusals with Retry-After: 5, 100 pages: at
    most 2 refusals and wall/T* <= 1.40 on the fake clock (the first refusal,
    in the descent, is the price of not knowing the limit)."""
    run = crawl(Config(recovery="fast"), TokenBucket(limit, retry_after=5.0), 100,
                slip=0.01, backlog=True)
    assert run.refused() <= 2
    assert run.early() == 0
    assert run.wall / (99 * limit) <= 1.40


def test_the_backlog_saves_a_refused_probe() -> None:
    """0.3 s limit, Retry-After 5: without the backlog the slack paid for a
    probe late in the crawl, refused (a 5 s pause); priced by the pages left it
    is not tried."""
    server = TokenBucket(0.3, retry_after=5.0)
    blind = crawl(Config(recovery="fast"), server, 100, slip=0.01)
    priced = crawl(Config(recovery="fast"), TokenBucket(0.3, retry_after=5.0), 100,
                   slip=0.01, backlog=True)
    assert priced.refused() < blind.refused()
    assert priced.wall < blind.wall
