"""A PostgreSQL server on 127.0.0.1 for a local Airflow stack: its metadata database and restoreproof's
results store, as a deployment would have them (parallel tasks on several workers cannot share a
SQLite file).

Debian's PostgreSQL 15 (postgresql-15, `make setup`), made with initdb in a folder of its own and run
in the foreground as a managed process (verification/demo/processes.py), so it dies with its parent;
no Docker, no label another run's reaper could take for a leftover. As root it runs as the
`postgres` OS user (PostgreSQL refuses root). stop() stops it and removes its folder.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from verification.demo.processes import ProcessError, Processes
from verification.demo.redis_broker import HOST, free_port

BIN_DIR = Path("/usr/lib/postgresql/15/bin")
OS_USER = "postgres"
USER = "restoreproof"


def _as_os_user() -> list[str]:
    return ["runuser", "-u", OS_USER, "--"] if os.geteuid() == 0 else []


def _own(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(OS_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@dataclass
class PostgresServer:
    """`with PostgresServer(databases=("airflow", "restoreproof")) as pg:` -> pg.url("airflow")."""

    databases: tuple[str, ...] = ("airflow", "restoreproof")
    bin_dir: Path = BIN_DIR
    port: int = 0
    password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)
    folder: Path | None = None
    # Airflow's scheduler, API server, DAG processor and each worker's Celery result backend each
    # keep a pool of connections.
    max_connections: int = 300
    _processes: Processes | None = field(default=None, repr=False)

    def url(self, database: str, driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://{USER}:{self.password}@{HOST}:{self.port}/{database}"

    def start(self, timeout: float = 60.0) -> PostgresServer:
        try:
            return self._start(timeout)
        except BaseException:  # a failure or an interrupt while starting: nothing is left either
            self.stop()
            raise

    def _start(self, timeout: float) -> PostgresServer:
        for tool in ("initdb", "postgres"):
            if not (self.bin_dir / tool).exists():
                raise ProcessError(f"{self.bin_dir / tool} is missing: PostgreSQL 15 is not installed (Debian's "
                                   "package postgresql-15; `make setup` installs it)")
        # Its own temporary folder (the postgres OS user must reach it, so not inside a private one).
        self.folder = Path(tempfile.mkdtemp(prefix="restoreproof-pg-"))
        data, sockets = self.folder / "data", self.folder / "sockets"
        for path in (data, sockets):
            path.mkdir(mode=0o700)
            _own(path)
        _own(self.folder)
        self.folder.chmod(0o700)
        pwfile = self.folder / "pwfile"
        pwfile.write_text(self.password)
        pwfile.chmod(0o600)
        _own(pwfile)
        try:
            made = subprocess.run([*_as_os_user(), str(self.bin_dir / "initdb"), "-D", str(data), "-U", USER,
                                   f"--pwfile={pwfile}", "-A", "scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"],
                                  capture_output=True, text=True, timeout=120, check=False)
        finally:
            pwfile.unlink(missing_ok=True)
        if made.returncode != 0:
            raise ProcessError(f"initdb of the local PostgreSQL server failed: {made.stderr[-2000:]}")
        self.port = self.port or free_port()
        self._processes = Processes(self.folder / "logs")
        self._processes.start("postgres", [
            *_as_os_user(), str(self.bin_dir / "postgres"), "-D", str(data), "-p", str(self.port),
            "-c", f"listen_addresses={HOST}", "-c", f"unix_socket_directories={sockets}",
            "-c", f"max_connections={self.max_connections}", "-c", "fsync=off",
            "-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
        # The logs folder is ours (root's): the server's output goes there through our pipe.
        import psycopg

        def ready() -> bool:
            psycopg.connect(self.url("postgres", "postgresql"), connect_timeout=2).close()
            return True

        self._processes.wait_until(f"PostgreSQL on port {self.port}", ready, timeout)
        with psycopg.connect(self.url("postgres", "postgresql"), autocommit=True) as conn:
            for database in self.databases:
                conn.execute(f'CREATE DATABASE "{database}"')
        return self

    def stop(self) -> None:
        if self._processes is not None:
            # SIGTERM: PostgreSQL's "smart" shutdown would wait for clients; the stack is stopped first.
            self._processes.stop(grace=20)
            self._processes = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
