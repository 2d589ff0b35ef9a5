"""The results store's Alembic migrations, on real SQLite files and (when its binaries are installed)
a throwaway PostgreSQL 15 server.

The previous release's stores are real: tests/fixtures/store/store-0.1.0*.sql are dumps of stores
that restoreproof 0.1.0 (commit 86c2505) made by recording one run (see the README there)."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, make_url, text

from tests.unit.results.conftest import PG_BIN, PG_PASSWORD, Stores
from verification.errors import StoreVersionError
from verification.model import DatabaseIdentity, RunResult, SystemIdentifier
from verification.report_model import DatabaseEntry
from verification.results import ResultStore
from verification.results.identity import Match
from verification.results.migrations import VERSION_TABLE, config, head, masked
from verification.results.store import Base

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "store"
RUN_ID = "20261122T010000Z-abcdef"
T0 = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
OLD_TABLES = {"runs", "databases", "chains", "phases", "checks", "database_reports"}
HEAD_TABLES = {"restoreproof_schema_version", "runs", "databases", "database_reports", "run_plans", "run_leases"}


def load_previous_release(url: str) -> str:
    """A store exactly as restoreproof 0.1.0 left it, from its dump."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        with sqlite3.connect(str(parsed.database)) as connection:
            connection.executescript((FIXTURES / "store-0.1.0.sql").read_text())
        connection.close()
    else:
        query = parsed.query
        subprocess.run([str(PG_BIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(query["host"]),
                        "-p", str(query["port"]), "-U", "postgres", "-d", str(parsed.database),
                        "-f", str(FIXTURES / "store-0.1.0.postgresql.sql")], check=True, capture_output=True)
    return url


@pytest.fixture
def previous_release(new_store: Stores) -> str:
    return load_previous_release(new_store())


# --- what a store holds ----------------------------------------------------------------------------

def revision(url: str) -> tuple[str, ...]:
    engine = create_engine(url)
    with engine.connect() as connection:
        revisions = tuple(MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
                          .get_current_heads())
    engine.dispose()
    return revisions


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    names = set(inspect(engine).get_table_names())
    engine.dispose()
    return names


def schema(url: str) -> dict[str, Any]:
    """Every table's columns, keys and indexes as the database reports them (and SQLite's own DDL)."""
    engine = create_engine(url)
    found = inspect(engine)
    tables: dict[str, Any] = {}
    for table in sorted(set(found.get_table_names()) - {"restoreproof_schema_version"}):
        tables[table] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"], c.get("default"))
                        for c in found.get_columns(table)],
            "primary key": found.get_pk_constraint(table),
            "indexes": sorted((i["name"], i["column_names"], i["unique"]) for i in found.get_indexes(table)),
            "foreign keys": sorted((f["name"] or "", f["constrained_columns"], f["referred_table"],
                                    f["referred_columns"], f["options"]) for f in found.get_foreign_keys(table)),
        }
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            tables["sqlite_master"] = connection.execute(text(
                "SELECT type, name, sql FROM sqlite_master WHERE tbl_name != 'restoreproof_schema_version' ORDER BY name")).all()
    engine.dispose()
    return tables


def raw_report_entries(url: str) -> list[tuple[str, dict[str, Any]]]:
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT database, report FROM database_reports ORDER BY id")).all()
    engine.dispose()
    return [(name, report if isinstance(report, dict) else json.loads(report)) for name, report in rows]


def raw_rows(url: str, table: str) -> list[tuple[Any, ...]]:
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = [tuple(row) for row in connection.execute(text(f"SELECT * FROM {table} ORDER BY id"))]
    engine.dispose()
    return rows


def migrate(url: str, to: str, *, down: bool = False) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        (command.downgrade if down else command.upgrade)(config(connection), to)
    engine.dispose()


# --- the tests -----------------------------------------------------------------------------------

