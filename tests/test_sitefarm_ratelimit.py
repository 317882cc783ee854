"""The farm's token-bucket host against a real farm process (loopback only)."""

from __future__ import annotations

import email.utils
import http.client
import time
from typing import Any

from scrapy_politeness._sitefarm import Farm
from scrapy_politeness._sitefarm.ratelimit import TokenBucket
from scrapy_politeness._sitefarm.spec import parse_spec

HOST = "bucket.farm.test"


def _spec(**host: Any) -> dict[str, Any]:
    raw = {"ip": "127.0.0.2", "kind": "rate_limited", "pages": 50, **host}
    return {"ips": ["127.0.0.2"], "hosts": {HOST: raw}}


def _get(farm: Farm, path: str = "/p/1") -> tuple[int, str | None]:
    conn = http.client.HTTPConnection("127.0.0.2", farm.port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": HOST})
        resp = conn.getresponse()
        resp.read()
        return resp.status, resp.getheader("Retry-After")
    finally:
        conn.close()


def test_burst_then_429_with_retry_after_seconds() -> None:
    with Farm(_spec(rate_interval=10.0, burst=2, retry_after=5)) as farm:
        got = [_get(farm) for _ in range(3)]
    assert [s for s, _ in got] == [200, 200, 429]
    assert got[2][1] == "5"


def test_retry_after_as_http_date_is_never_early() -> None:
    with Farm(_spec(rate_interval=10.0, retry_after=2, retry_after_form="date")) as farm:
        assert _get(farm)[0] == 200
        before = time.time()
        status, header = _get(farm)
    assert status == 429
    assert header is not None
    when = email.utils.parsedate_to_datetime(header).timestamp()
    assert before + 2 <= when + 1e-6 <= before + 3.5


def test_limit_drops_after_n_served() -> None:
    host = parse_spec(_spec(rate_interval=0.25, rate_change_after=3,
                            rate_interval_after=1.0)).hosts[HOST]
    bucket = TokenBucket(host)
    # 4/s: served every 0.25 s three times; then it takes 1 s per token.
    assert [bucket.admit(t) for t in (0.0, 0.25, 0.5)] == [True, True, True]
    assert bucket.admit(0.75) is False
    assert bucket.admit(1.5) is True
    assert bucket.admit(2.0) is False
    assert bucket.admit(2.5) is True
