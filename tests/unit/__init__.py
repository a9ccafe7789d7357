"""Unit tests: one component at a time, no crawl processes."""
