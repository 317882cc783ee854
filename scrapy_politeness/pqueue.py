"""The public path ``scrapy_politeness.pqueue`` of ``scrapy_politeness.scheduler.queue``."""

from scrapy_politeness.scheduler.queue import PolitenessAwarePriorityQueue

__all__ = ['PolitenessAwarePriorityQueue']
