"""The scheduler priority queue in which requests wait for their buckets.

The queue, its heaps of host keys (one group per IP), the host queues, the
requests handed out that the downloader has not seen yet, and robots.txt
prefetched at scheduling. May import ``policy``, ``dns``, ``downloader``'s
estimates and ``jobdir``; the middleware never imports the queue.
"""
