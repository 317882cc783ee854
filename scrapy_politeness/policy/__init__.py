"""The pure politeness policy: intervals, buckets, AIMD, the gate.

Standard library only (no Scrapy, Twisted or dnspython), so it can be reasoned
about, tested on a fake clock and reused by any state backend.
"""

from scrapy_politeness.policy.config import RECOVERIES, Config, Signal, is_failure
from scrapy_politeness.policy.decisions import (
    backoff_cause_of,
    crawl_delay_verdict,
    retry_after_verdict,
)
from scrapy_politeness.policy.eligibility import Eligibility
from scrapy_politeness.policy.failures import (
    FailureKind,
    backoff_cause,
    next_address,
    reached_server,
)
from scrapy_politeness.policy.gate import Gate, Release
from scrapy_politeness.policy.ips import IP_MODELS
from scrapy_politeness.policy.keys import host_key, ip_literal
from scrapy_politeness.policy.retry_after import (
    ServerDates,
    note_date,
    parse_retry_after,
    retry_after_of,
    retry_after_seen,
    server_clock,
    server_now,
)
from scrapy_politeness.policy.shared import SharedHost, merge_shared
from scrapy_politeness.policy.tables import HostState, HostTable, IPTable, Outcome

__all__ = [
    "IP_MODELS",
    "RECOVERIES",
    "Config",
    "Eligibility",
    "FailureKind",
    "Gate",
    "HostState",
    "HostTable",
    "IPTable",
    "Outcome",
    "Release",
    "ServerDates",
    "SharedHost",
    "Signal",
    "backoff_cause",
    "backoff_cause_of",
    "crawl_delay_verdict",
    "host_key",
    "ip_literal",
    "is_failure",
    "merge_shared",
    "next_address",
    "note_date",
    "parse_retry_after",
    "reached_server",
    "retry_after_of",
    "retry_after_seen",
    "retry_after_verdict",
    "server_clock",
    "server_now",
]
