"""Where politeness state lives: in this process, or shared between crawlers.

The gate (``policy.Gate``) always orders requests locally. With the default
``"memory"`` backend its tables ARE the state and nothing else is asked. A
shared backend (Redis) is the authority across processes: after the local
gate releases a request, one ``reserve`` books its start instant on the shared
buckets, and one ``feedback`` per outcome folds the AIMD step into the shared
host; the local tables then mirror what the backend answered.
"""

from __future__ import annotations

from scrapy_politeness.distributed.base import LateStart, SharedBackend, SharedHost
from scrapy_politeness.distributed.factory import make_backend

__all__ = ["LateStart", "SharedBackend", "SharedHost", "make_backend"]
