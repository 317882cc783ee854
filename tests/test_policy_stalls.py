"""RecentSends: which released requests a long loop turn may still be holding (pure)."""

from __future__ import annotations

from scrapy_politeness.policy.stalls import TURNS_TO_WIRE, RecentSends


def test_a_long_turn_holds_the_sends_of_the_turns_just_before_it() -> None:
    recent: RecentSends[str] = RecentSends(turns=4)
    for name, turn in (("a", 10), ("b", 11), ("c", 13), ("d", 14)):
        recent.add(name, turn)
    # Turn 15 may still be writing what turns 11-15 released, not turn 10's.
    assert recent.held(15) == ["b", "c", "d"]
    assert recent.held(19) == []


def test_sends_are_pending_until_their_bytes_are_surely_written() -> None:
    recent: RecentSends[str] = RecentSends()
    recent.add("a", 7)
    assert all(recent.pending(7 + k) for k in range(TURNS_TO_WIRE + 1))
    assert not recent.pending(7 + TURNS_TO_WIRE + 1)
    assert len(recent) == 0


def test_without_long_turns_only_a_few_turns_of_sends_are_kept() -> None:
    """Each kept send is an object every full garbage collection walks: a crawl
    with no long turn must not keep thousands of them (it once kept up to 4,096)."""
    recent: RecentSends[int] = RecentSends(turns=4)
    for i in range(5000):
        recent.add(i, i // 3)  # three sends a turn
    assert len(recent) <= 3 * 5
    assert recent.held(5000 // 3)[-1] == 4999
