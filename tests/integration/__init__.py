"""Integration tests: real crawls, real Redis servers, the command line, the docs build."""
