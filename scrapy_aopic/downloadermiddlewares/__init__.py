"""Downloader middlewares of scrapy-aopic."""
