"""scrapy-aopic: AOPIC crawl ordering and crawl hygiene for Scrapy broad crawls.

Add ``ADDONS = {"scrapy_aopic.Addon": 0}`` to a project's settings.
"""

from .addon import Addon

__all__ = ["Addon"]
__version__ = "0.1.0"
