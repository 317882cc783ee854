"""The site farm: local HTTP virtual hosts on loopback IPs plus a loopback DNS server.

Test tooling, not public API (hence the underscore): used by the integration
tests, the demo, the benchmark and ``python -m scrapy_politeness farm`` to
measure request spacing on the SERVER side (first-byte arrival times),
independent of the crawler's own bookkeeping. It may change without notice.
"""

from scrapy_politeness._sitefarm.arrival import Arrival
from scrapy_politeness._sitefarm.client import Farm, FarmError
from scrapy_politeness._sitefarm.gaps import host_gaps, ip_gaps, min_gap, starts_by, violations
from scrapy_politeness._sitefarm.spec import FarmSpec, HostSpec, SpecError, parse_spec
from scrapy_politeness._sitefarm.specs import demo_spec

__all__ = [
    "Arrival",
    "Farm",
    "FarmError",
    "FarmSpec",
    "HostSpec",
    "SpecError",
    "demo_spec",
    "host_gaps",
    "ip_gaps",
    "min_gap",
    "parse_spec",
    "starts_by",
    "violations",
]
