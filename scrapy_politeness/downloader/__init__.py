"""The downloader middleware's parts around each download.

The gate run on the event loop (``gate_driver``), the estimates the queue
shares (``estimates``), the send instant's lateness (``send_lateness``), the
feedback of each outcome (``feedback``, ``failure_kinds``), hosts whose
requests are dropped (``dropped_hosts``), robots.txt delays (``crawl_delays``)
and the periodic chores. May import ``policy``, ``dns``, ``observe`` and
``distributed``; never ``scheduler``.
"""
