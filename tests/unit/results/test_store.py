"""The results store on a real SQLite database: its column types, plans, baselines and run listings."""

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, select
from sqlalchemy.exc import StatementError

from tests.unit.factories import T0
from verification.model import DatabaseIdentity, RunResult, SystemIdentifier
from verification.report_model import DatabaseEntry
from verification.results import ResultStore
from verification.results.identity import Match
from verification.results.store import StoredBaseline, UtcDateTime


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


SHOP_S = DatabaseIdentity("/s", "shop", SystemIdentifier("7001", "backup/shop/backup.info [db] db-system-id"))
AT = "2026-11-20T00:00:00+00:00"


def _verified(database: str, verdict: str, rows: int, *, target: str = "latest", baseline: str = "passed",  # type: ignore[no-untyped-def]
              identity: DatabaseIdentity | None = None):
    from tests.unit.factories import history_entry

    entry = history_entry(database, {"engine": "postgres", "image": "i", "host": "h"}, []).model_dump(mode="json")
    entry.update(verdict=verdict, restore_point={"target": target, "achieved": None}, checks=[{
        "name": "data_baseline", "status": baseline, "summary": "s", "kind": "data",
        "details": {"tables": {"postgres.public.t": {"rows": rows, "columns": ["id"]}}}}])
    return DatabaseEntry.model_validate(entry).model_copy(update={"identity": identity})


def _record_runs(store: ResultStore, runs: list[tuple[str, DatabaseEntry]], *, first: int = 0) -> None:
    for number, (source, entry) in enumerate(runs, start=first):
        run_id = f"r{number:03d}"
        store.start_run(RunResult(run_id=run_id, engine="postgres", source=source,
                                  started_at=T0 + timedelta(hours=number)))
        store.record_database(run_id, entry)


def _rows(found: StoredBaseline | None) -> tuple[int, str, str] | None:
    if found is None:
        return None
    return found.details["tables"]["postgres.public.t"]["rows"], found.run_id, str(found.matched)


