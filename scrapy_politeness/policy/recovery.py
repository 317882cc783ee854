"""The fast recovery: learn a rate-limited server's pace and hold it.

The reference design's AIMD (``Config.adapt``) widens on a failure, takes
Retry-After as a floor of the interval and then narrows by a fixed step per
healthy fetch. On a host that allows 2 requests/s and answers one 429 with
``Retry-After: 2``, that holds the host near 2 s and needs ~30 fetches to come
back: the crawl runs at a third of the pace the server would take.

This controller treats the server as having an unknown sustainable interval
and brackets it, as TCP CUBIC remembers the window where loss happened and
BBR probes for more only now and then:

- ``fail_at``: the pace (start-to-start time the server saw) of the last
  failure; ``good_at``: the pace of the last healthy fetch, once something
  failed only when confirmed (``CONFIRM`` healthy fetches in a row).
- Nothing failed yet: each healthy fetch shrinks the interval by ``SHRINK``
  (1 s reaches the 0.25 s floor in 5 fetches, not 15).
- A failure jumps straight back to ``good_at`` (known to work), or, when
  nothing wider is known to work, widens by ``backoff`` like AIMD. A
  Retry-After is a pause (the table's not-before instant), never a floor of
  the interval. ``fail_cost`` keeps what failing cost: the pause
  (Retry-After), or the interval it went back to when it carried none; a
  refused probe adds its cost to twice the last one (``REFUSED_WEIGHT``), so
  probing backs off exponentially with each refusal (held probes between
  refusals keep the record; forgetting halves it).
- Between ``fail_at`` and the pace held, the server's limit is unknown: the
  slack may cost up to ``(x - fail_at)`` per fetch, a failed probe costs
  ``fail_cost``, and a probe ``PROBE_SHARE`` of the way (in log scale) toward
  ``fail_at`` fails with about that chance. Like renting skis until the rent
  paid equals the price, the host holds until ``healthy_run x (x - fail_at)``
  reaches the probe's expected price, ``PATIENCE x fail_cost``, then probes,
  if the work left pays for it (``pays_back``: the saving over the requests
  still queued for the host, against that price; never at the end of its work):
  a success narrows the bracket from above (once a fetch ran at the probe's
  pace: a gap reaching the known-good pace is the IP bucket's lag, for at
  most ``PENDING_AT_MOST`` fetches, as a probe less than the slip below that
  pace runs at such gaps for good), a failure from below. A cheap pause
  (``Retry-After: 1``) probes soon, a dear one (``Retry-After: 5``) later.
- Round paces first (``recovery = "fast"``; ``"bracket"`` leaves this
  out): a limit is set by people, as n requests per second or one request
  per n seconds, so such a pace is taken as ``ROUND_BELIEF`` times likelier
  to be the limit than any other: a round pace inside the bracket is probed
  first, priced that many times lower (after a fetch or two), and a probe
  below a round pace held with none left above ``fail_at`` is priced that
  many times higher (a 1/s server crawled from the 1 s start).
- Paces are kept as the intervals that produced the gaps (``asked_for``):
  the ~10 ms the machinery adds to each start must not come back on top of
  every return to the known-good pace.
- Once the bracket is narrower than ``MARGIN`` the host holds; ``FORGET_AFTER``
  healthy fetches later ``fail_at`` is lowered by ``FORGET_STEP``, which opens
  the bracket again, and ``fail_cost`` is divided by ``REFUSED_WEIGHT`` (a
  forget undoes one refusal's weight): a server that got faster is found
  again, slowly (2x its rate: ~14 forgets, ~2,000 fetches).

Fetch counts and the recorded gap, no clock: the Redis backend
(``feedback.lua``, with the gap booked by ``reserve.lua``) runs the same
arithmetic server side, so both give the same answers.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from scrapy_politeness.policy.config import Config, Signal, is_failure

if TYPE_CHECKING:
    from scrapy_politeness.policy.host_state import HostState

__all__ = ["AT_PACE", "CONFIRM", "FORGET_AFTER", "FORGET_STEP", "MARGIN", "PATIENCE",
           "PENDING_AT_MOST", "PROBE_SHARE", "REFUSED_WEIGHT", "ROUND_BELIEF", "SHRINK",
           "asked_for", "fast_step", "is_round", "pays_back", "round_pace_in"]

SHRINK = 0.75
"""Descent per confirmed healthy fetch while no failure is known."""
CONFIRM = 2
"""Consecutive healthy fetches that confirm an interval once something failed
(the first fetch after a pause always passes a token bucket: it proves nothing)."""
PROBE_SHARE = 0.3
"""A probe goes this share of the way from the interval held to ``fail_at``,
in log scale: nearer the known-good end, so most probes succeed."""
PATIENCE = PROBE_SHARE
"""Probe once the slack held could have paid for what a probe is expected to
cost (``healthy_run x (interval - fail_at) >= PATIENCE x fail_cost``): the
break-even of the ski-rental problem, with the price of a probe being
``fail_cost`` times the chance that it fails. With the server's pace equally
likely anywhere (in log scale) between ``fail_at`` and the pace held, a probe
``PROBE_SHARE`` of the way down fails with that chance."""
MARGIN = 1.03
"""The bracket is closed when the interval held is within 3% of ``fail_at``;
probes never go closer than that."""
AT_PACE = 1.1
"""A healthy fetch whose gap exceeded the interval by more than 10% did not
run at the pace held (an idle host, the fetch after a pause, a resumed crawl):
it neither confirms that pace nor counts toward a probe."""
REFUSED_WEIGHT = 2.0
"""A refused probe carries what failing had cost this many times into the
price of the next: refused probes are evidence that the server's pace sits at
the known-good end of the bracket (a 1/s server crawled from the 1 s start is
held at exactly its pace, and every probe is refused), so probing backs off
exponentially, like a retransmission timer: with equal pauses R, the next
probe after k refused ones (in a row or not: a held probe keeps the record)
is priced (2^(k+1) - 1) R. A failure at the known-good pace (the server
changed) starts the record anew; forgetting ``fail_at`` halves it.
The linear record, ``(k + 1) R``, paid a third 5 s pause on a 60-page crawl
of a 1/s server."""
PENDING_AT_MOST = 8
"""Healthy fetches (counted from the probe) after which a probe is judged at
its own pace even if its gaps still reach the known-good pace. The lag of a
probe is the IP bucket's one fetch plus the fetches in flight; a probe less
than the slip (~10 ms) below the known-good pace runs at gaps at or above it
for good, and without this bound it was never judged again: no probe, no
forgetting (a 3/s server held 7% slow for the rest of the crawl)."""
FORGET_AFTER = 100
"""Healthy fetches held in a closed bracket before ``fail_at`` is lowered."""
FORGET_STEP = 0.95
"""How much of ``fail_at`` is forgotten then (a server that got faster). The
refusal record is divided by ``REFUSED_WEIGHT`` at the same time: kept whole,
the price of the next probe after a few refused ones (5 s pauses: 15, 35,
... 635 s) took thousands of fetches of rent, and a 1/s server that doubled
its rate was not found in 11,000 fetches."""
ROUND_BELIEF = 16.0
"""How much likelier a round pace is to be the server's limit than any other
(``recovery = "fast"``): a probe to a round pace in the bracket is priced this
many times lower, and a probe below a round pace held, with no other round
pace left above ``fail_at``, this many times higher (about the refusal record
of three refused probes, 15x). A 1/s server crawled from the 1 s start fails
at 0.75 s and holds 1 s: the limit is most likely 1/s, and a probe below it
would be refused."""
_EXACT = 1e-9  # float noise allowed in "round": 1 / 3 stored, read back, is still 3/s


def is_round(x: float) -> bool:
    """Whether the interval ``x`` is a round pace: n requests per second or one
    request per n seconds, n a whole number."""
    n = x if x >= 1.0 else 1.0 / x if x > 0.0 else math.inf
    if math.isinf(n):  # zero, or too small to invert (a subnormal interval)
        return False
    return abs(n - round(n)) <= _EXACT * n


def round_pace_in(low: float, high: float) -> float:
    """The slowest round pace strictly between the intervals ``low`` and
    ``high`` (the failing and the held pace), or 0 when there is none. The
    slowest one is the nearest to the pace known to work: the safest try."""
    top = high * (1.0 - _EXACT)
    if top <= 0.0 or (top < 1.0 and math.isinf(1.0 / top)):  # a subnormal interval: none
        return 0.0
    pace = float(math.ceil(top) - 1) if top > 1.0 else 1.0 / (math.floor(1.0 / top) + 1)
    return pace if pace > low * (1.0 + _EXACT) else 0.0


def asked_for(seen: float, x: float, descending: bool) -> float:
    """The interval that produced the gap ``seen``, judged at interval ``x``.

    The gap the server saw is the interval asked plus what the machinery adds
    (the send margin, loop slip: ~10 ms here). Kept as the failing or
    known-good pace, that excess came back on top of every return to it: a
    host held at 0.527 s went back to 0.537 s after a refused probe. A gap
    within ``AT_PACE`` above the interval that spaced it is that interval:
    ``x``, or in the descent ``x / SHRINK`` (the gap lags a step by one fetch).
    Any other gap (a soft widen since, several starts in flight) is its own.
    """
    ref = x / SHRINK if descending and seen >= x / SHRINK else x
    return ref if ref <= seen <= ref * AT_PACE else seen


def fast_step(config: Config, state: HostState, signal: Signal) -> float:
    """The next interval (unclamped) of ``state`` after ``signal``; updates the
    controller's fields of ``state`` (``fail_at``, ``good_at``, ``healthy_run``,
    ``fail_cost``).

    ``state.adaptive`` must be the stored (clamped) interval; ``signal`` carries
    the host's previous smoothed latency in ``prev_latency``. What failed or
    stayed healthy is the pace the server really saw, ``state.gap`` (the last
    start-to-start time): it lags the interval by a fetch, because the IP
    bucket was spent at the old interval and never moves back.
    """
    x = state.adaptive
    seen = state.gap if state.gap > 0 else x
    descending = state.fail_at <= 0
    if is_failure(signal.status):
        # Past what the interval that spaced it explains (``x``; in the descent up
        # to ``x / SHRINK``: the gap trails a step by one fetch, and a step the
        # floor clamped lags by less), the gap was partly idle (a late start, a
        # briefly empty queue, the IP's lag after a probe): it failed at the pace
        # held. Kept as it was, a gap 1.1-1.5x the pace put fail_at above the
        # pace already proven healthy, and the host held there.
        if seen > (x / SHRINK if descending else x) * AT_PACE:
            seen = x
        seen = state.fail_at = asked_for(seen, x, descending)
        state.healthy_run = 0
        if state.good_at <= seen:
            state.good_at = 0.0  # the known-good pace failed: the server changed
        nxt = state.good_at if state.good_at > x else config.widen(x)
        cost = signal.retry_after if signal.retry_after > nxt else nxt
        if state.good_at > x:  # refused below the known-good pace: a probe (or the descent)
            cost += REFUSED_WEIGHT * state.fail_cost  # the next probe pays for these, doubled
        state.fail_cost = cost
        return nxt
    if config.latency_rising(signal.latency, signal.prev_latency):
        state.healthy_run = 0
        return x * config.soft_widen
    fail_at = state.fail_at
    if fail_at > 0 and seen > x * AT_PACE:  # an idle gap, a pause, the IP's lag after a probe
        return x  # not a fetch at the pace held: it proves nothing about that pace
    run = state.healthy_run + 1
    state.healthy_run = run
    if run < CONFIRM and fail_at > 0:  # no pause yet: nothing to distrust
        return x
    good_at = state.good_at
    # A probe pending: this gap ran at the old pace (the IP bucket's lag, a
    # fetch in flight). A gap at the probe's pace looks the same when the probe
    # went less than the slip below: that lag is a few fetches, so a probe
    # still "pending" after PENDING_AT_MOST ran at its own pace, and is judged.
    if fail_at > 0 and x < good_at <= seen and run < PENDING_AT_MOST:
        return x
    state.good_at = asked_for(seen, x, descending)
    if fail_at <= 0:  # nothing failed yet: descend
        state.healthy_run = CONFIRM - 1  # the next healthy fetch confirms the new pace
        return x * SHRINK
    closest = fail_at * MARGIN
    if x <= closest:  # a closed bracket: hold, forget slowly
        if run >= FORGET_AFTER:  # the failing pace and the refusal record with it
            state.fail_at = fail_at * FORGET_STEP
            state.fail_cost /= REFUSED_WEIGHT
            state.healthy_run = CONFIRM - 1
        return x
    price = state.fail_cost
    round_pace = 0.0
    if config.recovery == "fast":  # round paces first
        round_pace = round_pace_in(fail_at, x)
        if round_pace > 0.0:  # the likeliest limit in the bracket: a cheap try
            price /= ROUND_BELIEF
        elif is_round(x):  # held at a round pace, none left above fail_at: most likely the limit
            price *= ROUND_BELIEF
    if run * (x - fail_at) >= PATIENCE * price:  # the slack paid for a probe
        probe = round_pace if round_pace > 0.0 else _probe(x, fail_at, closest)
        if not pays_back(state.backlog, x - probe, price):
            return x  # too little work left for a faster pace to pay for a refusal
        state.healthy_run = 0  # the next probe pays its own rent
        return probe
    return x


def _probe(x: float, fail_at: float, closest: float) -> float:
    """``PROBE_SHARE`` of the (log) way from ``x`` to ``fail_at``, no closer than ``closest``."""
    probe = x * (fail_at / x) ** PROBE_SHARE
    return probe if probe > closest else closest


def pays_back(backlog: int, saving: float, price: float) -> bool:
    """Whether a probe saving ``saving`` seconds a fetch pays over ``backlog``
    requests still queued for its host (-1: unknown, always): the saving,
    expected only if the probe holds (``1 - PATIENCE``), against its price
    (``PATIENCE x price``: a refusal's pause, by its chance). A host at the
    end of its work never probes: a 5 s pause saves nothing there."""
    return backlog < 0 or backlog * saving * (1.0 - PATIENCE) >= PATIENCE * price
