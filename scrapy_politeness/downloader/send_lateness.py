"""The send slip: the bytes leave after the gate's release, later on a busy loop.

Every spend is moved to the best estimate of when the server sees the
request, so a slow loop turn can widen a gap but never shorten it:

- at release, the spend moves to ``resume + 2 x lag`` (``lag`` a slowly
  decaying maximum of recent resume lags, at most ``STALL``: a longer one is
  a stall, handled by the turn count below, not a turn to expect again);
- until the crawl sees a request written to its connection (the plugin's
  HTTP handler, :meth:`SendSlip.written`) it may not have left: before every
  release (:meth:`SendSlip.check`) the buckets of the sends still unwritten
  move to at least now, and at the write to the write (:mod:`.policy.stalls`,
  ``Unwritten``), however long they wait and however many turns pass;
- the bytes leave a turn after that write (a few turns after the release
  where the write is not seen), so while any send is that close, a tick runs
  once a turn: a turn that ran long (a full garbage collection, a slow
  callback) held them, and their spends move to its end, before anything
  else runs. The gate asks the same before every release, for a turn that is
  running long still;
- once headers arrive, the download's real start (and whatever the first byte
  took beyond the host's usual latency) moves the buckets again; behind a
  proxy, whose forwarding delay varies, the answer itself.

With a shared backend, a start later than its booking allowed for is pushed to the
shared buckets too, so other processes space from the real start.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from scrapy_politeness.downloader.connections import Connections
from scrapy_politeness.downloader.dispatch import STALL, AnswerBound, Dispatch, LateArrivals
from scrapy_politeness.policy.stalls import RecentSends, Unwritten

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy_politeness.policy import HostState, HostTable, IPTable, Release

__all__ = ["STALL", "AnswerBound", "Dispatch", "SendSlip"]


class SendSlip:
    """The slip estimate and the corrections it drives, for one crawler."""

    def __init__(self, hosts: HostTable, ips: IPTable, margin: float = 0.0) -> None:
        self.hosts = hosts
        self.ips = ips
        self.margin = margin  # what the gate adds to every spacing (POLITENESS_SEND_MARGIN)
        self.shared: LateArrivals | None = None
        # Called with a host key whose next start an answer moved EARLIER: the
        # scheduler queue's estimates are lower bounds only while instants move on.
        self.on_earlier: Callable[[str], None] | None = None
        self.lag = 0.0  # recent event-loop resume lag
        self.loop: asyncio.AbstractEventLoop | None = None
        self.recent: RecentSends[Dispatch] = RecentSends()
        self.unwritten: Unwritten[Dispatch | Release[Any]] = Unwritten()
        self.held_sends = 0  # spends moved because a send was still unwritten (a stat)
        self.turn = 0  # loop turns counted while a send may be on its way
        self.turn_began = 0.0  # when the tick of the current turn ran
        self._ticking = False
        self._first_tick = False
        self.conns = Connections()

    def spend(self, state: HostState, ip: str | None, at: float) -> None:
        """Spend the host and IP buckets at ``at`` (never backwards).

        A 0 host interval spaces nothing on the host, but the IP floor still
        spaces the IP."""
        if state.clamped > 0 and at > state.last_start:
            state.last_start = at
        if state.clamped > 0 or self.ips.floor > 0:
            self.ips.spend(ip, at, state.ip_clamped)

    def sent(self, dispatch: Dispatch, now: float, state: HostState, *,
             watched: bool = False) -> None:
        """Remember a send until it is written, so a long turn that holds it can
        move it, and (without a shared backend) what it spent, so its answer can
        tell whether anything spent the buckets since. ``watched``: its write
        will be seen (:meth:`written`); until then it holds its buckets."""
        if self.conns.cold(dispatch.key):  # its server reads it only after the set-up
            dispatch.cold = True
            setup = self.conns.setup_of(dispatch.ip)
            if setup > 0.0:
                self.spend(state, dispatch.ip, now + setup)
        if watched:
            self.unwritten.add(dispatch, now)
            if dispatch.until > now:  # behind a send moved later: spent as late
                self.spend(state, dispatch.ip, dispatch.until)
        if self.shared is None or dispatch.server_spent == dispatch.server_spent:
            dispatch.spent = state.last_start
            dispatch.ip_next = self.ips.eligible_at(dispatch.ip)
        if not watched:
            self._recent(dispatch, now)

    def _recent(self, dispatch: Dispatch, now: float) -> None:
        """Keep ``dispatch`` for the ticks: its bytes leave within a few turns."""
        self.recent.add(dispatch, self.turn)
        if not self._ticking and self.loop is not None:
            self._ticking = self._first_tick = True
            self.turn_began = now
            self.loop.call_soon(self._tick)

    def written(self, dispatch: Dispatch, now: float) -> None:
        """The crawl wrote ``dispatch`` to its connection at ``now``: its bytes
        leave on the loop's next turn, so its buckets are spent from here (a
        turn that runs long before then moves them again, as a tick sees it)."""
        if not dispatch.unwritten:
            return
        dispatch.unwritten = False
        state = self.hosts.peek(dispatch.key)
        if state is not None:
            self._move(dispatch, state, now + 2.0 * self.lag, now)
            if self.shared is None:  # what the answer may move back (its own spend)
                dispatch.spent = state.last_start
                dispatch.ip_next = self.ips.eligible_at(dispatch.ip)
        self._recent(dispatch, now)

    def released(self, release: Release[Any], now: float) -> None:
        """The gate released ``release`` to a waiter that sends it only once it
        resumes (:meth:`sent`); a long turn may come first, so it is held too."""
        self.unwritten.add(release, now)
        if release.until > now:  # behind a send moved later: spent as late
            state = self.hosts.peek(release.key)
            if state is not None:
                self.spend(state, release.ip, release.until)

    def ended(self, dispatch: Dispatch) -> None:
        """``dispatch``'s download ended (answered, failed, dropped): whatever it
        was, it holds its buckets no longer."""
        dispatch.unwritten = False

    def _hold(self, now: float) -> None:
        """Before a release at ``now``: every send still unwritten leaves no
        sooner than now, so its buckets (and the shared ones) move here."""
        at = now + 2.0 * self.lag
        for held in self.unwritten.overdue(now, at):
            state = self.hosts.peek(held.key)
            if state is None:
                continue
            self.held_sends += 1
            if isinstance(held, Dispatch):
                self._move(held, state, held.until, now)
            else:  # a release not resumed yet: its IP bucket as the gate spent it
                self.spend(state, held.ip, held.until)

    def _tick(self) -> None:
        """The first callback of a turn (scheduled by the previous one): if that
        turn ran long, the sends it may have held move to its end, before any
        timer or I/O of this turn can release the next request on their buckets.
        Ticks stop once no send is that recent (an idle loop sleeps)."""
        assert self.loop is not None
        now = self.loop.time()
        try:
            if now - self.turn_began > STALL:
                self.stalled(now)
        finally:
            # The turn that started the chain and this one share a number: a
            # waiter released with the chain's first send resumes here, before
            # this tick, so this turn's sends must not count as one turn newer.
            if self._first_tick:
                self._first_tick = False
            else:
                self.turn += 1
            self.turn_began = now
            if self.recent.pending(self.turn):
                self.loop.call_soon(self._tick)
            else:
                self._ticking = False

    def check(self, now: float) -> None:
        """Before the gate releases anything: a turn that has run long so far
        (a collection inside it) is holding the sends still on their way."""
        if self._ticking and now - self.turn_began > STALL:
            self.stalled(now)
            self.turn_began = now
        elif self.unwritten.due(now):
            self._hold(now)

    def spend_at_send(self, release: Release[Any], now: float) -> None:
        """Move the spend from the gate's release to the estimated real send.

        The waiter resumes ``lag`` after the gate released it (one event-loop
        turn: microseconds on an idle machine, milliseconds on a busy one),
        and its bytes leave about two turns later still. Overestimating this
        request's slip only ever widens the gap the server sees.
        """
        lag = now - release.at
        if lag > STALL:  # a stall, not a turn: the ticks moved what it held
            lag = STALL
        est = self.lag * 0.95
        self.lag = lag if lag > est else est
        state = self.hosts.peek(release.key)
        if state is None:
            return
        at = now + 2.0 * self.lag
        if release.interval > 0 and at > state.last_start:
            state.last_start = at
        if release.interval > 0 or self.ips.floor > 0:
            self.ips.spend(release.ip, at, state.ip_clamped)

    def timer_fired(self, expected: float, now: float) -> None:
        """The gate's timer ran at ``now`` for ``expected``: late means a stall."""
        if now - expected > STALL:
            self.stalled(now)

    def stalled(self, now: float) -> None:
        """The loop was held until ``now``: the sends still on their way leave
        only now, so their buckets (and the shared ones) move here."""
        at = now + 2.0 * self.lag
        for dispatch in self.recent.held(self.turn):
            state = self.hosts.peek(dispatch.key)
            if state is not None:
                self._move(dispatch, state, at, now)
        if self.unwritten.due(now):
            self._hold(now)

    def _move(self, dispatch: Dispatch, state: HostState, at: float, now: float) -> None:
        """``dispatch`` reaches its server no sooner than ``at``: its buckets move
        there, and with a shared backend a start later than its booking allowed
        for is reported (once per move later still)."""
        self.spend(state, dispatch.ip, at)
        if self.shared is not None and at - dispatch.at > dispatch.booked_slip:
            self.shared.late_arrival(dispatch, state, at, now)
            dispatch.booked_slip = at - dispatch.at  # reported: only a later move reports again

    def headers_received(self, dispatch: Dispatch, latency: float, now: float) -> None:
        """Learn when the download really started, once its headers are in.

        Scrapy's HTTP handler measures ``download_latency`` from the moment it
        was called, so ``now - latency`` is that start; a later start than the
        spend feeds the lag estimate. The server may have read the request
        later still (socket, connection set-up on a busy machine), and nothing
        tells that from a slow answer: whatever the first byte took beyond the
        host's usual latency counts as a late arrival.
        """
        dispatch.unwritten = False  # answered: it was written, seen or not
        half = (now - latency - dispatch.at) / 2.0
        if half > self.lag:
            self.lag = half if half < STALL else STALL
        state = self.hosts.peek(dispatch.key)
        if state is None:
            return
        usual = state.latency  # the server's smoothed latency of earlier fetches (0: none yet)
        lag = dispatch.loop_lag  # the crawl's own loop lag meanwhile: no set-up of the IP's
        own = latency - lag if lag > 0.0 else latency  # nan (not measured): False
        self.conns.answered(dispatch.key, dispatch.ip, dispatch.cold, own - usual)
        dispatch.cold = False  # headers once: the connection's set-up is learnt
        # Behind a proxy the way there varies request by request (a new connection
        # to the proxy, its own lookup and connection to the site), so no share of
        # the latency is known to be the way back: only the answer bounds the read.
        back = 0.0 if dispatch.proxied else (usual if usual < latency else latency)
        arrived = now - back
        booked = dispatch.server_spent == dispatch.server_spent  # not NaN: see sent()
        if self.shared is not None and not booked:
            self.spend(state, dispatch.ip, arrived)
            if arrived - dispatch.at > dispatch.booked_slip:
                self.shared.late_arrival(dispatch, state, arrived, now)
            return
        # Whether anything else spent the buckets since the send: asked before our own spend.
        host_mine = state.last_start == dispatch.spent
        ip_mine = self.ips.eligible_at(dispatch.ip) == dispatch.ip_next
        self.spend(state, dispatch.ip, arrived)
        if self.shared is not None and arrived - dispatch.at > dispatch.booked_slip:
            self.shared.late_arrival(dispatch, state, arrived, now)
            return
        if booked and now - self.margin < dispatch.at + dispatch.booked_slip:
            dispatch.answer = AnswerBound(  # the shared buckets move back with its feedback
                dispatch.ip, now, dispatch.server_spent,
                self.ips.spacing(dispatch.ip, state.ip_interval()), self.margin)
        self._bound_by_answer(dispatch, state, now, host_mine=host_mine, ip_mine=ip_mine)

    def _bound_by_answer(self, dispatch: Dispatch, state: HostState, now: float, *,
                         host_mine: bool, ip_mine: bool) -> None:
        """Count the spacing from the answer when that is sooner than from the estimate.

        The server read the request before its answer came back, so a start
        at ``now`` is never earlier than the one the server saw. Spending at
        ``now - margin`` (the gate adds ``margin`` back) spaces the next start
        at least one interval after the server's, whatever the send slip was;
        for a host that answers within the margin this is sooner than the
        estimate plus the margin. Only while nothing else spent the bucket
        since this send (``*_mine``), and with a shared backend only for a start
        the frontier booked (its shared buckets move back with the fetch's
        feedback; other bookings are spaced from the estimate by the others).
        """
        at = now - self.margin
        moved = False
        if host_mine and state.clamped > 0 and at < state.last_start:
            state.last_start = at
            moved = True
        if ip_mine and (state.clamped > 0 or self.ips.floor > 0):
            before = self.ips.eligible_at(dispatch.ip)
            self.ips.lower(dispatch.ip, at, state.ip_clamped)
            moved = moved or self.ips.eligible_at(dispatch.ip) < before
        if moved and self.on_earlier is not None:
            self.on_earlier(dispatch.key)
