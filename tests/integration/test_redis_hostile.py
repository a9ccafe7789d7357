"""Whoever can write to Redis gets no code run, no request re-routed, no
crawl stuck (issue 14, items 1-3), against a real Redis server.

Each hostile value is planted where a worker reads it — a stored request
(``P:req``) or the start-URLs key — and the worker's scheduler is driven as
Scrapy's engine drives it: every hostile entry is refused by name, its cash
goes to lambda, the rest of the crawl goes on, the books balance.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading

import pytest
import redis
from scrapy import Request

from scrapy_aopic.store.base import Link
from tests.integration.test_redis_crawl import shared_scheduler


def plant(scheduler, url: str, raw: bytes, redis_url: str, cash: float = 5.0) -> None:
    """An account for ``url`` whose stored request is ``raw``, richer than
    the honest ones, so it is handed out first."""
    store = scheduler.frontier.store
    store.inject(Link(url, url.split("/")[2], 0, {"url": url}), cash)
    redis.Redis.from_url(redis_url).hset(store.keys["req"], url, raw)


def drain(scheduler):
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
    return out


def balanced(scheduler) -> bool:
    engine = scheduler.frontier.engine
    return engine.conservation_error() <= 1e-9 * max(1.0, engine.totals().injected)


HOSTILE_REQUESTS = {
    "deep": b'{"url": "http://h.test/deep", "meta": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_001,
    "class": json.dumps({"url": "http://h.test/class", "_class": "this.s"}).encode(),
    "init": json.dumps({"url": "http://h.test/init", "callback": "__init__"}).encode(),
    "dunder_class": json.dumps({"url": "http://h.test/dunder", "callback": "__class__"}).encode(),
    "base_method": json.dumps({"url": "http://h.test/base", "callback": "start_requests"}).encode(),
    "proxy": json.dumps({"url": "http://h.test/proxy", "meta": {"proxy": "http://127.0.0.1:9"}}).encode(),
    "file": json.dumps({"url": "file:///etc/passwd"}).encode(),
    "huge": json.dumps({"url": "http://h.test/huge", "meta": {"x": "y" * (2 << 20)}}).encode(),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_REQUESTS))
def test_a_hostile_stored_request_is_refused_and_the_crawl_goes_on(redis_url, name, caplog):
    scheduler, crawler, _, _ = shared_scheduler(redis_url)
    scheduler.enqueue_request(Request("http://ok.test/", meta={"is_start_request": True}))
    url = f"http://h.test/{name}"
    plant(scheduler, url, HOSTILE_REQUESTS[name], redis_url)
    modules_before = set(sys.modules)
    with caplog.at_level(logging.WARNING):
        out = drain(scheduler)
    assert [r.url for r in out] == ["http://ok.test/"]  # the honest one, nothing in its place
    assert crawler.stats.get_value("aopic/failed/undecodable") == 1
    assert any(url in r.getMessage() for r in caplog.records)
    assert "this" not in set(sys.modules) - modules_before  # nothing imported
    scheduler.frontier.visit(_page(out[0]), [])
    assert balanced(scheduler)
    scheduler.close("finished")


def _page(request):
    from scrapy.http import HtmlResponse

    return HtmlResponse(request.url, body=b"<html></html>", request=request)


def test_a_spider_method_is_a_valid_stored_callback(redis_url):
    scheduler, _, _, spider = shared_scheduler(redis_url)
    plant(scheduler, "http://h.test/ok", json.dumps({"url": "http://h.test/ok", "callback": "parse",
                                                     "meta": {"item": {"k": 1}}}).encode(), redis_url)
    (request,) = drain(scheduler)
    assert request.callback == spider.parse and request.meta["item"] == {"k": 1}
    scheduler.close("finished")


def test_a_planted_proxy_receives_nothing(redis_url):
    """A fake proxy on loopback: no request of the crawl may reach it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    connections = []

    def accept():
        try:
            while True:
                connections.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    scheduler, crawler, _, _ = shared_scheduler(redis_url)
    plant(scheduler, "http://h.test/p", json.dumps(
        {"url": "http://h.test/p", "meta": {"proxy": f"http://127.0.0.1:{port}"}}).encode(), redis_url)
    seeds = redis.Redis.from_url(redis_url)
    seeds.rpush(scheduler.shared.seeds_key,
                json.dumps({"url": "http://h.test/seed", "meta": {"proxy": f"http://127.0.0.1:{port}"}}))
    scheduler.shared.feed_seeds()
    out = drain(scheduler)
    assert all("proxy" not in r.meta for r in out)
    assert crawler.stats.get_value("aopic/redis_seeds_malformed") == 1
    listener.close()
    thread.join(1)
    assert connections == []
    scheduler.close("finished")


def test_a_deeply_nested_seed_does_not_drop_the_rest_of_its_batch(redis_url, caplog):
    scheduler, crawler, _, _ = shared_scheduler(redis_url)
    client = redis.Redis.from_url(redis_url)
    client.rpush(scheduler.shared.seeds_key, "http://s.test/1", b'{"a":' * 100_000, "http://s.test/2")
    with caplog.at_level(logging.WARNING):
        scheduled = scheduler.shared.feed_seeds()
    assert scheduled == 2
    assert crawler.stats.get_value("aopic/redis_seeds_malformed") == 1
    assert sorted(r.url for r in drain(scheduler)) == ["http://s.test/1", "http://s.test/2"]
    scheduler.close("finished")


