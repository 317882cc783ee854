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


def at_960(name: str) -> dict[str, Any]:
    """``DOWNLOADER_MIDDLEWARES`` placing ``name`` (a class above) at 960."""
    return {f"slot_middlewares.{name}": 960}
