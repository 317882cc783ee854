"""The crawl's start: what the plugin checks, says and switches off, once.

``checks`` reads and checks the settings (a bad value stops the crawl with one
ERROR line, ``failed_start``), ``throttles`` switches Scrapy's own throttles off
on every set-up path, ``start_line`` says what the crawl will use. Imports
Scrapy, the plugin's settings and ``scrapy_internals``; nothing of the request
path.
"""

from scrapy_politeness.startup.checks import (
    BackendNotUsable,
    check_asyncio,
    check_backend,
    load_settings,
    warn_missing_internals,
    warn_unknown_settings,
)
from scrapy_politeness.startup.failed_start import (
    StartRefused,
    quiet_failed_start,
    refuse_to_start,
)
from scrapy_politeness.startup.start_line import queue_in_use, settings_origins, start_line

__all__ = ["BackendNotUsable", "StartRefused", "check_asyncio", "check_backend", "load_settings",
           "queue_in_use", "quiet_failed_start", "refuse_to_start", "settings_origins",
           "start_line", "warn_missing_internals", "warn_unknown_settings"]
