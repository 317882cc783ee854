"""Downloader middlewares placed above the plugin (priority 960, nearer the
downloader) that end a download in ways the plugin's own hooks never see.

Used by the slot-release tests and the benchmark: the shapes of a custom
retry, captcha or ban-detection middleware.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response

MARK = "slot_test_reissued"


class _EveryThird:
    """Acts on every 3rd response of a request not yet acted on."""

    def __init__(self) -> None:
        self.seen = 0

    def due(self, request: Request) -> bool:
        if request.meta.get(MARK) or request.url.endswith("/robots.txt"):
            return False
        self.seen += 1
        return self.seen % 3 == 0


class ReissueEveryThird(_EveryThird):
    """Answers every 3rd response with a new Request (a custom retry)."""

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if not self.due(request):
            return response
        return request.replace(dont_filter=True, meta={**request.meta, MARK: True})


class ReplaceEveryThirdRequest(_EveryThird):
    """Answers every 3rd request with a new Request before it is downloaded:
    no download, so no signal and no ``process_response`` tells the plugin."""

    def process_request(self, request: Request) -> Request | None:
        if not self.due(request):
            return None
        return request.replace(dont_filter=True, meta={**request.meta, MARK: True})


class ReturnEveryThirdRequestItself(_EveryThird):
    """Answers every 3rd request with the same Request object before it is
    downloaded (a middleware that sends a request back to the scheduler, say
    to wait for a session): it re-enters the plugin as the object it was."""

    def process_request(self, request: Request) -> Request | None:
        if not self.due(request):
            return None
        request.meta[MARK] = True
        return request


class IgnoreEveryThird(_EveryThird):
    """Raises ``IgnoreRequest`` for every 3rd response (a ban detector dropping it)."""

    def process_response(self, request: Request, response: Response) -> Response:
        if self.due(request):
            raise IgnoreRequest(f"slot test: ignored {request.url}")
        return response


class FailEveryThird(_EveryThird):
    """Raises a plain exception for every 3rd response (a buggy middleware)."""

    def process_response(self, request: Request, response: Response) -> Response:
        if self.due(request):
            raise ValueError(f"slot test: failed {request.url}")
        return response


class AnswerErrors:
    """Answers every failed download with a Response of its own (status 599),
    so no ``process_exception`` below it runs: only the download's own end
    tells the plugin that the server refused the connection."""

    def process_exception(self, request: Request, exception: Exception) -> Response:
        return Response(request.url, status=599, request=request)


def at_960(name: str) -> dict[str, Any]:
    """``DOWNLOADER_MIDDLEWARES`` placing ``name`` (a class above) at 960."""
    return {f"slot_middlewares.{name}": 960}
