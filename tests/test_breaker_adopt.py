"""A suspension another process made, adopted from the shared pause (pure, fast tier)."""

from __future__ import annotations

import pytest

from scrapy_politeness.policy import Config, HostTable
from scrapy_politeness.policy.breaker import Breaker, Verdict

CONFIG = Config(default=0.5, floor=0.5, ceiling=2.0, recovery="additive")


def test_a_shared_pause_is_adopted_with_the_same_probe_instant() -> None:
    breaker = Breaker(max_cooldown=60.0)
    assert breaker.adopt("h", until=130.0, now=100.0)
    assert breaker.suspended("h", 129.9)
    assert not breaker.suspended("h", 130.0)  # the probe is due when the pause ends
    assert breaker.get("h").cooldown == pytest.approx(30.0)  # type: ignore[union-attr]
    assert not breaker.adopt("h", until=200.0, now=101.0)  # its own record stays
    assert breaker.get("h").until == 130.0  # type: ignore[union-attr]
    assert not breaker.adopt("g", until=100.0, now=100.0)  # a pause already over


def test_the_adopted_suspensions_probe_decides_like_its_own() -> None:
    table, breaker = HostTable(CONFIG, dead_after=2), Breaker(max_cooldown=60.0)
    state = table.get("h")
    breaker.adopt("h", until=130.0, now=100.0)
    assert breaker.sent("h", state, 130.0)  # the probe: the next waits for its answer
    verdict = breaker.judge("h", state, tripped=False, sent_at=130.0, failed=True, now=130.5)
    assert verdict is Verdict.RESUSPENDED
    assert breaker.get("h").cooldown == pytest.approx(60.0)  # type: ignore[union-attr]
    assert breaker.sent("h", state, 190.5)
    verdict = breaker.judge("h", state, tripped=False, sent_at=190.5, failed=False, now=191.0)
    assert verdict is Verdict.REOPENED
    assert "h" not in breaker
