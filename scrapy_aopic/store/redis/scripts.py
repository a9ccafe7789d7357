"""The Lua scripts of the Redis frontier and the one way they are called.

The scripts live in ``lua/*.lua`` (package data). Each is called with
``EVALSHA`` on the store's own connection, its arguments packed into RESP
here: ``benchmarks/bench_redis_calls.py`` measures this path against
redis-py's ``Script`` and ``evalsha`` (which check a connection out of the
pool and poll it for stale data on every call); the difference is most of a
scheduler call's cost, so the store keeps its own path, and uses it for
every script. A script Redis does not know (after a restart, or on another
node) is loaded and the call resent.
"""

from __future__ import annotations

import hashlib
import os
import threading
from importlib import resources
from typing import Any

import redis


class LuaScript:
    """One ``lua/<name>.lua`` file: its source and SHA-1."""

    def __init__(self, name: str):
        self.name = name
        self.source = resources.files(__package__).joinpath("lua", f"{name}.lua").read_text("utf-8")
        self.sha = hashlib.sha1(self.source.encode()).hexdigest().encode()

    def __repr__(self) -> str:
        return f"LuaScript({self.name!r})"


#: The frontier's operations, dispatched on ``ARGV[2]``.
FRONTIER = LuaScript("frontier")
#: Take a batch of entries from a start-URLs key (list, set or sorted set).
TAKE_SEEDS = LuaScript("take_seeds")
#: Pending URLs, open leases and seeds waiting, in one consistent read.
ACTIVITY = LuaScript("activity")


def pack_command(*args: Any) -> bytes:
    """One Redis command in RESP: ``bytes`` as is, ``str`` as UTF-8, ints
    in decimal (floats are passed as :func:`~.records.fmt` strings)."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif not isinstance(arg, bytes):
            arg = str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(parts)


def pack_call(script: LuaScript, keys: tuple | list, args: tuple | list) -> bytes:
    """``EVALSHA`` of ``script`` with its declared ``keys`` and ``args``."""
    return pack_command(b"EVALSHA", script.sha, len(keys), *keys, *args)


class ScriptConnection:
    """A process's own connection to Redis for script calls.

    One connection per process (a forked worker opens its own), used under
    a lock; a connection error leaves it closed, so a half-read reply is
    never mistaken for the next one.
    """

    #: how a call is packed for :meth:`call`
    pack = staticmethod(pack_call)

    def __init__(self, server: redis.Redis):
        self.server = server
        self._conn = None
        self._pid = 0
        self._lock = threading.Lock()

    def _connection(self):
        pid = os.getpid()
        if self._conn is None or self._pid != pid:
            self._conn = self.server.connection_pool.make_connection()
            self._pid = pid
        return self._conn

    def call(self, script: LuaScript, command: bytes) -> Any:
        """Run one packed call (:func:`pack_call`) of ``script``; its reply."""
        return self.call_many(script, [command])[0]

    def call_many(self, script: LuaScript, commands: list[bytes]) -> list[Any]:
        """Send packed calls of ``script`` in one write (a pipeline) and read
        every reply; a ``NOSCRIPT`` reply loads the script and resends.
        An error reply of any call is raised (after every reply is read)."""
        with self._lock:
            conn = self._connection()
            try:
                replies = self._send(conn, commands)
                if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
                    conn.send_command("SCRIPT", "LOAD", script.source)
                    conn.read_response()
                    again = [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]
                    for i, reply in zip(again, self._send(conn, [commands[i] for i in again])):
                        replies[i] = reply
            except BaseException:
                conn.disconnect()  # a reply may be half read: start clean
                raise
        for reply in replies:
            if isinstance(reply, redis.exceptions.ResponseError):
                raise reply
        return replies

    @staticmethod
    def _send(conn, commands: list[bytes]) -> list[Any]:
        conn.send_packed_command(commands)
        replies = []
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.exceptions.ResponseError as exc:  # the connection is fine
                replies.append(exc)
        return replies

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.disconnect()
        self._conn = None


class ClusterScriptConnection:
    """Script calls on a Redis Cluster: the same interface as
    :class:`ScriptConnection`, calls packed as command arguments.

    The fast path sends a call, packed here, on this process's own
    connection to the node that redis-py's ``RedisCluster`` says holds the
    call's slot (every call's keys share one hash tag), as
    :class:`ScriptConnection` does on one Redis: the cluster client's own
    ``execute_command`` costs more client CPU per call (slot, policies,
    its pool) than the call itself. Anything else than a plain reply there (``MOVED`` / ``ASK``
    after slots moved, a node down or failed over, ``TRYAGAIN``) resends the
    call through the cluster client, which follows the redirect, refreshes
    its slot map and reconnects: the routing is always the client's.
    Resending is safe: every frontier call may be repeated (see
    :meth:`~.store.RedisStore.pop`'s tokens and the lease ids).
    """

    _REROUTE = (
        redis.exceptions.MovedError,
        redis.exceptions.AskError,
        redis.exceptions.TryAgainError,
        redis.exceptions.ClusterDownError,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
    )

    def __init__(self, server):
        self.server = server
        self._nodes: dict[str, ScriptConnection] = {}  # node name -> our connection to it
        # first key of a call -> the connection of its node (a store's calls
        # name few keys); forgotten whenever a call has to be rerouted
        self._routes: dict[Any, tuple[str, ScriptConnection]] = {}

    @staticmethod
    def pack(script: LuaScript, keys: tuple | list, args: tuple | list) -> tuple:
        """The call as command arguments (its first key names its slot)."""
        return ("EVALSHA", script.sha, len(keys), *keys, *args)

    def call(self, script: LuaScript, command: tuple) -> Any:
        return self.call_many(script, [command])[0]

    def call_many(self, script: LuaScript, commands: list[tuple]) -> list[Any]:
        """Calls of one slot (one store's), in one write."""
        key = commands[0][3]
        route = self._routes.get(key)
        if route is None:
            node = self.server.get_node_from_key(key)
            conn = self._nodes.get(node.name)
            if conn is None:
                conn = self._nodes[node.name] = ScriptConnection(node.redis_connection)
            route = self._routes[key] = (node.name, conn)
        name, conn = route
        try:
            return conn.call_many(script, [pack_command(*command) for command in commands])
        except self._REROUTE:
            conn.close()
            self._nodes.pop(name, None)
            self._routes.clear()
        return [self._through_client(script, command) for command in commands]

    def _through_client(self, script: LuaScript, command: tuple) -> Any:
        try:
            return self.server.execute_command(*command)
        except redis.exceptions.NoScriptError:  # a promoted replica, a new node
            self.server.script_load(script.source)  # on every primary
            return self.server.execute_command(*command)

    def close(self) -> None:
        for conn in self._nodes.values():
            conn.close()
        self._nodes.clear()
        self._routes.clear()


def script_connection(server) -> ScriptConnection | ClusterScriptConnection:
    """The script path for ``server``: our own connection to a single Redis,
    the cluster client's routing for a ``RedisCluster``."""
    from redis.cluster import RedisCluster

    if isinstance(server, RedisCluster):
        return ClusterScriptConnection(server)
    return ScriptConnection(server)
