"""Scrapy's own throttles under the plugin: each one is switched off, and named in a warning.

Scrapy spaces requests inside its downloader, per download slot, AFTER the
downloader middlewares: ``DOWNLOAD_DELAY`` (or a spider's ``download_delay``),
the ``delay`` of a ``DOWNLOAD_SLOTS`` entry, and AutoThrottle, which rewrites a
slot's delay after every response. By then the politeness gate has released
the request and spent its host and IP buckets for *now*; a request the slot
holds back starts later than the gate accounted for, closer to the next
request of another host on the same IP (18 hosts on 6 IPs with
``DOWNLOAD_DELAY = 1``: 24 IP gaps under the floor). So, on every set-up
path (add-on, middleware only, a spider's ``custom_settings``):

- the delay of a request's download slot is set to 0 when the request
  reaches the downloader (Scrapy's ``request_reached_downloader`` signal comes
  after the slot is chosen and before its queue is processed), whoever set it;
- AutoThrottle, if this crawl built it, is disconnected;
- a ``DOWNLOAD_SLOTS`` delay becomes that host's floor, so the host is never
  fetched faster than the user asked;
- each of these settings, and every other setting of Scrapy's throttles that
  the user set, is named in one WARNING with what replaces it.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.settings import SETTINGS_PRIORITIES

from scrapy_politeness.downloader.signal_hub import SignalHub
from scrapy_politeness.host_overrides import CONFIG_FIELDS, host_overrides
from scrapy_politeness.scrapy_internals import switch_off_autothrottle, zero_slot_delay
from scrapy_politeness.setting_values import number
from scrapy_politeness.settings import PRIORITY_NAMES

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["REPLACED", "SlotDelays", "concurrency_warnings", "replaced_message", "slot_delays",
           "take_over", "throttle_warnings", "with_slot_floors"]

logger = logging.getLogger(__name__)

_HELD = ("Scrapy would hold each request in its download slot after the politeness gate let "
         "it through, closer to the next request on the same IP")
_JITTER = ("no replacement: jitter makes some gaps shorter than the delay asked for, and the "
           "plugin spaces requests exactly, never below an interval")
REPLACED: dict[str, str] = {
    "AUTOTHROTTLE_ENABLED": (
        "is overridden, AutoThrottle is off: its delays are download slot delays (" + _HELD
        + "), and it ignores 429/503 and Retry-After; the plugin adapts each host's interval "
        "itself (429/503, Retry-After, errors, latency)"),
    "AUTOTHROTTLE_START_DELAY": "is not read; use POLITENESS_DEFAULT (a new host's interval)",
    "AUTOTHROTTLE_MAX_DELAY": "is not read; use POLITENESS_CEILING (the slowest interval)",
    "AUTOTHROTTLE_TARGET_CONCURRENCY": (
        "is not read and has no replacement: the plugin spaces the starts of a host's requests "
        "by an interval instead of aiming at a concurrency; CONCURRENT_REQUESTS_PER_DOMAIN still "
        "caps one host's requests in flight"),
    "AUTOTHROTTLE_DEBUG": (
        "is not read; the live line (POLITENESS_LOG_INTERVAL), the closing report and "
        "POLITENESS_TRACE show the plugin's decisions"),
    "DOWNLOAD_DELAY": (
        f"is set to 0: {_HELD}; use POLITENESS_DEFAULT (a new host's interval) and "
        "POLITENESS_FLOOR (the fastest, as DOWNLOAD_DELAY was under AutoThrottle)"),
    "DOWNLOAD_DELAY_JITTER": f"is set to 0 and has {_JITTER}",
    "RANDOMIZE_DOWNLOAD_DELAY": f"is not applied and has {_JITTER}",
}
"""Each setting of Scrapy's throttles: what the plugin does with it, and what replaces it."""


def _origin(settings: Any, name: str) -> str:
    priority = settings.getpriority(name) or 0
    return PRIORITY_NAMES.get(priority, f"priority {priority}")


def replaced_message(name: str, value: Any, origin: str) -> str:
    """The one warning for a throttle setting of Scrapy's that the user set."""
    return f"scrapy-politeness: {name} = {value!r} (from {origin}) {REPLACED[name]}"


def _in_effect(settings: Any, name: str) -> bool:
    """Whether the user set ``name`` to a value that would do something here."""
    if (settings.getpriority(name) or 0) <= SETTINGS_PRIORITIES["default"]:
        return False
    if name == "AUTOTHROTTLE_ENABLED":
        return bool(settings.getbool(name))
    if name in ("DOWNLOAD_DELAY", "DOWNLOAD_DELAY_JITTER"):  # 0 is what the plugin wants
        try:
            return bool(settings.getfloat(name) != 0)
        except ValueError:
            return True
    return True


def throttle_warnings(settings: Any) -> list[str]:
    """Warn about each throttle setting of Scrapy's still set; the messages, for tests.

    With the add-on, the values it switched off are 0 by now (it warned about
    them itself, with the same words); a spider's ``download_delay`` attribute
    is applied after add-ons, so it is caught here on every path.
    """
    messages = [replaced_message(name, settings[name], _origin(settings, name))
                for name in REPLACED if _in_effect(settings, name)]
    for message in messages:
        logger.warning("%s", message)
    return messages


