"""A downloader middleware that makes a crawl CPU-bound: every response costs
``BURN`` seconds of the event loop (a parse that is heavy, a slow pipeline).

Placed far from the downloader (priority 100), so the plugin below it has
already measured the download when the loop is held.
"""

from __future__ import annotations

import time

from scrapy import Request
from scrapy.http import Response

BURN = 0.03


class BurnCpu:
    """Spins for ``BURN`` seconds on every response (holding the event loop)."""

    def process_response(self, request: Request, response: Response) -> Response:
        end = time.perf_counter() + BURN
        while time.perf_counter() < end:
            pass
        return response
