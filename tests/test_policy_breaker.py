"""The breaker (policy/breaker.py): a host pinned at its ceiling is suspended, probed, reopened.

Pure, on the fake clock: a simulated server that fails every request for a
while, the real gate and host table, and the breaker's verdicts applied as the
glue applies them.
"""

from __future__ import annotations

import pytest
from fakeclock import GateSim

from scrapy_politeness.policy import Config, Gate, HostTable, IPTable, Signal
from scrapy_politeness.policy.breaker import Breaker, Verdict

CONFIG = Config(default=0.5, floor=0.5, ceiling=2.0, recovery="additive")


def _trip(breaker: Breaker, table: HostTable, key: str, now: float) -> Verdict:
    """Feed failures until the table reaches the trip condition; the breaker's verdict."""
    for _ in range(100):
        table.start(key, now)
        outcome = table.feedback(key, Signal(503), now)
        verdict = breaker.judge(key, table.get(key), tripped=outcome.became_dead,
                                sent_at=now, failed=True, now=now)
        if verdict is not Verdict.NONE:
            return verdict
    raise AssertionError("never tripped")


def test_a_host_at_its_ceiling_is_suspended_not_dead() -> None:
    table, breaker = HostTable(CONFIG, dead_after=3), Breaker()
    assert _trip(breaker, table, "h", 100.0) is Verdict.SUSPENDED
    state = table.get("h")
    assert not state.dead
    # The first cool-down is twice the ceiling; the bucket holds until then.
    assert breaker.get("h").until == pytest.approx(104.0)  # type: ignore[union-attr]
    assert state.eligible_at() == pytest.approx(104.0)
    assert breaker.suspended("h", 103.9)
    assert not breaker.suspended("h", 104.0)


def test_failed_probes_double_the_cool_down_up_to_its_cap() -> None:
    table, breaker = HostTable(CONFIG, dead_after=3), Breaker(cooldown=10.0, max_cooldown=35.0)
    _trip(breaker, table, "h", 0.0)
    state = table.get("h")
    untils = []
    now = 10.0
    for _ in range(4):
        assert breaker.sent("h", state, now)  # the probe
        table.feedback("h", Signal(0), now)
        verdict = breaker.judge("h", state, tripped=True, sent_at=now, failed=True, now=now)
        assert verdict is Verdict.RESUSPENDED
        untils.append(state.eligible_at() - now)
        now = state.eligible_at()
    assert untils == [20.0, 35.0, 35.0, 35.0]
    assert breaker.get("h").probes == 4  # type: ignore[union-attr]


def test_an_outcome_of_a_request_sent_before_the_probe_time_decides_nothing() -> None:
    table, breaker = HostTable(CONFIG, dead_after=3), Breaker(cooldown=10.0)
    _trip(breaker, table, "h", 0.0)
    state = table.get("h")
    # A request out before the suspension answers (healthy) at t=3: still suspended.
    verdict = breaker.judge("h", state, tripped=False, sent_at=-1.0, failed=False, now=3.0)
    assert verdict is Verdict.NONE
    assert breaker.suspended("h", 3.0)
    assert state.eligible_at() == 10.0


def test_a_healthy_probe_reopens_at_half_the_ceiling_and_the_recovery_narrows_it() -> None:
    table, breaker = HostTable(CONFIG, dead_after=3), Breaker(cooldown=10.0)
    _trip(breaker, table, "h", 0.0)
    state = table.get("h")
    assert breaker.sent("h", state, 10.0)
    assert state.not_before == 20.0  # half-open: nothing follows the probe unanswered
    table.feedback("h", Signal(200, latency=0.01), 10.1)
    verdict = breaker.judge("h", state, tripped=False, sent_at=10.0, failed=False, now=10.1)
    assert verdict is Verdict.REOPENED
    assert "h" not in breaker
    assert state.not_before == 10.1  # the hold is lifted at once
    assert state.interval() == pytest.approx(1.0)
    assert state.ceiling_streak == 0
    for k in range(40):
        table.feedback("h", Signal(200, latency=0.01), 11.0 + k)
    assert state.interval() < 1.0  # the usual recovery narrows it


def test_a_retry_after_on_the_healthy_probe_is_kept() -> None:
    table, breaker = HostTable(CONFIG, dead_after=3), Breaker(cooldown=10.0)
    _trip(breaker, table, "h", 0.0)
    state = table.get("h")
    breaker.sent("h", state, 10.0)
    table.feedback("h", Signal(200, retry_after=30.0), 10.1)
    breaker.judge("h", state, tripped=False, sent_at=10.0, failed=False, now=10.1)
    assert state.not_before == pytest.approx(40.1)


