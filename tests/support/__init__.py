"""Shared test support: local sites, crawl runners, a real Redis server."""
