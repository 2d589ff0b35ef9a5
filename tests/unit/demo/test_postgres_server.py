"""The local stack's PostgreSQL server: Debian's PostgreSQL 15 in a folder of its own, nothing left."""

from __future__ import annotations

import pytest

from verification.demo.postgres_server import BIN_DIR, PostgresServer
from verification.demo.processes import ProcessError

pytestmark = pytest.mark.skipif(not (BIN_DIR / "initdb").exists(),
                                reason="PostgreSQL 15 is not installed (make setup installs postgresql-15)")


def test_serves_its_databases_with_a_password_and_leaves_nothing() -> None:
    import psycopg

    with PostgresServer(databases=("airflow", "results")) as server:
        for database in ("airflow", "results"):
            with psycopg.connect(server.url(database, "postgresql")) as conn:
                assert conn.execute("SELECT current_database()").fetchone() == (database,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(server.url("airflow", "postgresql").replace(server.password, "wrong")).close()
        assert server.url("airflow").startswith("postgresql+psycopg://restoreproof:")
        folder = server.folder
        assert folder is not None and (folder / "data" / "PG_VERSION").exists()
    assert not folder.exists()


def test_a_missing_installation_is_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ProcessError, match="initdb is missing: PostgreSQL 15 is not installed"):
        PostgresServer(bin_dir=tmp_path).start()
