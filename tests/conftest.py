"""Shared fixtures: stores of every backend, a fake clock."""

from __future__ import annotations

import importlib.util
import itertools

import pytest

from scrapy_aopic.store.memory import MemoryStore

#: Backends the engine-level tests run on. "redis" joins when its store
#: module and a redis-server binary are available (see tests/support/redis_server.py).
BACKENDS = ["memory"]
if importlib.util.find_spec("scrapy_aopic.store.redis") is not None:
    BACKENDS.append("redis")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real redis-server on a free loopback port, for the whole session."""
    from tests.support.redis_server import RedisServer  # tests/ is on sys.path (rootdir conftest)

    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(request):
    """URL of the session's Redis test server; the test is skipped when
    there is no redis-server binary."""
    try:
        return request.getfixturevalue("redis_server").url
    except RuntimeError as exc:  # no redis-server binary
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory):
    """A real Redis Cluster (three masters on loopback ports), for the
    whole session; skipped only when there is no redis-server binary."""
    from tests.support.redis_cluster import RedisCluster
    from tests.support.redis_server import find_redis_server

    try:
        find_redis_server()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    cluster = RedisCluster(tmp_path_factory.mktemp("cluster"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def redis_cluster_replicas(tmp_path):
    """A real Redis Cluster of three masters, each with a replica (six
    nodes), for one test: a failover test leaves it changed."""
    from tests.support.redis_cluster import RedisCluster
    from tests.support.redis_server import find_redis_server

    try:
        find_redis_server()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    cluster = RedisCluster(tmp_path / "cluster", replicas=1)
    cluster.start()
    yield cluster
    cluster.stop()


def pytest_configure(config):
    # Scrapy 2.13's get_crawler() needs an installed reactor; later releases
    # need none (and a reactor installed here would be the wrong one for a
    # CrawlerProcess started in a test). Detected by trying.
    from scrapy.utils.reactor import install_reactor, is_reactor_installed
    from scrapy.utils.test import get_crawler

    if is_reactor_installed():
        return
    try:
        get_crawler()
    except RuntimeError:
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")


_prefixes = itertools.count()


@pytest.fixture(params=BACKENDS)
def make_store(request):
    """``make_store(lambda_targets="pending")`` -> a fresh, empty store."""
    created = []

    def factory(lambda_targets: str = "pending"):
        if request.param == "memory":
            store = MemoryStore(lambda_targets)
        else:
            from scrapy_aopic.store.redis import RedisStore

            server = request.getfixturevalue("redis_server")
            store = RedisStore.from_url(
                server.url,
                key_prefix=f"test{next(_prefixes)}",
                lambda_targets=lambda_targets,
            )
        created.append(store)
        return store

    factory.backend = request.param
    yield factory
    for store in created:
        store.close()


class FakeClock:
    """A clock tests move by hand (``clock.now += 5``)."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return FakeClock()
