"""farmcrawl: the example Scrapy project that uses scrapy-politeness."""
