"""A downloader middleware for the ``reissue-960`` scenario: placed above the
plugin (priority 960, nearer the downloader), it answers every 3rd response
with a new Request for the same URL, the shape of a custom retry, captcha or
ban-detection middleware. Each URL is re-issued at most once.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.http import Response

MARK = "bench_reissued"
PATH = "bench.reissue.ReissueEveryThird"


class ReissueEveryThird:
    """Every 3rd response not already re-issued becomes a new Request."""

    def __init__(self) -> None:
        self.seen = 0

    def process_response(self, request: Request, response: Response) -> Request | Response:
        if request.meta.get(MARK):
            return response
        self.seen += 1
        if self.seen % 3:
            return response
        return request.replace(dont_filter=True, meta={**request.meta, MARK: True})
