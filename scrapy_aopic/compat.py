"""What differs between the Scrapy releases scrapy-aopic supports (2.13 to
the latest), detected by feature, never by version number.

Each name here is the newest Scrapy's public API when it exists and a
fallback with the same behaviour otherwise. Where an old release cannot do
something at all, :data:`ROBOTS_PARSED` says so and the caller degrades with
one log line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scrapy import signals

#: Scrapy 2.18+ sends ``robots_parsed`` when its RobotsTxtMiddleware has
#: parsed a host's robots.txt.
ROBOTS_PARSED: Any = getattr(signals, "robots_parsed", None)


def create_looping_call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A looping call on Scrapy's event loop (``start(interval, now=...)``,
    ``stop()``, ``running``)."""
    try:
        from scrapy.utils.asyncio import create_looping_call as create  # Scrapy >= 2.14
    except ImportError:
        from twisted.internet.task import LoopingCall

        return LoopingCall(func, *args, **kwargs)
    return create(func, *args, **kwargs)


def call_later(delay: float, func: Callable[..., Any], *args: Any) -> Any:
    """Run ``func`` after ``delay`` seconds on Scrapy's event loop; the
    result has ``cancel()``."""
    try:
        from scrapy.utils.asyncio import call_later as later  # Scrapy >= 2.14
    except ImportError:
        from twisted.internet import reactor

        return reactor.callLater(delay, func, *args)
    return later(delay, func, *args)


def get_spider_loader(settings: Any) -> Any:
    """The project's spider loader."""
    try:
        from scrapy.spiderloader import get_spider_loader as get  # Scrapy >= 2.14
    except ImportError:
        from scrapy.utils.misc import load_object

        loader_cls = load_object(settings["SPIDER_LOADER_CLASS"])
        return loader_cls.from_settings(settings.frozencopy())
    return get(settings)


def close_spider(crawler: Any, reason: str) -> None:
    """Ask the engine to close the crawl's spider with ``reason``."""
    engine = crawler.engine
    close_async = getattr(engine, "close_spider_async", None)  # Scrapy >= 2.14
    if close_async is not None:
        from scrapy.utils.defer import deferred_from_coro

        async def close() -> None:
            # Run later on the event loop: the spider may have closed since
            # (then Scrapy would raise "Spider not opened" into the log).
            if engine.spider is not None:
                await close_async(reason=reason)

        deferred_from_coro(close())
    else:
        engine.close_spider(crawler.spider, reason)


def close_spider_when_running(crawler: Any, reason: str) -> None:
    """Close the spider as soon as the engine runs (as CLOSESPIDER_* do),
    even if the spider keeps itself open when idle (DontCloseSpider). A
    close asked for while the engine is still starting would not be
    followed by its stop; one after the spider closed is not asked for."""
    engine = crawler.engine
    if engine is None or engine.spider is None:
        return  # closed already (idle), or never opened
    if engine.running:
        close_spider(crawler, reason)
    else:
        call_later(0.01, close_spider_when_running, crawler, reason)


def mark_crawl_failed(crawler: Any) -> None:
    """Make ``scrapy crawl`` exit with status 1: Scrapy counts a crawl
    whose crawler has no spider when it ends as failed to start
    (``CrawlerProcess.bootstrap_failed``, Scrapy 2.13 to the latest); call
    it on engine_stopped, the last thing the crawl does."""
    crawler.spider = None


def keep_cookie_domains_offline() -> bool:
    """Make Scrapy's CookiesMiddleware split cookie domains with the offline
    public-suffix list (its own ``TLDExtract()`` downloads the list the first
    time a cookie names a domain; a crawl has no business reaching that
    server, and offline it logs a traceback). Returns whether it was done:
    ``False`` where that middleware has no such extractor."""
    try:
        from scrapy.downloadermiddlewares import cookies
    except ImportError:
        return False
    if not hasattr(cookies, "_split_domain"):
        return False
    from .hygiene.domains import offline_extractor

    cookies._split_domain = offline_extractor()
    return True