def concurrency_warnings(settings: Any) -> list[str]:
    """Warn where a download slot admits fewer requests than the gate lets through.

    The gate keeps up to CONCURRENT_REQUESTS_PER_DOMAIN requests of a host in
    flight; a slot with a lower concurrency queues the rest inside Scrapy's
    downloader, after the gate released them: the same late start as a delay.
    Not set to anything else (a cap on connections is the user's to keep);
    the remedy is named instead.
    """
    per_host = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
    late = ("a request the gate let through can wait in Scrapy's download slot for another "
            "to finish, and start closer to the next request on its IP than the IP rule")
    messages = []
    per_ip = settings.getint("CONCURRENT_REQUESTS_PER_IP")
    if per_ip > 0:
        messages.append(f"scrapy-politeness: CONCURRENT_REQUESTS_PER_IP = {per_ip} makes Scrapy's "
                        f"download slots per IP: {late}; use POLITENESS_IP_FLOOR (the spacing "
                        "per IP) and leave CONCURRENT_REQUESTS_PER_IP at 0")
    for key, entry in settings.getdict("DOWNLOAD_SLOTS").items():
        concurrency = entry.get("concurrency") if isinstance(entry, Mapping) else None
        if isinstance(concurrency, int) and 0 < concurrency < per_host:
            messages.append(
                f"scrapy-politeness: DOWNLOAD_SLOTS[{key!r}] concurrency {concurrency} is below "
                f"CONCURRENT_REQUESTS_PER_DOMAIN ({per_host}): {late}; set "
                f"CONCURRENT_REQUESTS_PER_DOMAIN = {concurrency} (the gate then holds the rest) "
                "or remove it")
    for message in messages:
        logger.warning("%s", message)
    return messages


def slot_delays(settings: Any) -> dict[str, float]:
    """The ``delay`` of each ``DOWNLOAD_SLOTS`` entry that has one above 0, checked."""
    slots = settings.getdict("DOWNLOAD_SLOTS")
    found = {}
    for key, entry in slots.items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"DOWNLOAD_SLOTS[{key!r}] must be a dict, got {entry!r}")
        delay = entry.get("delay")
        if delay is not None:
            value = number(f"DOWNLOAD_SLOTS[{key!r}]['delay']", delay)
            if value > 0:
                found[str(key)] = value
    return found


def with_slot_floors(settings: PolitenessSettings,
                     delays: dict[str, float]) -> tuple[PolitenessSettings, list[str]]:
    """``settings`` where each slot delay is its host's floor; the warnings to log.

    A host named in POLITENESS_HOSTS keeps that band. Under domain grouping the
    slots of one group give it the largest of their delays.
    """
    from scrapy_politeness.downloader.host_keys import make_key_function

    key = make_key_function(settings.grouping)
    c = settings.config
    floors: dict[str, float] = {}
    messages = []
    for slot, delay in delays.items():
        group = key(slot)
        shown = (f"scrapy-politeness: DOWNLOAD_SLOTS[{slot!r}] delay {delay:g}s is set to 0 "
                 f"({_HELD})")
        if group in settings.hosts:
            messages.append(f"{shown}; POLITENESS_HOSTS gives {group!r} its band already")
            continue
        floors[group] = max(delay, floors.get(group, 0.0))
        messages.append(f"{shown}; it becomes the floor of {group!r}, as "
                        f"POLITENESS_HOSTS = {{{group!r}: {{'floor': {delay:g}}}}} would")
    raw = {group: {"floor": floor, "default": max(c.default, floor),
                   "ceiling": max(c.ceiling, floor)} for group, floor in floors.items()}
    values = {field: getattr(c, field) for field in CONFIG_FIELDS}
    added = host_overrides(raw, values, c.recovery, settings.grouping)
    return replace(settings, hosts={**added, **settings.hosts}), messages


class SlotDelays:
    """Sets the delay of each request's download slot to 0 as it reaches the downloader.

    Whoever set it: the settings (announced at start), or an extension at run
    time (announced once, when first found).
    """

    def __init__(self, crawler: Crawler, *, announced: bool) -> None:
        # Held by the signal hub (nothing else holds this object); the crawler
        # only weakly, so that a finished crawler can still be collected.
        self.crawler = weakref.ref(crawler)
        self.announced = announced
        SignalHub.of(crawler).on(signals.request_reached_downloader, self.reached)

    def reached(self, request: Request, **kwargs: Any) -> None:
        delay = zero_slot_delay(self.crawler(), request)
        if delay and not self.announced:
            self.announced = True
            logger.warning("scrapy-politeness: download slot %r had a delay of %gs, set while "
                           "the crawl ran (by an extension?); it is set to 0 for every request: "
                           "%s", request.meta.get("download_slot"), delay, _HELD)


def take_over(crawler: Crawler, *, announced: bool) -> SlotDelays:
    """Switch Scrapy's throttles off for this crawl (see the module docstring)."""
    if switch_off_autothrottle(crawler):
        announced = True
    return SlotDelays(crawler, announced=announced)
