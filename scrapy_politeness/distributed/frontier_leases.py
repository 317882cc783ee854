"""What ends a request the frontier handed out, whatever path it takes.

A popped request is leased to its process until it ends. Many ends never
reach Scrapy's downloader: a downloader middleware raises ``IgnoreRequest``
(the plugin's DNS failure or dead/parked host, robots.txt), answers from a
cache, or returns another request (a retry, a redirect). A lease left open by
one of them kept ``len(queue)`` above 0 in every process (scrapy-redis never
idled), was renewed by the heartbeat forever and was requeued at close, so
the failed URL came back on every run.

A lease ends once the request's callback (or errback) has run, not when its
response arrives: a process killed during its callbacks (SIGKILL, OOM) then
loses no request, its leases go back to the queue and another process fetches
them again. So the end is :meth:`Leases.sweep`: a request the engine no longer
has in progress has ended, whatever path it took (a response, a download
error, an exception from a middleware). The engine adds a request to its
in-progress set in the same call that pops it, and removes it once its
download and the callback or errback are done; the queue sweeps before every
pop, and its heartbeat. Signals end what the sweep would see late or not at
all: ``request_dropped``, and ``request_scheduled`` of a copy that carries the
lease id in its meta (a retry or redirect: the copy is queued, so the
original's lease ends). Without the engine's set (another Scrapy) a lease ends
with its download, as the signals report it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request, signals

from scrapy_politeness.downloader.signal_hub import SignalHub
from scrapy_politeness.scrapy_internals import engine_in_progress

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

__all__ = ["LEASE_META", "Leases"]

LEASE_META = "_politeness_lease"  # the lease id, copied into retries and redirects


class Leases:
    """The requests this process holds, and the lease ids to acknowledge."""

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = crawler
        self._held: dict[Request, str] = {}
        self._by_id: dict[str, Request] = {}
        self.acks: list[str] = []
        hub = SignalHub.of(crawler)  # per-request signals: one receiver each for the plugin
        hub.on(signals.request_dropped, self._ended)
        hub.on(signals.request_scheduled, self._scheduled)
        # A Scrapy whose in-progress set the sweep cannot read: the download's end.
        hub.on(signals.request_left_downloader, self._downloaded)
        hub.on(signals.response_received, self._answered)

    def __bool__(self) -> bool:
        return bool(self._held or self.acks)

    def hold(self, request: Request, lease: str) -> None:
        self._held[request] = lease
        self._by_id[lease] = request
        request.meta[LEASE_META] = lease

    def end(self, request: Request) -> None:
        """``request`` ended: its lease goes with the next round trip."""
        lease = self._held.pop(request, None)
        if lease is not None:
            del self._by_id[lease]
            self.acks.append(lease)

    def take_acks(self) -> list[str]:
        acks, self.acks = self.acks, []
        return acks

    def give_back(self, acks: list[str]) -> None:
        """Acks whose round trip failed: the next one carries them."""
        self.acks[:0] = acks

    def sweep(self) -> None:
        """End every held request the engine no longer has in progress.

        Reads the engine's private ``_slot.inprogress`` through
        :mod:`scrapy_politeness.scrapy_internals`; without it (another Scrapy)
        only the signals end leases.
        """
        if not self._held:
            return
        inprogress = engine_in_progress(self._crawler)
        if inprogress is None:
            return
        for request in [r for r in self._held if r not in inprogress]:
            self.end(request)

    def end_all(self) -> None:
        """The spider closed: the engine finished everything it had in progress."""
        for request in list(self._held):
            self.end(request)

    def _ended(self, request: Request, **kwargs: Any) -> None:
        self.end(request)

    def _downloaded(self, request: Request, **kwargs: Any) -> None:
        if engine_in_progress(self._crawler) is None:
            self.end(request)

    def _answered(self, response: Any, request: Request, **kwargs: Any) -> None:
        self._downloaded(request)

    def _scheduled(self, request: Request, **kwargs: Any) -> None:
        """A request scheduled again (the same one, or a copy: retry, redirect)
        queues anew: the lease it came from ends."""
        lease = request.meta.pop(LEASE_META, None)
        original = self._by_id.get(lease) if isinstance(lease, str) else None
        if original is not None:
            self.end(original)
