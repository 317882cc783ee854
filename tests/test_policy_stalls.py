"""RecentSends: which recent sends a loop stall may have held (pure, no clock)."""

from __future__ import annotations

from scrapy_politeness.policy.stalls import RecentSends


def test_caught_are_the_sends_due_since_the_stall_began() -> None:
    recent: RecentSends[str] = RecentSends(horizon=0.5)
    for name, at in (("a", 10.0), ("b", 10.1), ("c", 10.2), ("d", 10.3)):
        recent.add(name, at, at)
    assert sorted(recent.caught_by(10.15, 10.35)) == ["c", "d"]
    assert recent.caught_by(10.4, 10.45) == []


def test_sends_older_than_the_horizon_are_forgotten() -> None:
    recent: RecentSends[str] = RecentSends(horizon=0.5)
    recent.add("old", 10.0, 10.0)
    recent.add("new", 11.0, 10.0)  # still within the horizon of "old" when added
    assert recent.caught_by(9.0, 11.1) == ["new"]  # "old" left long before: pruned
    assert len(recent) == 1


def test_without_stalls_only_a_horizon_of_sends_is_kept() -> None:
    """Each kept send is an object every full garbage collection walks: a crawl
    with no stall must not keep thousands of them (it kept up to 4,096)."""
    recent: RecentSends[int] = RecentSends(horizon=0.5)
    for i in range(5000):
        now = i * 0.01
        recent.add(i, now + 0.002, now)
    assert len(recent) <= 52
    assert recent.caught_by(49.985, 49.99) == [4999]