def test_a_previous_release_store_is_upgraded_in_place_and_keeps_its_rows(previous_release: str) -> None:
    before = raw_report_entries(previous_release)
    kept = {table: raw_rows(previous_release, table) for table in ("runs", "databases")}
    assert [row[2:4] for row in kept["databases"]] == [("demo1", "passed"), ("demo2", "failed")]
    assert revision(previous_release) == ()
    assert set(schema(previous_release)) >= OLD_TABLES

    store = ResultStore(previous_release)
    run, entries = store.run_with_reports(RUN_ID)
    assert (run.run_id, run.engine, run.source, run.target_kind, run.verdict) == (
        RUN_ID, "postgres", "/backups", "docker", "failed")
    assert (run.started_at, run.finished_at) == (T0, datetime(2026, 11, 22, 1, 0, 30, tzinfo=UTC))
    assert run.report_dir == "/var/lib/restoreproof/reports/20261122T010000Z-abcdef"
    assert store.last_verified() == {"demo1": T0, "demo2": T0}
    assert store.last_passed() == {"demo1": T0}
    # The report entries 0.1.0 wrote (schema 1.4) read back as the typed report, value for value.
    assert entries == [DatabaseEntry.model_validate(report) for _, report in before]
    assert [(e.database, e.verdict, e.chain.status) for e in entries] == [
        ("demo1", "passed", "complete"), ("demo2", "failed", "broken")]
    assert [(run_id, started) for run_id, started, _ in store.report_entries()] == [(RUN_ID, T0), (RUN_ID, T0)]
    store.close()

    assert revision(previous_release) == (head(),) == ("0006",)
    assert tables(previous_release) == HEAD_TABLES
    runs = raw_rows(previous_release, "runs")
    # Revision 0004's column comes last, filled from the run's report folder: the listings find it there.
    assert [row[:-1] for row in runs] == kept["runs"]
    assert [row[-1] for row in runs] == ["/var/lib/restoreproof/reports"]
    # Revision 0006's identity comes last, unknown for rows recorded before it.
    databases = raw_rows(previous_release, "databases")
    assert [row[:-1] for row in databases] == kept["databases"]
    assert [row[-1] for row in databases] == [None, None]


def test_the_upgraded_store_takes_new_runs(previous_release: str) -> None:
    store = ResultStore(previous_release)
    later = datetime(2026, 11, 23, 1, 0, tzinfo=UTC)
    store.start_run(RunResult(run_id="20261123T010000Z-bcdefa", engine="postgres", source="/backups",
                              started_at=later))
    store.finish_run("20261123T010000Z-bcdefa", later, "passed")
    assert [r.run_id for r in store.recent_runs()] == ["20261123T010000Z-bcdefa", RUN_ID]
    store.close()


def test_revision_0001_is_exactly_the_schema_0_1_0_made(previous_release: str, new_store: Stores) -> None:
    fresh = new_store()
    migrate(fresh, "0001")
    assert revision(fresh) == ("0001",)
    assert schema(fresh) == schema(previous_release)


def test_a_new_store_is_made_at_head_and_matches_the_tables_the_code_maps(new_store: Stores) -> None:
    url = new_store()
    ResultStore(url).close()
    assert revision(url) == (head(),)
    assert tables(url) == HEAD_TABLES
    engine = create_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        assert compare_metadata(context, Base.metadata) == []
    engine.dispose()


def test_opening_a_store_at_head_again_changes_nothing(previous_release: str) -> None:
    ResultStore(previous_release).close()
    upgraded, entries = schema(previous_release), raw_report_entries(previous_release)
    ResultStore(previous_release).close()
    assert revision(previous_release) == (head(),)
    assert schema(previous_release) == upgraded
    assert raw_report_entries(previous_release) == entries


def test_downgrading_0002_makes_the_dropped_tables_again(previous_release: str, new_store: Stores) -> None:
    ResultStore(previous_release).close()
    migrate(previous_release, "0001", down=True)
    assert revision(previous_release) == ("0001",)
    as_0_1_0 = new_store()
    migrate(as_0_1_0, "0001")
    assert schema(previous_release) == schema(as_0_1_0)
    # The rows that were kept are still there; the dropped tables come back empty.
    assert [name for name, _ in raw_report_entries(previous_release)] == ["demo1", "demo2"]
    ResultStore(previous_release).close()
    assert revision(previous_release) == (head(),)


def test_the_upgraded_store_lists_its_run_in_its_report_folder(previous_release: str) -> None:
    store = ResultStore(previous_release)
    page = store.run_page(1, 50, folder=Path("/var/lib/restoreproof/reports"), finished_only=True)
    assert [(r.run_id, r.count("passed"), r.count("failed")) for r in page.runs] == [(RUN_ID, 1, 1)]
    assert store.report_folders() == ["/var/lib/restoreproof/reports"]
    store.close()


def test_downgrading_0004_leaves_the_schema_0003_made(previous_release: str, new_store: Stores) -> None:
    ResultStore(previous_release).close()
    migrate(previous_release, "0003", down=True)
    as_0003 = new_store()
    migrate(as_0003, "0003")
    assert revision(previous_release) == ("0003",)
    assert schema(previous_release) == schema(as_0003)
    ResultStore(previous_release).close()  # and up again, filling the folder once more
    assert [row[-1] for row in raw_rows(previous_release, "runs")] == ["/var/lib/restoreproof/reports"]


