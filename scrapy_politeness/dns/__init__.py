"""Resolving hosts to the IP the per-IP bucket is keyed on.

Lookups with dnspython, answers cached by TTL, failures, and pinning the
download to the IP the gate accounted for. May import ``policy`` only.
"""
