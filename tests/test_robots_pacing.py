"""The robots.txt prefetch's pacing: pure policy on a fake clock.

A broad crawl's robots.txt answers are cheap next to its pages; fetched ahead
without bound they made a crawl's first part fast and its last part slow
(issue 42). The pacing keeps a few seconds of the queue's pace ahead, and
lets the pace grow when it is what limits the crawl.
"""

from __future__ import annotations

from collections import deque

import pytest

from scrapy_politeness.policy.robots_pacing import FACTOR, HORIZON, STALE, RobotsPacing


def test_at_the_start_the_floor_is_ahead() -> None:
    pacing = RobotsPacing(floor=8)
    assert pacing.room(0.0, in_flight=0) == 8
    assert pacing.room(0.0, in_flight=3) == 5
    for i in range(5):
        pacing.fetched(f"h{i}", due=1.0, now=0.0)
    assert pacing.room(0.0, in_flight=3) == 0


def test_first_pages_handed_out_raise_the_target_for_horizon_seconds() -> None:
    pacing = RobotsPacing(floor=4)
    for i in range(40):
        pacing.fetched(f"h{i}", due=1.0, now=0.5)
    for i in range(40):
        assert pacing.served(f"h{i}", 1.0 + i / 100)
    assert pacing.target(1.5) == int(FACTOR * 40)
    assert pacing.room(1.5, in_flight=0) == int(FACTOR * 40)
    assert pacing.target(1.0 + HORIZON + 0.5) == 4  # all older than the horizon


def test_a_request_of_a_host_not_ahead_is_not_a_first_page() -> None:
    pacing = RobotsPacing(floor=4)
    assert not pacing.served("never-fetched", 1.0)
    pacing.fetched("a", due=1.0, now=0.0)
    assert pacing.served("a", 1.0)
    assert not pacing.served("a", 2.0)  # its second page
    assert pacing.target(2.0) == 4


def test_a_host_a_crawl_delay_sends_beyond_the_horizon_is_not_counted() -> None:
    pacing = RobotsPacing(floor=2)
    pacing.fetched("slow", due=10.0 + HORIZON, now=10.0 - 0.01)  # Crawl-delay: due later
    assert len(pacing) == 0
    assert pacing.room(10.0, in_flight=0) == 2


def test_a_host_the_queue_never_serves_stops_counting() -> None:
    pacing = RobotsPacing(floor=2)
    pacing.fetched("a", due=1.0, now=0.0)
    pacing.fetched("b", due=1.0, now=0.0)
    assert pacing.room(1.0 + STALE - 1, in_flight=0) == 0
    assert pacing.room(1.0 + STALE, in_flight=0) == 2


@pytest.mark.parametrize("rate", [20.0, 50.0, 200.0])
def test_a_cpu_bound_queue_keeps_a_few_seconds_ahead_and_is_never_starved(rate: float) -> None:
    """The queue hands out at most ``rate`` first pages a second (CPU-bound), each
    due one interval after its robots.txt came (the fetch itself instant): once the
    pace has grown to the queue's (a few seconds from the floor, helped by the asks
    the queue could not answer) the queue always finds one of them due, and the
    hosts ahead stay within FACTOR * HORIZON seconds of that pace once the boost of
    the ramp's asks has decayed."""
    pacing = RobotsPacing(floor=32)
    dt, interval, end, ramp = 0.01, 1.0, 30.0, 5.0
    pending = deque(f"h{i}" for i in range(100_000))
    due: deque[tuple[float, str]] = deque()
    credit, served, ahead_max, ahead_late, starved = 0.0, 0, 0, 0, 0
    t = 0.0
    while t < end:
        while pending and pacing.room(t, in_flight=0) > 0:
            name = pending.popleft()
            pacing.fetched(name, t + interval, t)
            due.append((t + interval, name))
        credit = min(credit + rate * dt, 1.0 + rate * dt)
        while credit >= 1.0 and due and due[0][0] <= t:
            assert pacing.served(due.popleft()[1], t)
            served += 1
            credit -= 1.0
        if credit >= 1.0:  # the engine asked, none was due: the capacity signal
            pacing.starved(t)
            starved += t > ramp
        ahead_max = max(ahead_max, len(due)) if t > ramp else ahead_max
        ahead_late = max(ahead_late, len(due)) if t > end - 5.0 else ahead_late
        t += dt
    assert served >= rate * (end - ramp)
    assert starved == 0
    paced = max(32, FACTOR * HORIZON * rate)
    assert ahead_max <= 2 * paced + 2  # the boost of the ramp's asks: at most the pace's
    assert ahead_late <= paced + 2, (ahead_max, ahead_late)  # ...and it decays