def test_downgrading_0005_leaves_the_schema_0004_made_and_up_again_takes_leases(previous_release: str,
                                                                              new_store: Stores) -> None:
    ResultStore(previous_release).close()
    migrate(previous_release, "0004", down=True)
    as_0004 = new_store()
    migrate(as_0004, "0004")
    assert revision(previous_release) == ("0004",)
    assert schema(previous_release) == schema(as_0004)
    store = ResultStore(previous_release)  # and up again: the old run's rows are still there, leases can be taken
    lease = store.take_lease(RUN_ID, host="w1", pid=7, process="b/n/1", scope="run", lease_seconds=60)
    assert [(row.run_id, row.host, row.released_at) for row in store.leases([RUN_ID])] == [(RUN_ID, "w1", None)]
    assert store.release_lease(lease, "released") and [r.run_id for r in store.recent_runs()] == [RUN_ID]
    store.close()


def test_downgrading_0006_leaves_the_schema_0005_made_and_up_again_keeps_older_rows_by_name(
        previous_release: str, new_store: Stores) -> None:
    ResultStore(previous_release).close()
    migrate(previous_release, "0005", down=True)
    as_0005 = new_store()
    migrate(as_0005, "0005")
    assert revision(previous_release) == ("0005",)
    assert schema(previous_release) == schema(as_0005)
    store = ResultStore(previous_release)  # and up again: 0.1.0's rows, with no identity, count by source and name
    mine = DatabaseIdentity("/backups", "demo1", SystemIdentifier("7", "backup.info"))
    elsewhere = DatabaseIdentity("/elsewhere", "demo1", SystemIdentifier("7", "backup.info"))
    assert [(row.run_id, row.match(mine)) for row in store.history(identity=mine)] == [(RUN_ID, Match.NAME)]
    assert store.history(identity=elsewhere) == []
    assert store.rotation([mine, elsewhere]) == {mine.key: (False, T0)}
    assert [(i.source, i.name, i.system_id) for i in store.known_databases()] == [
        ("/backups", "demo1", None), ("/backups", "demo2", None)]
    store.close()


def test_a_store_from_a_newer_restoreproof_is_refused_by_name(new_store: Stores) -> None:
    url = new_store()
    ResultStore(url).close()
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE restoreproof_schema_version SET version_num = '0042'"))
    engine.dispose()
    shown = masked(make_url(url))
    with pytest.raises(StoreVersionError) as raised:
        ResultStore(url)
    assert str(raised.value) == (
        f"the results store {shown} is at schema revision 0042, which this restoreproof does not know "
        f"(its newest is 0006): a newer restoreproof made it, or it is not a restoreproof results store; "
        f"upgrade restoreproof or set results_url to another store")
    assert PG_PASSWORD not in str(raised.value)
    assert revision(url) == ("0042",)  # left as it was


def test_a_url_is_shown_with_its_password_masked() -> None:
    url = make_url("postgresql+psycopg://restoreproof:Store%40Pass-2@db.example:5432/results")
    assert masked(url) == "postgresql+psycopg://restoreproof:********@db.example:5432/results"
    assert masked(make_url("sqlite:////var/lib/restoreproof/results.db")) == "sqlite:////var/lib/restoreproof/results.db"


def _open_and_start_a_run(url: str, barrier: Any, number: int) -> str:
    barrier.wait()
    try:
        store = ResultStore(url)
        store.start_run(RunResult(run_id=f"run-{number}", engine="postgres", source="/backups", started_at=T0))
        store.close()
    except Exception as exc:  # reported to the test, which shows it
        return f"{type(exc).__name__}: {exc}"
    return "ok"


PROCESSES = 6


@pytest.mark.parametrize("attempt", range(3))
def test_processes_opening_one_fresh_store_at_once_all_succeed(new_store: Stores, attempt: int) -> None:
    url = new_store()
    context = multiprocessing.get_context("spawn")  # separate interpreters, as Airflow's task processes are
    with context.Manager() as manager:
        barrier = manager.Barrier(PROCESSES)
        with context.Pool(PROCESSES) as pool:
            outcomes = pool.starmap(_open_and_start_a_run, [(url, barrier, n) for n in range(PROCESSES)])
    assert outcomes == ["ok"] * PROCESSES
    assert revision(url) == (head(),)
    store = ResultStore(url)
    assert sorted(r.run_id for r in store.recent_runs()) == [f"run-{n}" for n in range(PROCESSES)]
    store.close()


def test_opening_a_store_logs_nothing_below_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.INFO)
    ResultStore(f"sqlite:///{tmp_path}/quiet.db").close()  # made and upgraded: the steps run
    ResultStore(f"sqlite:///{tmp_path}/quiet.db").close()  # opened at head
    assert [r.getMessage() for r in caplog.records if r.name.startswith("alembic")] == []
    assert logging.getLogger("alembic.runtime.migration").level == logging.NOTSET  # left as it was
