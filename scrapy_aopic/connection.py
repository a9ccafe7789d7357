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
from redis.backoff import NoBackoff
from redis.retry import Retry
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


def get_redis_from_settings(
    settings: Any, socket_timeout: float | None = None, connect_timeout: float | None = None
) -> redis.Redis:
    """A ``redis.Redis`` client for the frontier from Scrapy ``settings``.

    ``socket_timeout``: the most one call may wait for a reply (a crawl's
    ``AOPIC_REDIS_SOCKET_TIMEOUT``, a tool's few seconds; over
    ``REDIS_PARAMS``), without redis-py's retry on timeout: the caller
    handles a stall itself. ``connect_timeout``: the same for connecting.
    """
    params = redis_params_from_settings(settings)
    if socket_timeout is not None:
        params["socket_timeout"] = socket_timeout
        params.pop("retry_on_timeout", None)
        # redis-py's own retries (ten, with backoff, by default in redis-py 6+)
        # would multiply the wait; the caller retries as it sees fit.
        params["retry"] = Retry(NoBackoff(), 0)
    if connect_timeout is not None:
        params["socket_connect_timeout"] = connect_timeout
    if isinstance(params.get("redis_cls"), str):
        from scrapy.utils.misc import load_object

        params["redis_cls"] = load_object(params["redis_cls"])
    return get_redis(**params)


def get_redis_cluster_from_settings(settings: Any, socket_timeout: float | None = None):
    """A ``redis.cluster.RedisCluster`` client for a sharded frontier
    (``AOPIC_REDIS_CLUSTER``): ``REDIS_URL`` (or ``REDIS_HOST`` /
    ``REDIS_PORT``) names any node; ``REDIS_PARAMS``' ``password`` /
    ``username`` are passed on. The cluster client follows ``MOVED`` /
    ``ASK`` and failovers itself."""
    from redis.cluster import RedisCluster

    params = redis_params_from_settings(settings)
    kwargs: dict[str, Any] = {"decode_responses": False, "socket_connect_timeout": 10}
    kwargs["socket_timeout"] = socket_timeout if socket_timeout is not None else params.get("socket_timeout", 30)
    for name in ("password", "username"):
        if params.get(name):
            kwargs[name] = params[name]
    url = params.get("url")
    if url:
        return short_retries(RedisCluster.from_url(url, **kwargs))
    return short_retries(RedisCluster(host=params.get("host", "localhost"), port=int(params.get("port", 6379)),
                                      **kwargs))


def short_retries(server):
    """``server`` (a ``RedisCluster``) retrying a failed call 3 times, at
    most 0.1 s of waits in all, each after refreshing its map of the cluster.
    redis-py's default (10 retries, backoff up to 1 s each) kept a crawl's
    reactor asleep for seconds inside a one-slot transaction while a
    master was dead (measured: a worker blocked 4 s, its leases reclaimed
    by the others); the store has its own retries (a stall the crawl
    survives, see ``AOPIC_REDIS_RETRY_TIMEOUT``): the client's need only
    follow a failover already made."""
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    if hasattr(server, "set_retry"):  # (redis-py >= 5)
        server.set_retry(Retry(ExponentialBackoff(cap=0.04, base=0.01), 3))
    else:
        logger.warning(
            "aopic: this redis-py (%s) cannot shorten the Redis Cluster client's retries: "
            "while a master fails over, a call may block the crawl for seconds (redis-py >= 5 avoids it)",
            getattr(redis, "__version__", "?"),
        )
    return server


def format_key(template: str, spider: Any) -> str:
    """Expand a scrapy-redis style key template: ``%(spider)s`` / ``%(name)s``
    become the spider's name (e.g. ``"%(spider)s:aopic"`` -> ``"books:aopic"``)."""
    name = getattr(spider, "name", spider)
    return template % {"spider": name, "name": name}