def test_when_the_pace_limits_the_crawl_it_grows() -> None:
    """A fast queue (it serves every host as soon as it is due): the hosts ahead
    grow from the floor to thousands within seconds, not a fixed cap."""
    pacing = RobotsPacing(floor=32)
    dt, interval = 0.01, 1.0
    pending = deque(f"h{i}" for i in range(50_000))
    due: deque[tuple[float, str]] = deque()
    served_in_last_second: deque[float] = deque()
    t = 0.0
    while t < 10.0:
        while pending and pacing.room(t, in_flight=0) > 0:
            name = pending.popleft()
            pacing.fetched(name, t + interval, t)
            due.append((t + interval, name))
        while due and due[0][0] <= t:
            pacing.served(due.popleft()[1], t)
            served_in_last_second.append(t)
        while served_in_last_second and served_in_last_second[0] <= t - 1.0:
            served_in_last_second.popleft()
        t += dt
    assert len(served_in_last_second) >= 2000


def test_an_ask_the_queue_could_not_answer_lets_one_more_host_ahead() -> None:
    """The capacity signal: the engine asked, no host was ready, hosts wait for their
    robots.txt. Each such ask raises the target by one, up to twice the pace's; the
    boost loses a quarter for each HORIZON without an ask."""
    pacing = RobotsPacing(floor=4)
    for i in range(4):
        pacing.fetched(f"h{i}", due=1.0, now=0.0)
    assert pacing.room(0.5, in_flight=0) == 0
    for _ in range(3):
        pacing.starved(0.5)
    assert pacing.target(0.5) == 4 + 3
    assert pacing.room(0.5, in_flight=1) == 2
    assert pacing.target(0.5 + HORIZON - 0.01) == 4 + 3  # kept while asks may come
    assert pacing.target(0.5 + HORIZON) == 4 + 2  # one HORIZON without: a quarter less
    assert pacing.target(0.5 + 3 * HORIZON) == 4 + 1  # int(2 * DECAY * DECAY)
    assert pacing.room(0.5 + 4 * HORIZON, in_flight=0) == 0  # gone
    for _ in range(10):  # never more than the paced target again
        pacing.starved(20.0)
    assert pacing.target(20.0) == 2 * 4


def test_asks_add_to_the_pace_of_first_pages() -> None:
    pacing = RobotsPacing(floor=1)
    for i in range(10):
        pacing.fetched(f"h{i}", due=1.0, now=0.0)
        assert pacing.served(f"h{i}", 1.0)
    pacing.starved(1.5)
    assert pacing.target(1.5) == int(FACTOR * 10) + 1
    assert pacing.target(1.5 + HORIZON) == 1 + 0  # its pages out of the horizon, the boost decays
    pacing.clear()
    assert pacing.target(1.5) == 1


def _slow_robots_crawl(*, asks: bool, rate: float = 50.0, fetch: float = 4.0,
                       end: float = 40.0) -> float:
    """A downloader with room for ``rate`` pages a second; each robots.txt fetch takes
    ``fetch`` seconds (a slow server, a loaded loop) and the host's first page is due
    when it came. The first pages served a second over the last 10 s."""
    pacing = RobotsPacing(floor=8)
    dt = 0.01
    pending = deque(f"h{i}" for i in range(100_000))
    in_flight: deque[tuple[float, str]] = deque()
    due: deque[str] = deque()
    credit, served_late, t = 0.0, 0, 0.0
    while t < end:
        while pending and pacing.room(t, in_flight=len(in_flight)) > 0:
            in_flight.append((t + fetch, pending.popleft()))
        while in_flight and in_flight[0][0] <= t:
            name = in_flight.popleft()[1]
            pacing.fetched(name, t, t)
            due.append(name)
        credit = min(credit + rate * dt, 1.0 + rate * dt)
        while credit >= 1.0 and due:
            assert pacing.served(due.popleft(), t)
            credit -= 1.0
            served_late += t >= end - 10.0
        if credit >= 1.0 and asks:  # the engine asked; nothing ready
            pacing.starved(t)
        t += dt
    return served_late / 10.0


def test_slow_robots_fetches_do_not_shrink_the_pace_when_the_downloader_has_room() -> None:
    """The pace alone is self-referential: hosts spend ``fetch`` seconds ahead, more than
    FACTOR * HORIZON, so the target (FACTOR x the recent first pages) shrinks the pace
    it is measured from, down to the floor. The asks the queue could not answer keep
    the target at what the downloader takes."""
    assert _slow_robots_crawl(asks=False) < 0.5 * 50.0  # the rule without the signal
    assert _slow_robots_crawl(asks=True) >= 0.9 * 50.0
