"""Ready-made farm specs shared by the demo, the benchmark and tests."""

from __future__ import annotations

from typing import Any


def demo_spec() -> dict[str, Any]:
    """Three IPs, eight vhosts: shared-IP normals plus delay, 429, slow and 503 hosts.

    127.0.0.2: alpha, beta, gamma (normal)  -> per-IP limits matter here
    127.0.0.3: delta (normal), polite (Crawl-delay 1.5), limited (429 unless 1 s apart)
    127.0.0.4: slowpoke (0.5 s latency), broken (always 503)
    """
    return {
        "ips": ["127.0.0.2", "127.0.0.3", "127.0.0.4"],
        "port": 0,
        "dns_ttl": 300,
        "hosts": {
            "alpha.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 10},
            "beta.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 8},
            "gamma.farm.test": {"ip": "127.0.0.2", "kind": "normal", "pages": 6},
            "delta.farm.test": {"ip": "127.0.0.3", "kind": "normal", "pages": 8},
            "polite.farm.test": {
                "ip": "127.0.0.3",
                "kind": "normal",
                "crawl_delay": 1.5,
                "pages": 6,
            },
            "limited.farm.test": {
                "ip": "127.0.0.3",
                "kind": "rate_limited",
                "rate_interval": 1.0,
                "retry_after": 2,
                "pages": 6,
            },
            "slowpoke.farm.test": {"ip": "127.0.0.4", "kind": "slow", "latency": 0.5, "pages": 6},
            "broken.farm.test": {"ip": "127.0.0.4", "kind": "always_503", "pages": 6},
        },
    }
