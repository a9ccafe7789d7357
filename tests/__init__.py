"""The scrapy-aopic test suite."""
