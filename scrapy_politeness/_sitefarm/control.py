"""Control endpoint: lets tests read arrivals / DNS counts and reset state.

Plain HTTP + JSON so the client needs nothing beyond urllib.
"""

from __future__ import annotations

import json
from typing import Any

from scrapy_politeness._sitefarm.httpserver import ConnInfo
from scrapy_politeness._sitefarm.httpwire import BadRequest, Request, Response
from scrapy_politeness._sitefarm.state import FarmState

JSON = "application/json"


def _json(status: int, payload: Any) -> Response:
    return Response(status, json.dumps(payload).encode(), JSON)


class ControlHandler:
    """GET /arrivals, GET /dns_queries, GET /dns_dropped, POST /reset (GET /health for liveness)."""

    def __init__(self, state: FarmState) -> None:
        self._state = state
        self._ids = 0

    def new_conn_id(self) -> int:
        self._ids += 1
        return self._ids

    async def handle(self, req: Request, conn: ConnInfo) -> Response:
        route = (req.method, req.path)
        if route == ("GET", "/arrivals"):
            return _json(200, [a.to_dict() for a in self._state.sorted_arrivals()])
        if route == ("GET", "/dns_queries"):
            return _json(200, dict(self._state.dns_queries))
        if route == ("GET", "/dns_dropped"):
            return _json(200, dict(self._state.dns_dropped))
        if route == ("POST", "/reset"):
            self._state.reset()
            return _json(200, {"ok": True})
        if route == ("GET", "/health"):
            return _json(200, {"ok": True})
        return _json(404, {"error": f"no route {req.method} {req.path}"})

    def bad_request(self, bad: BadRequest, conn: ConnInfo) -> Response:
        return _json(400, {"error": bad.reason})

    def setup_delay(self, req: Request) -> float:
        return 0.0  # the control endpoint is local: no network to set up
