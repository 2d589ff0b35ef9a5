"""The results store's two backends for its tests: SQLite files, and (when its binaries are installed) a
throwaway PostgreSQL 15 server, each test's store a new database of it."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_PASSWORD = "Store-Pass-9"  # the server trusts local sockets: it is only there to be masked

Stores = Callable[[], str]  # a new, empty database's URL


# --- the two backends ---------------------------------------------------------------------------

def _as_postgres(argv: list[str]) -> list[str]:
    # initdb and the server refuse to run as root.
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _has_postgres_user() -> bool:
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return os.geteuid() != 0
    return True


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL 15 server on a unix socket in a temporary folder: its URL prefix (no database)."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL 15 server binaries are not installed ({PG_BIN})")
    if (os.geteuid() == 0 and shutil.which("runuser") is None) or not _has_postgres_user():
        pytest.skip("running as root, and no postgres OS user (and runuser) to run the server as")
    folder = Path(tempfile.mkdtemp(prefix="restoreproof-store-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    data, port = folder / "data", 54329
    try:
        subprocess.run(_as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                     "--no-sync", "-E", "UTF8"]), check=True, capture_output=True)
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w",
                                     "-o", f"-c listen_addresses='' -c unix_socket_directories={folder} -p {port}",
                                     "start"]), check=True, capture_output=True)
        folder.chmod(0o755)  # the socket, for this (root) process
        yield f"postgresql+psycopg://postgres:{PG_PASSWORD}@/?host={folder}&port={port}"
    finally:
        subprocess.run(_as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


_names = count(1)


def _postgres_database(server: str) -> str:
    name = f"store{next(_names)}"
    admin = create_engine(server.replace("/?", "/postgres?"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return server.replace("/?", f"/{name}?")


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    if backend == "sqlite":
        files = count(1)
        return lambda: f"sqlite:///{tmp_path / f'results{next(files)}.db'}"
    server = request.getfixturevalue("postgres_server")
    return lambda: _postgres_database(server)


