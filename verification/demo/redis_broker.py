"""A Redis server on 127.0.0.1 for Airflow's CeleryExecutor in the tests and benches: Debian's
redis-server (scripts/install-system-deps.sh), started on a free port in a folder of its own.

It keeps nothing on disk (no RDB snapshot, no append-only file): a broker's queue lives as long as
the run that uses it. Its folder (the log) is made by start() and removed by stop(), also when
start() fails or is interrupted; the server dies with its parent (verification/demo/processes.py).
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from verification.demo.processes import ManagedProcess, ProcessError, Processes

HOST = "127.0.0.1"
SERVER = "redis-server"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _answers_ping(port: int) -> bool:
    # RESP's inline command: no client library needed to know the server is ready.
    with socket.create_connection((HOST, port), timeout=1) as conn:
        conn.sendall(b"PING\r\n")
        return conn.recv(64).startswith(b"+PONG")


@dataclass
class RedisBroker:
    """`with RedisBroker() as redis:` -> redis.url (redis://127.0.0.1:PORT/0)."""

    port: int = 0
    folder: Path | None = None  # made by start() when not given, and then removed by stop()
    _processes: Processes | None = field(default=None, repr=False)
    _own_folder: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    @property
    def process(self) -> ManagedProcess | None:
        return self._processes.started[0] if self._processes and self._processes.started else None

    def start(self, timeout: float = 30.0) -> RedisBroker:
        try:
            return self._start(timeout)
        except BaseException:  # a failure or an interrupt while starting: nothing is left either
            self.stop()
            raise

    def _start(self, timeout: float) -> RedisBroker:
        server = shutil.which(SERVER) or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)
        if server is None:
            raise ProcessError("redis-server is not installed (Debian's package redis-server; `make setup` "
                               "installs it): the CeleryExecutor's broker cannot start")
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="restoreproof-redis-"))
            self._own_folder = True
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        self.port = self.port or free_port()
        self._processes = Processes(self.folder)
        # No persistence, no protected-mode surprises on loopback, nothing but 127.0.0.1.
        process = self._processes.start("redis", [
            server, "--bind", HOST, "--port", str(self.port), "--dir", str(self.folder), "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--databases", "4"])
        self._processes.wait_until(f"redis-server on port {self.port}", lambda: _answers_ping(self.port), timeout)
        process.check()
        return self

    def stop(self) -> None:
        if self._processes is not None:
            self._processes.stop(grace=10)
            self._processes = None
        if self.folder is not None and self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
            self._own_folder = False

    def __enter__(self) -> RedisBroker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
