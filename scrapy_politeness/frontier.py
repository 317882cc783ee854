"""The public path ``scrapy_politeness.frontier`` of ``scrapy_politeness.distributed.frontier``."""

from scrapy_politeness.distributed.frontier import PolitenessFrontierQueue

__all__ = ['PolitenessFrontierQueue']
