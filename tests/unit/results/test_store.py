"""The results store's column types, on a real SQLite database."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, select
from sqlalchemy.exc import StatementError

from tests.unit.factories import T0
from verification.model import RunResult
from verification.report_model import DatabaseEntry
from verification.results import ResultStore
from verification.results.store import UtcDateTime


@pytest.fixture()
def table(tmp_path):  # type: ignore[no-untyped-def]
    engine = create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    metadata = MetaData()
    times = Table("times", metadata, Column("id", Integer, primary_key=True), Column("at", UtcDateTime()))
    metadata.create_all(engine)
    yield engine, times
    engine.dispose()


def test_timestamps_come_back_aware_and_in_utc(table):  # type: ignore[no-untyped-def]
    engine, times = table
    paris = datetime(2026, 11, 24, 3, 0, tzinfo=timezone(timedelta(hours=1)))
    with engine.begin() as conn:
        conn.execute(insert(times), [{"id": 1, "at": paris}, {"id": 2, "at": None}])
        rows = dict(conn.execute(select(times.c.id, times.c.at)).all())
    assert rows[1] == datetime(2026, 11, 24, 2, 0, tzinfo=UTC) and rows[1].tzinfo is UTC
    assert rows[2] is None


def test_a_timestamp_without_a_zone_is_refused(table):  # type: ignore[no-untyped-def]
    engine, times = table
    with pytest.raises(StatementError, match="a timestamp without a zone cannot be stored: 2026-11-24T03:00:00"), \
            engine.begin() as conn:
        conn.execute(insert(times), [{"id": 1, "at": datetime(2026, 11, 24, 3, 0)}])


def test_a_runs_plans_come_back_as_discovery_made_them(tmp_path, mssql_corpus):
    from verification.config import Settings
    from verification.pipeline import plan_source

    _, _, planned = plan_source(Settings(), mssql_corpus, "mssql")
    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    store.start_run(RunResult(run_id="r1", engine="mssql", source=str(mssql_corpus), started_at=T0))
    store.record_plans("r1", planned.plans)
    back = store.plans("r1")
    assert [p.database for p in back] == [p.database for p in planned.plans]
    assert back == planned.plans  # every backup, LSN, rule, defect and secured point, equal
    assert back[0].chain.backups[0].start.tzinfo is not None
    store.record_plans("r1", planned.plans[:2])  # a second discovery of the same run replaces the first
    assert [p.database for p in store.plans("r1")] == [p.database for p in planned.plans[:2]]
    with pytest.raises(KeyError, match="run r2 was not started in the results store"):
        store.plans("r2")
    store.close()


def _verified(database: str, verdict: str, rows: int, *, target: str = "latest", baseline: str = "passed"):  # type: ignore[no-untyped-def]
    from tests.unit.factories import history_entry

    entry = history_entry(database, {"engine": "postgres", "image": "i", "host": "h"}, []).model_dump(mode="json")
    entry.update(verdict=verdict, restore_point={"target": target, "achieved": None}, checks=[{
        "name": "data_baseline", "status": baseline, "summary": "s", "kind": "data",
        "details": {"tables": {"postgres.public.t": {"rows": rows, "columns": ["id"]}}}}])
    return DatabaseEntry.model_validate(entry)


def test_the_baseline_is_the_last_passed_one_however_many_runs_failed_since(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    runs = [("passed", 1000, "latest", "passed"),               # the one held to
            ("passed", 900, "2026-11-20T00:00:00+00:00", "passed"),  # a point in time: not the data of now
            ("passed", 800, "latest", "error"),                 # its baseline did not pass
            *[("failed", 10, "latest", "failed")] * 60]         # more failures than any window
    for number, (verdict, rows, target, baseline) in enumerate(runs):
        run_id = f"r{number:03d}"
        store.start_run(RunResult(run_id=run_id, engine="postgres", source="/s", started_at=T0 + timedelta(hours=number)))
        store.record_database(run_id, _verified("shop", verdict, rows, target=target, baseline=baseline))
    assert store.last_passed_baseline("shop") == {"tables": {"postgres.public.t": {"rows": 1000, "columns": ["id"]}}}
    assert store.last_passed_baseline("other") is None
    store.close()
