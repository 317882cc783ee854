"""scrapy-politeness: a polite-by-design throttle for Scrapy.

Enable it with ``ADDONS = {"scrapy_politeness.Addon": 300}``.

The Scrapy-facing names (``Addon``, ``PolitenessMiddleware``,
``PolitenessSettings``) are imported lazily on first access, so importing the
pure ``scrapy_politeness.policy`` layer does not pull in Scrapy or Twisted.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from scrapy_politeness.policy import Config, Signal

if TYPE_CHECKING:
    from scrapy_politeness.addon import Addon
    from scrapy_politeness.middleware import PolitenessMiddleware
    from scrapy_politeness.settings import PolitenessSettings

__all__ = ["Addon", "Config", "PolitenessMiddleware", "PolitenessSettings", "Signal"]
__version__ = "0.1.0"

_LAZY = {
    "Addon": ".addon",
    "PolitenessMiddleware": ".middleware",
    "PolitenessSettings": ".settings",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
