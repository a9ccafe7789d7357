"""Example Scrapy project: a generic broad crawl ordered by scrapy-aopic."""
