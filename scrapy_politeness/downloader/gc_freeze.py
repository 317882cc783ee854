"""Short full garbage collections: the start-up heap frozen when the spider opens.

A polite crawl pays for every stall of the event loop in wall time. A full
(generation 2) collection holds every send still on its way, and with
start-to-start spacing each host's and IP's next start then waits a whole
interval after the stall ends (the send slip, docs/usage/how-it-works.md);
a throttle that spaces from the moment it let a request go sends again at
once after a stall, and the server sees the gap shortened. A full collection
scans every object the collector tracks, and when the spider opens nearly all
of that heap lives as long as the process: modules, classes, settings, the
crawl's components (about 87,000 objects in the bench's crawl).
``gc.freeze()`` moves them to the permanent generation, so a full collection
scans only what the crawl itself allocates.

Measured on the bench's ``many-hosts-spaced`` crawl (``python -m bench.gap_spread``,
docs/benchmark.md): full collections held the loop 1.85-2.41 s of a
12.7-14.2 s crawl, and 0.27-0.39 s of a 10.6-10.8 s one once frozen.

The collector is the process's, not the plugin's: so this runs only when asked
(``POLITENESS_GC_FREEZE = True``; off by default, a throttle must not change the
host process behind its user's back), and once per process (the first crawler
to open freezes; later ones find it done). Reference counting still frees frozen objects;
only cyclic garbage among them is never collected, and at start-up there is
next to none (one collection runs first).
"""

from __future__ import annotations

import gc

__all__ = ["freeze_start_heap"]

_done = False


def freeze_start_heap() -> int | None:
    """Collect, then freeze the heap; the objects now frozen, or None when
    this process already did."""
    global _done  # noqa: PLW0603 - the collector is one per process, so is this flag
    if _done:
        return None
    _done = True
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