def test_the_baseline_is_the_last_passed_one_of_its_point_however_many_runs_failed_since(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    runs = [("passed", 1000, "latest", "passed"),               # the one a latest run is held to
            ("passed", 900, AT, "passed"),                      # a point in time: the one that point is held to
            ("passed", 800, "latest", "error"),                 # its baseline did not pass
            ("failed", 700, AT, "failed"),                      # failed: never a baseline
            *[("failed", 10, "latest", "failed")] * 60]         # more failures than any window
    _record_runs(store, [("/s", _verified("shop", verdict, rows, target=target, baseline=baseline, identity=SHOP_S))
                    for verdict, rows, target, baseline in runs])
    assert _rows(store.last_passed_baseline(SHOP_S)) == (1000, "r000", "identity")
    assert _rows(store.last_passed_baseline(SHOP_S, "latest")) == (1000, "r000", "identity")
    # A verification of an earlier point is held only to one of the same point, never to the latest's rows.
    assert _rows(store.last_passed_baseline(SHOP_S, AT)) == (900, "r001", "identity")
    assert store.last_passed_baseline(SHOP_S, "2026-11-21T00:00:00+00:00") is None  # the first of its point
    assert store.last_passed_baseline(DatabaseIdentity("/s", "other", SHOP_S.system_id)) is None
    store.close()


def test_a_baseline_is_never_another_sources_nor_another_clusters_of_the_same_name(tmp_path):
    shop_t = DatabaseIdentity("/t", "shop", SHOP_S.system_id)  # the same cluster's backups copied elsewhere
    reborn = DatabaseIdentity("/s", "shop", SystemIdentifier("7002", "backup/shop/backup.info [db] db-system-id"))
    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    _record_runs(store, [("/s", _verified("shop", "passed", 4004, identity=SHOP_S)),
                    ("/t", _verified("shop", "passed", 1001, identity=shop_t)),
                    ("/s", _verified("shop", "passed", 12, identity=reborn))])
    assert _rows(store.last_passed_baseline(SHOP_S)) == (4004, "r000", "identity")
    assert _rows(store.last_passed_baseline(shop_t)) == (1001, "r001", "identity")
    assert _rows(store.last_passed_baseline(reborn)) == (12, "r002", "identity")
    assert [row.run_id for row in store.history(identity=SHOP_S)] == ["r000"]
    assert [row.run_id for row in store.history()] == ["r002", "r001", "r000"]
    assert {i.key for i in store.known_databases()} == {SHOP_S.key, shop_t.key, reborn.key}
    # Each has its own place in the rotation: verifying one never moves another of the same name.
    assert store.rotation([SHOP_S, shop_t, reborn]) == {SHOP_S.key: (False, T0),
                                                         shop_t.key: (False, T0 + timedelta(hours=1)),
                                                         reborn.key: (False, T0 + timedelta(hours=2))}
    store.close()


def test_rows_recorded_before_identities_count_by_source_and_name_and_say_so(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    _record_runs(store, [("/s", _verified("shop", "passed", 4004)),   # recorded before identities were kept
                    ("/t", _verified("shop", "passed", 1001))])
    assert _rows(store.last_passed_baseline(SHOP_S)) == (4004, "r000", "source and name")
    assert _rows(store.last_passed_baseline(DatabaseIdentity("/t", "shop", SHOP_S.system_id))) == (
        1001, "r001", "source and name")
    assert store.last_passed_baseline(DatabaseIdentity("/u", "shop", SHOP_S.system_id)) is None
    # A newer row with an identity is the identity's; the older one by name still counts behind it.
    _record_runs(store, [("/s", _verified("shop", "passed", 4100, identity=SHOP_S))], first=2)
    assert _rows(store.last_passed_baseline(SHOP_S)) == (4100, "r002", "identity")
    assert [(row.run_id, row.match(SHOP_S)) for row in store.history(identity=SHOP_S)] == [
        ("r002", Match.IDENTITY), ("r000", Match.NAME)]
    # Known: the identity (covering /s's older rows), and /t's older rows under their source and name.
    assert [(i.source, i.name, i.system_id) for i in store.known_databases()] == [
        ("/s", "shop", SHOP_S.system_id), ("/t", "shop", None)]
    assert store.last_passed(source="/t") == {"shop": T0 + timedelta(hours=1)}
    assert store.last_passed() == {"shop": T0 + timedelta(hours=2)}
    store.close()


# --- the listings: run summaries paged newest first, a folder's runs, the daily recovery aggregates ----------------
# On SQLite and PostgreSQL (new_store: tests/unit/results/conftest.py): their SQL differs (JSON paths, days).

SAMPLE = Path(__file__).resolve().parents[2] / "fixtures" / "reports" / "report-1.3.json"


def _sample_entries() -> list[DatabaseEntry]:
    """The 1.3 sample's two databases: demo1 passed (RTO met, no alert), demo2 failed (RTO met, 2 alerts)."""
    return [DatabaseEntry.model_validate(d) for d in json.loads(SAMPLE.read_text())["databases"]]


def _record(store: ResultStore, run_id: str, started: datetime, folder: Path | None, *, finish: bool = True,
            entries: list[DatabaseEntry] | None = None, due: list[str] | None = None,
            recovery: float | None = None) -> None:
    store.start_run(RunResult(run_id=run_id, engine="postgres", source="/backups", started_at=started,
                              host={"due": due} if due is not None else {}),
                    folder / run_id if folder is not None else None)
    for entry in entries or []:
        store.record_database(run_id, entry.model_copy(update={"recovery_seconds": recovery})
                              if recovery is not None else entry)
    if finish:
        store.finish_run(run_id, started + timedelta(minutes=1), "failed" if entries else "passed")


def _bulk(store: ResultStore, count: int, folder: Path, start: datetime) -> None:
    """`count` published runs an hour apart, inserted as rows at once (the API's transaction per call
    would take minutes for 10,000; bench/reports.py fills its store through the API)."""
    from sqlalchemy import insert

    from verification.results.store import RunRow

    with store.engine.begin() as connection:
        connection.execute(insert(RunRow), [
            {"run_id": f"r{n:05d}", "engine": "postgres", "source": "/b", "verdict": "passed",
             "started_at": start + timedelta(hours=n), "finished_at": start + timedelta(hours=n, minutes=1),
             "report_dir": str(folder / f"r{n:05d}"), "report_folder": str(folder), "host": {}}
            for n in range(count)])


def test_a_page_of_runs_is_newest_first_with_what_the_index_shows(tmp_path, new_store):
    store = ResultStore(new_store())
    folder = tmp_path / "reports"
    _record(store, "b-old", T0, folder, entries=_sample_entries(), due=["demo1", "demo2", "demo3"])
    _record(store, "c-tie", T0 + timedelta(days=1), folder, entries=_sample_entries()[:1])
    _record(store, "a-tie", T0 + timedelta(days=1), folder)  # same start: the run id breaks the tie
    page = store.run_page(1, 2, folder=folder)
    assert (page.total, page.pages, page.number, page.size) == (3, 2, 1, 2)
    assert [r.run_id for r in page.runs] == ["c-tie", "a-tie"]
    older = store.run_page(2, 2, folder=folder).runs
    assert [r.run_id for r in older] == ["b-old"]
    run = older[0]
    assert (run.verdict, run.engine, run.source, run.started_at) == ("failed", "postgres", "/backups", T0)
    assert run.report_dir == str(folder / "b-old") and run.finished_at == T0 + timedelta(minutes=1)
    assert [(d.database, d.verdict, d.recovery_seconds, d.rto_met, d.alerts) for d in run.databases] == [
        ("demo1", "passed", 4.82, True, 0), ("demo2", "failed", 5.32, True, 2)]
    assert (run.count("passed"), run.count("failed"), run.count("error")) == (1, 1, 0)
    assert run.not_verified == 1  # demo3 was due and has no entry
    assert store.run_page(3, 2, folder=folder).runs == []  # past the last page: empty, not an error
    with pytest.raises(ValueError, match="page 0 of 2 runs"):
        store.run_page(0, 2)
    store.close()


def test_a_rto_missed_and_a_report_without_objectives_are_told_apart(tmp_path, new_store):
    store = ResultStore(new_store())
    missed, old = _sample_entries()
    assert missed.objectives is not None
    missed.objectives.rto.met = False
    old = old.model_copy(update={"objectives": None, "drift": None})
    _record(store, "r1", T0, tmp_path, entries=[missed, old])
    (run,) = store.run_page(1, 50).runs
    assert [(d.rto_met, d.alerts) for d in run.databases] == [(False, 0), (None, 0)]
    store.close()


def test_paging_boundaries_no_runs_one_page_exactly_and_one_more(tmp_path, new_store):
    store = ResultStore(new_store())
    folder = tmp_path / "reports"
    empty = store.run_page(1, 50, folder=folder)
    assert (empty.runs, empty.total, empty.pages) == ([], 0, 1)
    _bulk(store, 50, folder, T0)
    full = store.run_page(1, 50, folder=folder)
    assert (len(full.runs), full.total, full.pages) == (50, 50, 1)
    assert store.run_page(2, 50, folder=folder).runs == []
    _record(store, "r99999", T0 + timedelta(days=365), folder)
    first, second = store.run_page(1, 50, folder=folder), store.run_page(2, 50, folder=folder)
    assert (first.total, first.pages) == (51, 2)
    assert first.runs[0].run_id == "r99999" and first.runs[-1].run_id == "r00001"
    assert [r.run_id for r in second.runs] == ["r00000"]
    store.close()


def test_ten_thousand_runs_page_in_order_and_only_a_folders_own(tmp_path, new_store):
    store = ResultStore(new_store())
    folder = tmp_path / "reports"
    _bulk(store, 10_000, folder, T0)
    _record(store, "elsewhere", T0 + timedelta(days=9999), tmp_path / "other")  # newest of all, another folder
    _record(store, "running", T0 + timedelta(days=9998), folder, finish=False)
    page = store.run_page(1, 50, folder=folder, finished_only=True)
    assert (page.total, page.pages) == (10_000, 200)
    assert [r.run_id for r in page.runs] == [f"r{n:05d}" for n in range(9999, 9949, -1)]
    last = store.run_page(200, 50, folder=folder, finished_only=True)
    assert [r.run_id for r in last.runs] == [f"r{n:05d}" for n in range(49, -1, -1)]
    seen = [r.run_id for n in range(1, 201) for r in store.run_page(n, 50, folder=folder, finished_only=True).runs]
    assert seen == [f"r{n:05d}" for n in range(9999, -1, -1)]  # every run once, none skipped at a boundary
    assert store.run_page(1, 50, folder=folder).runs[0].run_id == "running"  # unless only the published ones
    everything = store.run_page(1, 50)
    assert everything.total == 10_002 and everything.runs[0].run_id == "elsewhere"
    listed = store.run_listing(folder)
    assert len(listed) == 10_001 and listed[0].run_id == "r00000" and listed[-1].run_id == "running"
    assert listed[-1].finished is None and listed[0].finished is not None and listed[0].verdict == "passed"
    assert store.run_starts(["r00000", "r09999", "nope"]) == {"r00000": T0, "r09999": T0 + timedelta(hours=9999)}
    assert store.report_folders() == [str(tmp_path / "other"), str(folder)]
    store.close()


def test_a_relative_report_folder_is_kept_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    _record(store, "r1", T0, Path("reports"))
    assert store.run_page(1, 50, folder=tmp_path / "reports").total == 1
    assert store.run_page(1, 50, folder=Path("reports")).total == 1
    assert store.report_folders() == [str(tmp_path / "reports")]
    store.close()


def test_recovery_is_aggregated_per_database_and_utc_day(tmp_path, new_store):
    store = ResultStore(new_store())
    folder = tmp_path / "reports"
    evening = datetime(2026, 11, 22, 23, 30, tzinfo=timezone(timedelta(hours=-2)))  # 01:30 UTC on the 23rd
    _record(store, "r1", datetime(2026, 11, 23, 0, 10, tzinfo=UTC), folder, entries=_sample_entries(), recovery=4.0)
    _record(store, "r2", evening, folder, entries=_sample_entries(), recovery=6.0)
    _record(store, "r3", datetime(2026, 11, 24, 1, 0, tzinfo=UTC), folder, entries=_sample_entries()[:1])
    never = _sample_entries()[0].model_copy(update={"recovery_seconds": None})
    _record(store, "r4", datetime(2026, 11, 25, 1, 0, tzinfo=UTC), folder, entries=[never])
    _record(store, "r5", datetime(2026, 11, 26, 1, 0, tzinfo=UTC), folder, entries=_sample_entries(), finish=False)
    days = [(d.database, d.day.isoformat(), d.runs, d.online, d.mean_seconds, d.min_seconds, d.max_seconds)
            for d in store.daily_recovery(folder)]
    assert days == [("demo1", "2026-11-23", 2, 2, 5.0, 4.0, 6.0), ("demo1", "2026-11-24", 1, 1, 4.82, 4.82, 4.82),
                    ("demo1", "2026-11-25", 1, 0, None, None, None),
                    ("demo2", "2026-11-23", 2, 2, 5.0, 4.0, 6.0)]  # r5 is still running: not yet in
    assert store.newest_rto_targets(folder, ["demo1", "demo2", "demo9"]) == {"demo1": 14400.0, "demo2": 10.0}
    assert store.daily_recovery(tmp_path / "other") == []
    assert store.newest_rto_targets(tmp_path / "other", ["demo1"]) == {}
    store.close()


def test_the_rto_target_is_the_newest_published_runs(tmp_path, new_store):
    store = ResultStore(new_store())
    demo1, _ = _sample_entries()
    stricter = demo1.model_copy(deep=True)
    assert stricter.objectives is not None
    stricter.objectives.rto.target_seconds = 60.0
    _record(store, "r1", T0, tmp_path, entries=[demo1])
    _record(store, "r2", T0 + timedelta(days=1), tmp_path, entries=[stricter])
    _record(store, "r3", T0 + timedelta(days=2), tmp_path, entries=[demo1], finish=False)  # not published yet
    assert store.newest_rto_targets(tmp_path, ["demo1"]) == {"demo1": 60.0}
    store.finish_run("r3", T0 + timedelta(days=2), "passed")
    assert store.newest_rto_targets(tmp_path, ["demo1"]) == {"demo1": 14400.0}
    # A newest entry without objectives (a report older than schema 1.3) holds it to none.
    _record(store, "r4", T0 + timedelta(days=3), tmp_path, entries=[demo1.model_copy(update={"objectives": None})])
    assert store.newest_rto_targets(tmp_path, ["demo1"]) == {}
    store.close()


def test_leases_on_both_backends_use_the_stores_clock_and_end_once(new_store):  # type: ignore[no-untyped-def]
    store = ResultStore(new_store())
    try:
        before = store.now()
        assert before.tzinfo is UTC and abs(before - datetime.now(UTC)) < timedelta(minutes=1)
        lease = store.take_lease("r1", host="w" * 300, pid=7, process="boot/ns/1", scope="task", lease_seconds=60,
                                 database="demo1", generation="g1")
        store.take_lease("r2", host="w2", pid=8, process="boot/ns/2", scope="run", lease_seconds=60)
        beat = store.renew_lease(lease, database="demo2", phase="demo2: restoring")
        (row,) = store.leases(["r1"])
        assert (len(row.host), row.database, row.phase, row.generation) == (255, "demo2", "demo2: restoring", "g1")
        assert row.heartbeat_at == beat >= row.acquired_at >= before.replace(microsecond=0)
        assert [r.run_id for r in store.leases(open_only=True)] == ["r1", "r2"]
        assert store.release_lease(lease, "released") and not store.release_lease(lease, "killed: twice")
        assert [r.run_id for r in store.leases(open_only=True)] == ["r2"]
        assert store.leases(["r1"])[0].ended == "released"
        with pytest.raises(KeyError, match="lease 999 is not in the results store"):
            store.renew_lease(999, database=None, phase=None)
    finally:
        store.close()


def test_a_sweep_ending_a_lease_again_after_a_lost_answer_is_still_told_it_did(new_store):  # type: ignore[no-untyped-def]
    """The store committed the first try but its answer was lost, so the call is made again: the same
    sweep is told it ended the lease (and goes on to record and close the run); another is not."""
    store = ResultStore(new_store())
    try:
        lease = store.take_lease("r1", host="w", pid=7, process="boot/ns/1", scope="run", lease_seconds=60)
        assert store.release_lease(lease, "killed: no heartbeat", "sweepA")
        assert store.release_lease(lease, "killed: no heartbeat", "sweepA")  # the retry after the lost answer
        assert not store.release_lease(lease, "killed: no heartbeat", "sweepB")
        assert not store.release_lease(lease, "killed: no heartbeat")
        (row,) = store.leases(["r1"])
        assert row.ended == "killed: no heartbeat (sweep sweepA)"
    finally:
        store.close()


def entry(name: str, verdict: str) -> DatabaseEntry:
    from tests.unit.factories import complete_plan
    from verification.model import DatabaseResult, RestorePoint, Verdict
    from verification.reports.json_report import database_entry

    plan = complete_plan()
    plan.database = name
    return database_entry(DatabaseResult(name, Verdict(verdict), [verdict], plan, RestorePoint("latest")))


def test_the_rotation_puts_a_database_that_ended_in_error_first_then_never_then_least_recent(tmp_path):
    from verification.results.store import in_rotation

    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    for day, verdicts in enumerate([{"old": "passed", "recent": "passed", "killed": "passed"},
                                    {"recent": "passed", "killed": "error"}, {"recent": "failed"}]):
        run_id = f"run{day}"
        store.start_run(RunResult(run_id=run_id, engine="postgres", source="/b", started_at=T0 + timedelta(days=day)))
        for name, verdict in verdicts.items():
            store.record_database(run_id, entry(name, verdict))
    names = ["recent", "never", "old", "killed"]
    identities = {name: DatabaseIdentity("/b", name) for name in names}
    rotation = store.rotation(list(identities.values()))
    assert rotation == {identities["old"].key: (False, T0), identities["recent"].key: (False, T0 + timedelta(days=2)),
                        identities["killed"].key: (True, T0)}
    assert in_rotation(names, rotation, key=lambda n: identities[n].key) == ["killed", "never", "old", "recent"]
    # An error is what it ended in last time only: verified since, it takes its place again.
    store.start_run(RunResult(run_id="run3", engine="postgres", source="/b", started_at=T0 + timedelta(days=3)))
    store.record_database("run3", entry("killed", "passed"))
    rotation = store.rotation(list(identities.values()))
    assert in_rotation(names, rotation, key=lambda n: identities[n].key) == ["never", "old", "recent", "killed"]
    # Another source's database of the same name is not this one: never verified here.
    assert store.rotation([DatabaseIdentity("/c", "old")]) == {}
    # What was recorded is never replaced by what a reaper concludes.
    assert not store.record_if_absent("run3", entry("killed", "error"))
    assert store.record_if_absent("run3", entry("old", "error"))
    assert [(e.database, e.verdict) for e in store.run_with_reports("run3")[1]] == [
        ("killed", "passed"), ("old", "error")]
    store.close()


def test_nothing_is_recorded_into_a_run_already_finished(tmp_path):  # type: ignore[no-untyped-def]
    """A worker whose heartbeat went stale is swept by another host: its run is recorded, finished and
    published. When it comes back and records "passed", that is refused, naming the run."""
    from verification.errors import RunFinishedError

    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    try:
        store.start_run(RunResult(run_id="r1", engine="postgres", source="/b", started_at=T0,
                                  host={"discovery": "g1"}))
        # The sweep's order: the killed database recorded first, then the run finished.
        assert store.record_if_absent("r1", entry("demo1", "error"), "g1")
        store.finish_run("r1", T0 + timedelta(minutes=5), "error")
        for late in (lambda: store.record_database("r1", entry("demo1", "passed"), "g1"),
                     lambda: store.forget_database("r1", "demo1", "g1"),
                     lambda: store.record_if_absent("r1", entry("demo2", "error"))):
            with pytest.raises(RunFinishedError, match=r"run r1 was already finished at .* \(error; ended by its "
                                                       r"publication or by another worker's sweep"):
                late()
        assert [(e.database, e.verdict) for e in store.run_with_reports("r1")[1]] == [("demo1", "error")]
    finally:
        store.close()


# --- a store that does not answer, or is busy ------------------------------------------------------

def _quick(attempts: int = 3, busy: float = 30.0):  # type: ignore[no-untyped-def]
    from verification.config import ResultsRetrySettings

    return ResultsRetrySettings(attempts=attempts, first_wait=0.05, max_wait=0.2, sqlite_busy_timeout=busy)


def test_a_store_that_does_not_answer_is_tried_again_then_named_with_its_password_masked(caplog):
    import logging

    from verification.errors import StoreUnavailableError

    caplog.set_level(logging.WARNING, logger="verification.results.store")
    # Port 9 (discard) on this host: nothing listens, every connection is refused at once.
    url = "postgresql+psycopg://restoreproof:Se%40cret-7@127.0.0.1:9/results?connect_timeout=2"
    with pytest.raises(StoreUnavailableError) as raised:
        ResultStore(url, _quick())
    said = str(raised.value)
    assert said.startswith("the results store postgresql+psycopg://restoreproof:********@127.0.0.1:9/results"), said
    assert re.search(r"did not answer \(opening the store\) after 3 tries over \d+ s \(results_retry\): "
                     r"OperationalError: connection failed: ", said), said
    assert "Se@cret" not in said and "Se%40cret" not in said
    tries = [r.getMessage() for r in caplog.records]
    assert len(tries) == 2 and all("trying again in" in t and "restoreproof:********@" in t for t in tries), tries
    assert "(try 2 of 3)" in tries[0] and "(try 3 of 3)" in tries[1]


def test_what_the_store_answers_is_never_tried_again(tmp_path, caplog):
    import logging

    caplog.set_level(logging.WARNING, logger="verification.results.store")
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}", _quick())
    with pytest.raises(KeyError, match="run nope is not in the results store"):
        store.run_with_reports("nope")
    store.close()
    assert caplog.records == []


def test_a_sqlite_store_logs_ahead_and_waits_for_another_writer(tmp_path):
    from sqlalchemy import text

    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}", _quick(busy=12.5))
    with store.engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 12500
    store.close()


def test_a_sqlite_store_locked_longer_than_its_busy_timeout_is_tried_again_until_free(tmp_path, caplog):
    import logging
    import sqlite3
    import threading

    caplog.set_level(logging.WARNING, logger="verification.results.store")
    path = tmp_path / "r.db"
    ResultStore(f"sqlite:///{path}").close()
    # Another process's long write: the file's write lock held for 0.6 s, three times the busy timeout.
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.6, holder.execute, ["COMMIT"])
    release.start()
    store = ResultStore(f"sqlite:///{path}", _quick(attempts=10, busy=0.2))
    try:
        store.start_run(RunResult(run_id="r1", engine="postgres", source="/x", started_at=T0))
        assert store.run("r1") is not None
    finally:
        release.join()
        holder.close()
        store.close()
    assert any("database is locked" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
