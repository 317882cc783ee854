"""Each request the gate let through holds one in-flight slot of its host
until its download ends, however it ends, and gives it back exactly once.

The slot is freed from the download itself, not from the plugin's place in the
middleware chain: a middleware nearer the downloader may answer a response with
a new Request, raise, or swallow an exception, and the plugin's own
``process_response``/``process_exception`` never run. So the ticket is given
back at the first of:

- Scrapy's ``response_downloaded`` signal: the response's status, latency and
  Retry-After are fed back, before any middleware sees it;
- ``request_left_downloader`` after a failed download: Scrapy sends it from
  the ``finally`` of its download, so the exception on its way out
  (``scrapy_internals.exception_leaving``) is fed back as ``process_exception`` would (checked
  against the installed Scrapy by tests/test_slot_release.py; should that
  change, the plugin's own hook or the sweep still frees the slot);
- the plugin's ``process_response``/``process_exception``, for an answer that
  did not come from a download (a middleware above it answered instead);
- its own return: a Request object that comes back to the plugin (a middleware
  above returned ``request`` itself from ``process_request``) while it still
  holds a ticket ended that pass unreported; freed as the sweep frees (below),
  before it can wait in the gate behind its own slot;
- the periodic sweep: a request that left Scrapy's downloader (``active``)
  with its ticket still held ended in a way nothing reported (a Request
  returned from another ``process_request``, a cancellation); freed with no
  outcome, counted in ``politeness/released_unreported``.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest

from scrapy_politeness.downloader.failure_kinds import classify_exception
from scrapy_politeness.downloader.proxies import ProxyFailures
from scrapy_politeness.downloader.signal_hub import SignalHub
from scrapy_politeness.observe.observer import STATS
from scrapy_politeness.policy import reached_server, retry_after_seen
from scrapy_politeness.policy.latency import server_latency
from scrapy_politeness.scrapy_internals import downloader_active, exception_leaving

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from scrapy_politeness.downloader.address_fallback import AddressFallback
    from scrapy_politeness.downloader.cdn_edges import EdgeWatch
    from scrapy_politeness.downloader.feedback import Outcomes
    from scrapy_politeness.downloader.gate_driver import GateDriver
    from scrapy_politeness.downloader.loop_lag import LoopMonitor
    from scrapy_politeness.downloader.send_lateness import Dispatch, SendSlip
    from scrapy_politeness.policy import HostTable

__all__ = ["Tickets"]


class Tickets:
    """The held slots of one crawler: ``held`` maps a request to its dispatch."""

    def __init__(self, crawler: Crawler, *, driver: GateDriver, outcomes: Outcomes,
                 hosts: HostTable, loop_lag: LoopMonitor, slip: SendSlip | None = None,
                 fallback: AddressFallback | None = None,
                 edges: EdgeWatch | None = None) -> None:
        self.crawler = crawler
        self.loop_lag = loop_lag
        self.driver = driver
        self.outcomes = outcomes
        self.hosts = hosts
        self.stats = crawler.stats
        self.held: dict[Request, Dispatch] = {}
        self.slip = slip  # an ended send holds its buckets no longer (SendSlip.ended)
        self.proxy = ProxyFailures(self.stats, driver.done)  # outcomes that are the proxy's
        self.fallback = fallback  # a connection the address refused: the name's next address
        self.edges = edges  # CDN edges told by their headers (POLITENESS_CDN_EDGES)
        hub = SignalHub.of(crawler)
        hub.on(signals.response_downloaded, self._downloaded)
        hub.on(signals.request_left_downloader, self._left)

    def hold(self, request: Request, dispatch: Dispatch) -> None:
        self.held[request] = dispatch

    def _take(self, request: Request) -> Dispatch | None:
        """``request``'s dispatch, its slot given back (None: it held none)."""
        dispatch = self.held.pop(request, None)
        if dispatch is not None and dispatch.unwritten and self.slip is not None:
            self.slip.ended(dispatch)
        return dispatch

    def abort(self, request: Request) -> None:
        """The request failed on its way to the downloader: free its slot, no outcome."""
        dispatch = self._take(request)
        if dispatch is not None:
            self.driver.done(dispatch.key)

    def reentered(self, request: Request) -> None:
        """``request`` is back in the plugin holding a ticket: its last pass ended
        unreported, so its slot is freed now (no outcome), not overwritten."""
        dispatch = self._take(request)
        assert dispatch is not None
        self.driver.done(dispatch.key)
        self.stats.inc_value(STATS + "released_unreported")

    # -- the ends of a download ------------------------------------------------

    def response(self, request: Request, response: Response) -> None:
        """Feed the response back and free the slot (once)."""
        dispatch = self._take(request)
        if dispatch is None:
            return
        if self.proxy.answered(request, response, dispatch.key):
            return  # the proxy's own answer (407, a name it cannot resolve): the site was not asked
        if self.edges is not None and dispatch.ip is not None:  # before the IP learns from it
            self.edges.response(dispatch.ip, dispatch.key, response.headers)
        loop = self.driver.loop
        assert loop is not None
        now = loop.time()  # an HTTP-date is measured on the server's clock
        retry_after = retry_after_seen(self.hosts.get(dispatch.key), response.headers, now)
        latency = float(request.meta.get("download_latency") or 0.0)
        if latency > 0.0:  # the server's share: net of the crawl's own loop lag meanwhile
            lag = dispatch.loop_lag
            if math.isnan(lag):  # no headers signal (another handler): lag until now
                lag = self.loop_lag.busy(now) - dispatch.busy
            latency = server_latency(latency, lag)
            if latency == 0.0:
                self.stats.inc_value(STATS + "latency/loop_bound")
        self.outcomes.feed(dispatch, response.status, retry_after, latency, now)

    def exception(self, request: Request, exception: BaseException) -> None:
        """Feed a failed download back (when it reached the server) and free the slot (once)."""
        dispatch = self._take(request)
        if dispatch is None:
            return
        if isinstance(exception, IgnoreRequest) or not isinstance(exception, Exception):
            self.driver.done(dispatch.key)  # dropped, or cancelled: no outcome
            return
        if self.proxy.raised(request, exception, dispatch.key):
            return  # the proxy failed: nothing to learn about the site
        if self.fallback is not None and self.fallback.failed(request, exception, dispatch.ip):
            self.driver.done(dispatch.key)  # the next address is tried before the host learns
            return
        kind = classify_exception(exception)
        if not reached_server(kind):  # no server saw it: nothing to back off from
            self.stats.inc_value(STATS + kind.value)
            self.driver.done(dispatch.key)
            return
        loop = self.driver.loop
        assert loop is not None
        self.outcomes.feed(dispatch, 0, None, 0.0, loop.time())

    def _downloaded(self, response: Response, request: Request, **kwargs: Any) -> None:
        self.response(request, response)

    def _left(self, request: Request, **kwargs: Any) -> None:
        # Sent from the ``finally`` of Scrapy's download: with no response
        # signalled first, the exception being raised there is its outcome.
        if request in self.held:
            exc = exception_leaving()
            if exc is not None:
                self.exception(request, exc)
            # else: left for process_exception, or the sweep

    # -- what nothing reported ---------------------------------------------------

    def sweep(self) -> int:
        """Free the tickets of requests no longer in Scrapy's downloader."""
        active = downloader_active(self.crawler)
        if active is None or not self.held:
            return 0
        gone = [request for request in self.held if request not in active]
        for request in gone:
            dispatch = self._take(request)
            if dispatch is not None:
                self.driver.done(dispatch.key)
        if gone:
            self.stats.inc_value(STATS + "released_unreported", len(gone))
        return len(gone)

    def live(self) -> Counter[str]:
        """Host key -> requests holding a slot and still in Scrapy's downloader."""
        active = downloader_active(self.crawler)
        return Counter(d.key for r, d in self.held.items() if active is None or r in active)

