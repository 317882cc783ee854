"""Maps that follow the active hosts: popped from their idle end, refitted.

A map kept least recently used first (an ``OrderedDict`` whose entries move
to the end when used) is evicted by popping from the front until an entry
was used after the cutoff (``pop_idle``): the cost is what is evicted, never
a pass over every key ever seen.

A Python dict never shrinks on deletion: one that held a million idle hosts
keeps the room for a million after they are evicted, until enough new keys
are added to make it resize. Copying it once it fell well below its
high-water mark costs what is left (less than a third of what was evicted),
so eviction stays O(evicted) amortised and memory follows the active hosts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["pop_idle", "refit"]

K = TypeVar("K")
V = TypeVar("V")
M = TypeVar("M", bound=dict[Any, Any])

SHRINK = 4
"""Copied once it holds less than 1/SHRINK of its high-water mark."""


def refit(mapping: M, high: int) -> tuple[M, int]:
    """``(mapping, high-water mark)``, the mapping copied (same type, same order)
    when it fell below a quarter of ``high``, the largest size it was seen at."""
    n = len(mapping)
    if n * SHRINK < high:
        return type(mapping)(mapping), n
    return mapping, max(high, n)


def pop_idle(mapping: OrderedDict[K, V], cutoff: float,
             used_at: Callable[[V], float]) -> list[K]:
    """Pop the entries used at or before ``cutoff`` from the front of
    ``mapping`` (least recently used first); the keys popped."""
    gone: list[K] = []
    while mapping:
        key, value = next(iter(mapping.items()))
        if used_at(value) > cutoff:
            break
        del mapping[key]
        gone.append(key)
    return gone
