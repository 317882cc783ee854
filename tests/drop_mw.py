"""Downloader middlewares that end some requests before the downloader (fleet tests).

``IgnoreOdd`` raises ``IgnoreRequest`` for the pages whose number is odd;
``ReissueOdd`` answers them with a new request (no meta) for one page that is
not among the seeded ones, so the second such request is dropped by the
dupefilter (``request_dropped``).
"""

from __future__ import annotations

from scrapy import Request
from scrapy.exceptions import IgnoreRequest


def _odd(request: Request) -> bool:
    last = request.url.rstrip("/").rsplit("/", 1)[-1]
    return last.isdigit() and int(last) % 2 == 1


class IgnoreOdd:
    def process_request(self, request: Request) -> None:
        if _odd(request):
            raise IgnoreRequest("drop_mw: odd page")


class ReissueOdd:
    def process_request(self, request: Request) -> Request | None:
        if _odd(request):
            return Request(request.url.rsplit("/p/", 1)[0] + "/p/again")
        return None
