"""The Redis connection of the shared frontier, from Scrapy settings.

The same settings as scrapy-redis, so a project that already uses it needs
nothing new: ``REDIS_URL`` (wins when set), else ``REDIS_HOST`` /
``REDIS_PORT`` / ``REDIS_DB``, plus ``REDIS_PARAMS`` (extra keyword arguments
of ``redis.Redis``, e.g. ``{"password": ..., "socket_timeout": 30}``), on top
of scrapy-redis' defaults (30 s socket timeouts, retry on timeout).

The frontier stores binary records, so the client always returns bytes:
``REDIS_DECODE_RESPONSES`` / ``decode_responses`` are overridden (with a
warning) — the rest of a scrapy-redis project may keep its own client.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from scrapy_redis import defaults as scrapy_redis_defaults
from scrapy_redis.connection import SETTINGS_PARAMS_MAP, get_redis

logger = logging.getLogger(__name__)


def redis_params_from_settings(settings: Any) -> dict[str, Any]:
    """Keyword arguments for :func:`scrapy_redis.connection.get_redis`,
    following scrapy-redis' rules, with ``decode_responses=False``."""
    params = dict(scrapy_redis_defaults.REDIS_PARAMS)
    params.update(settings.getdict("REDIS_PARAMS"))
    for setting, param in SETTINGS_PARAMS_MAP.items():
        value = settings.get(setting)
        if value:
            params[param] = value
    if params.get("decode_responses"):
        logger.warning(
            "aopic: the Redis frontier reads binary records; ignoring decode_responses=True "
            "for its own connection"
        )
    params["decode_responses"] = False
    # An encoding only matters for str arguments (URLs): keep UTF-8.
    params.setdefault("encoding", "utf-8")
    return params


def get_redis_from_settings(settings: Any, socket_timeout: float | None = None) -> redis.Redis:
    """A ``redis.Redis`` client for the frontier from Scrapy ``settings``.

    ``socket_timeout``: the most one call may wait for a reply (a crawl's
    ``AOPIC_REDIS_SOCKET_TIMEOUT``, over ``REDIS_PARAMS``), without
    redis-py's retry on timeout: a crawl handles a stall itself.
    """
    params = redis_params_from_settings(settings)
    if socket_timeout is not None:
        params["socket_timeout"] = socket_timeout
        params["retry_on_timeout"] = False
    if isinstance(params.get("redis_cls"), str):
        from scrapy.utils.misc import load_object

        params["redis_cls"] = load_object(params["redis_cls"])
    return get_redis(**params)


def format_key(template: str, spider: Any) -> str:
    """Expand a scrapy-redis style key template: ``%(spider)s`` / ``%(name)s``
    become the spider's name (e.g. ``"%(spider)s:aopic"`` -> ``"books:aopic"``)."""
    name = getattr(spider, "name", spider)
    return template % {"spider": name, "name": name}
