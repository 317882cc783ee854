"""Benchmark of scrapy-politeness against stock Scrapy throttles: ``python -m bench``.

Real crawls against the local site farm (server-side arrival times), plus CPU
and memory overhead figures. See ``docs/benchmark.md``.
"""
