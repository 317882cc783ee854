"""No credential of POLITENESS_BACKEND reaches any message (issue 14 item 3).

Every URL form the settings accept or reject, with a password in the userinfo
or in the query, in any case of scheme: the ``ValueError`` of a rejected value,
the ``BackendUnavailable`` of an unreachable server and every log line show
``***`` and never the secret (raw or percent-encoded).
"""

from __future__ import annotations

import json
import logging

import pytest
import pytest_twisted
from redis_server import aio, free_port, require_redis_server
from scrapy.settings import Settings

from scrapy_politeness.distributed import make_backend
from scrapy_politeness.distributed.redaction import redact_url, secrets_of
from scrapy_politeness.distributed.redis_backend import (
    BackendError,
    BackendUnavailable,
    RedisBackend,
)
from scrapy_politeness.settings import PolitenessSettings

SECRET = "Sup3r:Secr/et"  # a ':' and a '/' in it: percent-encoded in URLs
ENC = "Sup3r%3ASecr%2Fet"


def _accepted(port: int) -> list[str]:
    return [
        f"redis://crawler:{ENC}@127.0.0.1:{port}/0",
        f"redis://:{ENC}@127.0.0.1:{port}/0",
        f"REDIS://crawler:{ENC}@127.0.0.1:{port}/0",
        f"Rediss://crawler:{ENC}@127.0.0.1:{port}/0",
        f"redis://127.0.0.1:{port}/0?password={ENC}",
        f"REDIS://127.0.0.1:{port}/0?db=0&PassWord={ENC}",
        f"unix://:{ENC}@/tmp/no-such-redis-{port}.sock?db=0",
        f"unix:///tmp/no-such-redis-{port}.sock?password={ENC}",
    ]


REJECTED = [
    f"http://crawler:{ENC}@127.0.0.1:6379/0",
    f"redis:/crawler:{ENC}@127.0.0.1:6379/0",  # a typo: one slash
    f"127.0.0.1:6379/0?password={ENC}",
    f"HTTP://127.0.0.1/0?password={ENC}",
    f"crawler:{SECRET}@127.0.0.1",
]


def _clean(text: str) -> None:
    for secret in (SECRET, ENC, "Secr", "%2A%2A%2A"):
        assert secret not in text, text


def test_redact_url_shows_stars_for_every_form() -> None:
    assert redact_url("redis://:hunter2@h:1/0") == "redis://:***@h:1/0"
    assert redact_url("rediss://u:p%40ss@h/0") == "rediss://u:***@h/0"
    assert redact_url("redis://h/0?password=pw&db=1") == "redis://h/0?password=***&db=1"
    assert redact_url("REDIS://h/0?db=1&PASSWORD=pw#x") == "REDIS://h/0?db=1&PASSWORD=***#x"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"
    assert redact_url("redis://user@h/0") == "redis://user@h/0"
    for url in _accepted(6379) + REJECTED:
        _clean(redact_url(url))


def test_secrets_of_finds_raw_and_decoded_forms() -> None:
    assert SECRET in secrets_of(f"redis://u:{ENC}@h/0")
    assert ENC in secrets_of(f"redis://h/0?password={ENC}")


@pytest.mark.parametrize("url", REJECTED)
def test_rejected_backend_url_is_refused_without_its_password(url: str) -> None:
    with pytest.raises(ValueError, match="POLITENESS_BACKEND") as info:
        PolitenessSettings.from_settings(Settings({"POLITENESS_BACKEND": url}))
    _clean(str(info.value))
    assert "***" in str(info.value)
    with pytest.raises(ValueError, match="POLITENESS_BACKEND") as info2:
        make_backend(url, namespace="t", on_loss="hold")
    _clean(str(info2.value))


def test_non_string_backend_value_is_not_echoed() -> None:
    with pytest.raises(ValueError, match="got a bytes") as info:
        PolitenessSettings.from_settings(
            Settings({"POLITENESS_BACKEND": f"redis://u:{SECRET}@h/0".encode()}))
    _clean(str(info.value))


def test_any_case_of_scheme_is_accepted() -> None:
    settings = PolitenessSettings.from_settings(
        Settings({"POLITENESS_BACKEND": f"REDIS://127.0.0.1:1/0?password={ENC}"}))
    assert settings.backend.startswith("redis://")
    assert isinstance(make_backend(settings.backend, namespace="t", on_loss="hold"),
                      RedisBackend)



async def _unreachable_forms() -> list[str]:
    texts = []
    for url in _accepted(free_port()):
        backend = make_backend(PolitenessSettings.from_settings(
            Settings({"POLITENESS_BACKEND": url})).backend, namespace="t", on_loss="hold")
        assert isinstance(backend, RedisBackend)
        # Unreachable; or, for the query key redis-py does not know, refused.
        with pytest.raises((BackendUnavailable, BackendError)) as info:
            await backend.open()
        texts += [str(info.value), repr(info.value), backend.shown_url]
    return texts


@pytest_twisted.ensureDeferred
async def test_unreachable_backend_never_shows_the_password(
        caplog: pytest.LogCaptureFixture) -> None:
    require_redis_server()
    caplog.set_level(logging.DEBUG)
    texts = await aio(_unreachable_forms())
    for text in texts:
        _clean(text)
        assert "***" in text
    _clean(caplog.text)


@pytest.mark.integration
@pytest.mark.parametrize("url", [
    f"http://crawler:{ENC}@127.0.0.1:6379/0",  # rejected at start-up
    f"REDIS://127.0.0.1:{{port}}/0?password={ENC}",  # accepted, unreachable
    f"redis://crawler:{ENC}@127.0.0.1:{{port}}/0",  # accepted, unreachable
])
def test_a_real_crawl_log_never_shows_the_password(url: str) -> None:
    from crawling import ADDON, run_crawl

    require_redis_server()
    result = run_crawl(["http://127.0.0.1:9/never-fetched"], {
        "ADDONS": ADDON, "POLITENESS_BACKEND": url.format(port=free_port()),
        "LOG_LEVEL": "DEBUG"}, follow=False, check=False)
    assert "POLITENESS_BACKEND" in result.log or "Redis" in result.log  # it said why
    _clean(result.log)
    _clean(json.dumps(result.stats))
