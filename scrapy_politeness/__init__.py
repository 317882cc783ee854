"""scrapy-politeness: a polite-by-design throttle for Scrapy.

Enable it with ``ADDONS = {"scrapy_politeness.Addon": 300}``.
"""

from .addon import Addon
from .middleware import PolitenessMiddleware
from .policy import Config, Signal
from .settings import PolitenessSettings

__all__ = ["Addon", "Config", "PolitenessMiddleware", "PolitenessSettings", "Signal"]
__version__ = "0.1.0"