def test_a_healthy_answer_at_the_ceiling_suspends_nothing() -> None:
    """The table counts outcomes at the ceiling, healthy ones too (a host restored
    from JOBDIR at its ceiling, its next answer healthy but its interval held
    there by the recovery): nothing failed, so nothing is suspended."""
    table, breaker = HostTable(CONFIG, dead_after=1), Breaker()
    state = table.get("h")
    state.dead = True  # as the table marks it on reaching the streak
    verdict = breaker.judge("h", state, tripped=True, sent_at=4.9, failed=False, now=5.0)
    assert verdict is Verdict.NONE
    assert "h" not in breaker
    assert not state.dead


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_bad_breaker_values_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="cooldown"):
        Breaker(cooldown=bad)
    with pytest.raises(ValueError, match="max_cooldown"):
        Breaker(max_cooldown=bad)
    with pytest.raises(ValueError, match="reopen"):
        Breaker(reopen=bad)


def test_an_outage_costs_no_request_and_sends_nothing_while_suspended() -> None:
    """A server failing every request from t=2 to t=30, then healthy: the gate
    sends none of the host's requests while it is suspended beyond the probes,
    and every request is eventually sent and answered healthy."""
    table = HostTable(CONFIG, dead_after=3)
    gate: Gate[int] = Gate(table, IPTable(0.0), margin=0.0, max_in_flight=1)
    breaker = Breaker()
    sim = GateSim(gate)
    down = (2.0, 30.0)
    pending = list(range(60))
    fetched: list[int] = []
    suspended_windows: list[tuple[float, float]] = []

    def answer(token: int, sent: float) -> None:
        now = sim.now
        failed = down[0] <= sent < down[1]
        outcome = table.feedback("h", Signal(503 if failed else 200, latency=0.05), now)
        verdict = breaker.judge("h", table.get("h"), tripped=outcome.became_dead,
                                sent_at=sent, failed=failed, now=now)
        if verdict in (Verdict.SUSPENDED, Verdict.RESUSPENDED):
            suspended_windows.append((now, breaker.get("h").until))  # type: ignore[union-attr]
        if failed:
            pending.append(token)  # retried, as Scrapy's RetryMiddleware does
        else:
            fetched.append(token)
        gate.done("h")
        if pending:
            sim.submit("h", "ip", pending.pop(0))

    def released(rel: object) -> None:
        sent = sim.now
        breaker.sent("h", table.get("h"), sent)
        token = rel.token  # type: ignore[attr-defined]
        sim.at(sent + 0.05, lambda: answer(token, sent))

    sim.on_release = released
    sim.submit("h", "ip", pending.pop(0))
    sim.run()
    assert sorted(fetched) == list(range(60))
    assert suspended_windows, "the host was never suspended"
    starts = sim.times("h")
    for begin, until in suspended_windows:
        assert not [t for t in starts if begin < t < until - 1e-9]
    probes = [t for t in starts if any(abs(t - u) < 1e-9 for _, u in suspended_windows)]
    assert len(probes) == len(suspended_windows)
    assert not table.get("h").dead



def test_a_suspension_of_a_host_that_no_longer_matters_is_forgotten() -> None:
    """Its probe instant long past, no state, nothing waiting: the record goes,
    so the suspensions follow the hosts in use (and the live line's count)."""
    breaker = Breaker(cooldown=10.0)
    table = HostTable(CONFIG, dead_after=2)
    for key in ("gone.test", "waiting.test", "later.test"):
        _trip(breaker, table, key, 0.0)
    breaker.judge("later.test", table.get("later.test"), tripped=True, sent_at=20.0,
                  failed=True, now=20.0)  # its probe failed: suspended until 40
    waiting = {"waiting.test"}  # requests still queued for it
    assert breaker.prune(5.0, lambda key: key in waiting) == 0  # probes not due by the cutoff
    assert breaker.prune(15.0, lambda key: key in waiting) == 1
    assert "gone.test" not in breaker
    assert "waiting.test" in breaker  # honoured while its requests wait
    assert breaker.get("waiting.test").cooldown == 10.0  # type: ignore[union-attr]
    assert "later.test" in breaker
    assert breaker.prune(40.0, lambda key: key in waiting) == 1
    assert list(dict(breaker.items())) == ["waiting.test"]
    waiting.clear()
    assert breaker.prune(40.0, lambda key: False) == 1
    assert len(breaker) == 0
