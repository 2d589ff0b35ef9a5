"""The scheduler steps' store side: rotation order, drift over real stored history, publish."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import TESTS
from tests.unit.factories import complete_plan, online_outcome, passed_check
from verification import orchestration
from verification.config import Settings, load_settings
from verification.errors import RestoreproofError, SourceError
from verification.model import (
    DatabaseIdentity,
    DatabaseResult,
    PhaseStatus,
    PhaseTiming,
    RestorePoint,
    RunResult,
    SystemIdentifier,
    Verdict,
)
from verification.reports.json_report import database_entry
from verification.results import ResultStore


def stored_run(store: ResultStore, run_id: str, when: datetime, seconds: dict[str, float],
               verdict: Verdict = Verdict.PASSED, target: str = "latest", source: str = "/b") -> None:
    store.start_run(RunResult(run_id=run_id, engine="postgres", source=source, started_at=when))
    for name, value in seconds.items():
        plan = complete_plan()
        plan.database = name
        outcome = online_outcome(passed_check())
        phases = [PhaseTiming("transfer", PhaseStatus.MEASURED, seconds=value)]
        result = DatabaseResult(name, verdict, ["r"], plan, RestorePoint(target, when), phases, outcome.checks,
                                identity=DatabaseIdentity(source, name, SystemIdentifier("7", "backup.info")))
        store.record_database(run_id, database_entry(result))
    store.finish_run(run_id, when + timedelta(minutes=5), str(verdict))


def test_drift_reads_stored_history_and_alerts(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("RESTOREPROOF_RTO__DEFAULT_SECONDS", "1000")
    settings = load_settings()
    store = ResultStore(settings.results_database_url)
    start = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
    for day in range(0, 35, 7):  # growing 100 s a week from 500 s; a steady database beside it
        stored_run(store, f"run{day}", start + timedelta(days=day), {"growing": 500 + 100 * day / 7, "steady": 300})
    store.close()
    results = {r["database"]: r for r in orchestration.drift(settings, now=start + timedelta(days=28))}
    assert results["steady"]["alerts"] == [] and results["steady"]["runs"] == 5
    growing = results["growing"]
    assert growing["slope_seconds_per_day"] > 14 and growing["last_seconds"] == 900
    assert (growing["source"], growing["system_id"], growing["series"]) == ("/b", "7", "latest")
    # 500 + 14.29 s/day reaches 1000 s on day 35: 7 days after "now".
    assert growing["alerts"] == ["growing: at the current growth (+14.3 s/day over 5 runs) recovery exceeds its RTO "
                                 "of 1000 s in about 7 days (2026-12-06)"]


def test_drift_draws_no_trend_from_too_few_runs_and_trends_latest_and_points_in_time_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("RESTOREPROOF_RTO__DEFAULT_SECONDS", "20000")
    settings = load_settings()
    store = ResultStore(settings.results_database_url)
    start = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)
    # The case seen: a run to a point in time and a latest run 28 s apart, 10 s and 5,000 s.
    stored_run(store, "pit", start, {"demo1": 10.0}, target="2026-10-30T00:00:00+00:00")
    stored_run(store, "latest", start + timedelta(seconds=28), {"demo1": 5000.0})
    # The same name in another repository: its own database, its own series.
    for day in range(5):
        stored_run(store, f"other{day}", start + timedelta(days=day), {"demo1": 100.0 + 100 * day}, source="/c")
    store.close()
    found = {(r["source"], r["series"]): r for r in orchestration.drift(settings, now=start + timedelta(days=4))}
    assert set(found) == {("/b", "latest"), ("/b", "point-in-time"), ("/c", "latest")}
    for kind in ("latest", "point-in-time"):
        one = found[("/b", kind)]
        assert (one["runs"], one["slope_seconds_per_day"], one["alerts"]) == (1, None, [])
        assert ("no trend and no alert from history: 1 measured runs over 0.0 days; a trend needs at least 5 runs "
                "over at least 3 days (rto.trend_min_runs, rto.trend_min_days)") in one["notes"]
    assert any("left out: latest and point-in-time runs are trended apart" in n for n in found[("/b", "latest")]["notes"])
    other = found[("/c", "latest")]
    assert other["runs"] == 5 and other["slope_seconds_per_day"] == pytest.approx(100.0)


def test_rotation_puts_never_and_least_recently_verified_first_and_ignores_errors(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path}/r.db")
    start = datetime(2026, 11, 1, tzinfo=UTC)
    stored_run(store, "a", start, {"old": 1, "recent": 1})
    stored_run(store, "b", start + timedelta(days=1), {"recent": 1})
    stored_run(store, "c", start + timedelta(days=2), {"old": 1}, verdict=Verdict.ERROR)
    last = store.last_verified()
    store.close()
    assert last["old"].replace(tzinfo=UTC) == start  # the error on day 2 did not count
    assert last["recent"].replace(tzinfo=UTC) == start + timedelta(days=1)
    assert "never" not in last


def test_a_due_database_without_a_result_keeps_the_run_from_passing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    settings = load_settings(report_dir=tmp_path / "reports")
    store = ResultStore(settings.results_database_url)
    start = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    store.start_run(RunResult(run_id="r1", engine="postgres", source="/b", started_at=start,
                              host={"due": ["demo1", "demo2"], "unreadable": []}))
    store.close()
    store = ResultStore(settings.results_database_url)
    plan = complete_plan()
    outcome = online_outcome(passed_check())
    result = DatabaseResult("demo1", Verdict.PASSED, ["ok"], plan, RestorePoint("latest", start), outcome.phases,
                            outcome.checks)
    store.record_database("r1", database_entry(result))
    store.close()
    published = orchestration.publish(settings, "r1")
    import json

    report = json.loads((tmp_path / "reports" / "r1" / "report.json").read_text())
    assert published["verdict"] == report["verdict"] == "error"
    assert [n["database"] for n in report["not_verified"]] == ["demo2"]
    assert published["failed"] == ["demo2"]
    assert "Not verified in this run" in (tmp_path / "reports" / "r1" / "report.html").read_text()


def test_the_time_budget_stops_a_verification_before_it_starts(tmp_path):
    import pytest

    params = orchestration.NightlyParams(source=str(tmp_path / "not-even-read"))
    with pytest.raises(orchestration.BudgetExceeded, match="goes first next time"):
        orchestration.verify(load_settings(), params, "r1", "demo1", datetime.now(UTC) - timedelta(seconds=1))


def test_a_restore_point_is_normalised_to_utc_and_a_naive_one_is_refused():
    from datetime import UTC, datetime, timedelta, timezone

    from verification.orchestration import utc_point

    assert utc_point("2026-11-22T01:30:00+01:00") == datetime(2026, 11, 22, 0, 30, tzinfo=UTC)
    assert utc_point("2026-11-22T01:30:00Z") == datetime(2026, 11, 22, 1, 30, tzinfo=UTC)
    assert utc_point(datetime(2026, 11, 22, 1, 30, tzinfo=timezone(timedelta(hours=-5)))) == datetime(
        2026, 11, 22, 6, 30, tzinfo=UTC)
    assert utc_point(None) is None and utc_point("{{ params.at }}") is None
    with pytest.raises(ValueError, match=r"2026-11-22T01:30:00 has no UTC offset"):
        utc_point("2026-11-22T01:30:00")
    with pytest.raises(ValueError, match=r"'yesterday' is not an ISO 8601 time"):
        utc_point("yesterday")


def test_the_hook_loads_the_file_it_is_given_and_names_one_that_is_missing(tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(TESTS.parent / "plugins"))
    from restoreproof_airflow.hooks import RestoreproofHook

    from verification.errors import ConfigError

    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    config = tmp_path / "rp.yaml"
    config.write_text("checks:\n  sql:\n    - {name: n, query: select 1, expect: 1}\n")
    assert [c.name for c in RestoreproofHook(config=str(config)).settings.checks.sql] == ["n"]
    assert RestoreproofHook().settings.checks.sql == []
    with pytest.raises(ConfigError, match=f"configuration file {tmp_path}/gone.yaml does not exist"):
        RestoreproofHook(config=str(tmp_path / "gone.yaml")).get_conn()
    # The connection it holds is the results store its settings name, opened once and released on exit.
    config.write_text(f"results_url: sqlite:///{tmp_path}/hooked.db\n")
    with RestoreproofHook(config=str(config)) as hook:
        store = hook.get_conn()
        assert hook.get_conn() is store and str(store.engine.url) == f"sqlite:///{tmp_path}/hooked.db"
        assert store.recent_runs() == []
    assert hook._store is None


def test_reap_exits_non_zero_when_it_could_not_remove_or_even_look(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from verification.cli import app

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    # A real Docker SDK connection failure: nothing listens on this socket.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    result = CliRunner().invoke(app, ["reap"])
    assert result.exit_code == 2
    assert "not removed:" in result.stderr and "no Docker engine reachable" in result.stderr


def test_a_database_asked_for_that_the_source_does_not_hold_stops_the_run_naming_it(captured_repo, tmp_path):
    from verification.errors import SourceError

    settings = load_settings(None, state_dir=tmp_path, results_url=f"sqlite:///{tmp_path / 'r.db'}")
    params = orchestration.NightlyParams(source=str(captured_repo), engine="postgres", include=["demo1", "demo2x"])
    with pytest.raises(SourceError, match=r"^.*/repo has no database demo2x \(it has: demo1\)$"):
        orchestration.discover(settings, params, "r1", datetime.now(UTC))
    assert orchestration.discover(settings, orchestration.NightlyParams(
        source=str(captured_repo), engine="postgres", include=["demo1"]), "r2", datetime.now(UTC)) == ["demo1"]


def test_a_run_is_planned_once_and_every_later_step_works_from_the_recorded_plans(captured_repo, tmp_path,
                                                                                  monkeypatch):
    from verification import pipeline
    from verification.engines.postgres.engine import PostgresEngine

    settings = load_settings(None, state_dir=tmp_path, results_url=f"sqlite:///{tmp_path / 'r.db'}",
                             report_dir=tmp_path / "reports")
    started = datetime(2026, 11, 24, 1, 0, tzinfo=UTC)
    params = orchestration.NightlyParams(source=str(captured_repo), engine="postgres", target="local")
    assert orchestration.discover(settings, params, "r1", started, progress=lambda _: None) == ["demo1"]
    planned = pipeline.plan_source(settings, captured_repo, "postgres", None, params.point_choice())[2].plans

    def no_planning(*_: object) -> None:
        raise AssertionError("a step after discovery planned the source again")

    monkeypatch.setattr(PostgresEngine, "plan", no_planning)
    monkeypatch.setattr(PostgresEngine, "detect", no_planning)
    resumed = pipeline.resume(settings, "r1")
    assert resumed.plans == planned and resumed.plan("demo1") == planned[0]
    assert (resumed.engine.name, resumed.target, resumed.started_at) == ("postgres", "local", started)
    assert resumed.run_dir == tmp_path / "reports" / "r1"
    with pytest.raises(SourceError, match=r"^demo9 was not planned in run r1 \(its databases: demo1\)$"):
        resumed.plan("demo9")
    with pytest.raises(RestoreproofError, match="run r9 is not in the results store"):
        pipeline.resume(settings, "r9")


def test_an_offline_run_reserves_no_target_and_decides_every_database_from_its_files(mssql_copy, tmp_path,
                                                                                      monkeypatch):
    from verification.engines.mssql.engine import MssqlEngine

    def no_target(self: object, kind: str) -> None:
        raise AssertionError("an offline run must not ask for a target")

    monkeypatch.setattr(MssqlEngine, "check_target", no_target)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    settings = load_settings()
    root = mssql_copy("RestoreTimeClean")
    params = orchestration.NightlyParams(source=str(root), engine="mssql", target="offline")
    started = datetime(2026, 11, 24, 1, 0, tzinfo=UTC)
    assert orchestration.discover(settings, params, "off1", started, progress=lambda _: None) == ["RestoreTimeClean"]
    orchestration.reserve(settings, "off1")
    said = orchestration.verify(settings, params, "off1", "RestoreTimeClean", progress=lambda _: None)
    assert said["verdict"] == "error"
    assert said["reasons"][0] == "not restored: offline verification asked for (--target offline)"
    assert said["reasons"][1].startswith("page_verification (backup files, not a verdict on the data): no damaged page")


def test_a_runs_pages_param_sets_the_setting_in_every_task_and_none_leaves_the_file_to_say(tmp_path, monkeypatch):
    from verification.errors import ConfigError

    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    monkeypatch.delenv("RESTOREPROOF_MSSQL__PAGES", raising=False)
    given = orchestration.NightlyParams.from_mapping({"source": "/b", "pages": "all"})
    assert given.settings_overrides() == {"mssql": {"pages": "all"}}
    assert load_settings(**given.settings_overrides()).mssql.pages == "all"
    unset = orchestration.NightlyParams.from_mapping({"source": "/b", "pages": None})
    assert unset.pages is None and unset.settings_overrides() == {}
    config = tmp_path / "rp.yaml"
    config.write_text("mssql:\n  pages: all\n")
    assert load_settings(config, **unset.settings_overrides()).mssql.pages == "all"
    chain = orchestration.NightlyParams(source="/b", pages="chain")
    assert load_settings(config, **chain.settings_overrides()).mssql.pages == "chain"
    with pytest.raises(ConfigError, match=r"mssql\.pages"):
        load_settings(**orchestration.NightlyParams(source="/b", pages="some").settings_overrides())


def test_an_offline_run_asked_for_every_backup_fails_a_database_whose_other_full_is_damaged(mssql_copy, tmp_path,
                                                                                             monkeypatch):
    from tests.faults.test_mssql_faults import _damage, _pages

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    root = mssql_copy("OlaMsFilter/Simple")
    older = root / "OlaMsFilter/Simple/test_FULL_20160629_141300.bak"
    offset, _ = _pages(older)[0]
    _damage(older, lambda data: data.__setitem__(offset + 4000, data[offset + 4000] ^ 0x10))
    params = orchestration.NightlyParams(source=str(root), engine="mssql", target="offline", pages="all")
    settings = load_settings(**params.settings_overrides())  # what the DAG's tasks load
    started = datetime(2026, 11, 24, 1, 0, tzinfo=UTC)
    assert orchestration.discover(settings, params, "all1", started, progress=lambda _: None) == ["OlaMsFilterTest"]
    said = orchestration.verify(settings, params, "all1", "OlaMsFilterTest", progress=lambda _: None)
    assert said["verdict"] == "failed"
    assert said["reasons"][0].startswith("page_verification failed: 1 damaged page(s) (in backup(s) outside the "
                                         "planned chain: OlaMsFilter/Simple/test_FULL_20160629_141300.bak; none in "
                                         "the planned chain's own)")


def two_stanzas_discovered(captured_repo: Path,
                           tmp_path: Path) -> tuple[Settings, orchestration.NightlyParams, datetime]:
    """Run r1 discovered over two stanzas (demo1 and a copy, demo2), its state in tmp_path: its settings,
    parameters and start."""
    import shutil

    shutil.copytree(captured_repo / "backup" / "demo1", captured_repo / "backup" / "demo2")
    shutil.copytree(captured_repo / "archive" / "demo1", captured_repo / "archive" / "demo2")
    settings = load_settings(None, state_dir=tmp_path, results_url=f"sqlite:///{tmp_path / 'r.db'}",
                             report_dir=tmp_path / "reports")
    params = orchestration.NightlyParams(source=str(captured_repo), engine="postgres", target="local")
    started = datetime(2026, 11, 24, 1, 0, tzinfo=UTC)
    assert orchestration.discover(settings, params, "r1", started, progress=lambda _: None) == ["demo1", "demo2"]
    return settings, params, started


def test_a_teardown_after_a_killed_verify_records_the_database_error_and_the_next_run_takes_it_first(
        captured_repo, tmp_path):
    from tests.unit.factories import leftover_record
    from verification.targets.lease import Holder

    settings, params, started = two_stanzas_discovered(captured_repo, tmp_path)
    # demo2's verify task ran on another worker, which was killed with its target half restored.
    elsewhere = Holder("worker-b", 4242, "another-boot/4026531836/777")
    store = ResultStore(settings.results_database_url)
    try:
        lease = store.take_lease("r1", host=elsewhere.host, pid=elsewhere.pid, process=elsewhere.process,
                                 scope="task", lease_seconds=180, database="demo2")
        store.renew_lease(lease, database="demo2", phase="demo2: restoring 20261122-010000F")
    finally:
        store.close()
    left = leftover_record(tmp_path, "r1", elsewhere, "demo2")
    said: list[str] = []
    # Its heartbeat is still within its lease: the teardown may have come while it works (a timeout the
    # scheduler could not enforce): its target is kept, and why is said.
    kept = orchestration.remove(settings, "r1", "demo2", progress=said.append)
    assert kept.total == 0 and left.exists()
    assert said == [f"run r1: {kept.notes[0]}"] and kept.notes[0].startswith(
        "demo2 of run r1: kept, its task still works (worker worker-b pid 4242 is not on this host; its heartbeat at ")
    said.clear()
    # Then its heartbeat stops: the lease runs out and the teardown removes it and records why.
    from sqlalchemy import update

    from verification.results.store import RunLeaseRow

    store = ResultStore(settings.results_database_url)
    try:
        with store.engine.begin() as connection:
            connection.execute(update(RunLeaseRow).where(RunLeaseRow.id == lease).values(
                heartbeat_at=datetime.now(UTC) - timedelta(minutes=10)))
    finally:
        store.close()
    removed = orchestration.remove(settings, "r1", "demo2", progress=said.append)
    assert removed.folders == [str(left)] and not left.exists()
    assert len(said) == 1 and said[0].startswith("run r1: demo2: error, killed (no heartbeat from worker worker-b")
    published = orchestration.publish(settings, "r1")
    assert published["verdict"] == "error" and published["failed"] == ["demo2", "demo1"]
    report = pipeline_report(settings, "r1")
    (reason,) = next(d for d in report["databases"] if d["database"] == "demo2")["reasons"]
    assert reason.startswith("restoreproof was killed while verifying it: no heartbeat from worker worker-b pid 4242 "
                             "since ")
    assert "while: demo2: restoring 20261122-010000F" in reason
    # A teardown of a task that ended well finds nothing to say.
    assert orchestration.remove(settings, "r1", "demo1", progress=said.append).total == 0 and len(said) == 1
    assert orchestration.discover(settings, params, "r2", started + timedelta(days=1),
                                  progress=lambda _: None) == ["demo2", "demo1"]


def test_publish_records_a_killed_verify_whose_teardown_never_recorded_it(captured_repo, tmp_path):
    from verification.targets.lease import Holder, process_identity, this_process

    settings, params, started = two_stanzas_discovered(captured_repo, tmp_path)
    # demo2's verify task was killed on this host (its pid gone: no process has pid 0 here); its teardown
    # failed or never ran, so nothing recorded it. This process, a task still at work on demo1, holds
    # the other open lease.
    boot, namespace, _ = process_identity().split("/")
    killed = Holder("vm", 0, f"{boot}/{namespace}/1")
    store = ResultStore(settings.results_database_url)
    try:
        generation = store.run("r1").host["discovery"]  # type: ignore[union-attr]
        lease = store.take_lease("r1", host=killed.host, pid=killed.pid, process=killed.process, scope="task",
                                 lease_seconds=180, database="demo2", generation=generation)
        store.renew_lease(lease, database="demo2", phase="demo2: restoring 20261122-010000F")
        alive = this_process()
        store.take_lease("r1", host=alive.host, pid=alive.pid, process=alive.process, scope="task",
                         lease_seconds=180, database="demo1", generation=generation)
    finally:
        store.close()
    said: list[str] = []
    published = orchestration.publish(settings, "r1", progress=said.append)
    assert published["verdict"] == "error" and published["failed"] == ["demo2", "demo1"]
    assert len(said) == 1 and said[0].startswith("run r1: demo2: error, killed (worker vm pid 0 is gone (no process 0 ")
    (reason,) = next(d for d in pipeline_report(settings, "r1")["databases"] if d["database"] == "demo2")["reasons"]
    assert reason.startswith("restoreproof was killed while verifying it: worker vm pid 0 is gone")
    assert "while: demo2: restoring 20261122-010000F" in reason
    # The task seen at work is not taken for killed: demo1 is only not verified, its lease still open.
    report = pipeline_report(settings, "r1")
    assert [d["database"] for d in report["databases"]] == ["demo2"]
    assert [n["database"] for n in report["not_verified"]] == ["demo1"]
    store = ResultStore(settings.results_database_url)
    try:
        assert [row.database for row in store.leases(["r1"], open_only=True)] == ["demo1"]
    finally:
        store.close()
    # Next night, the killed database first.
    assert orchestration.discover(settings, params, "r2", started + timedelta(days=1),
                                  progress=lambda _: None) == ["demo2", "demo1"]


def pipeline_report(settings, run_id):  # type: ignore[no-untyped-def]
    import json

    return json.loads((settings.report_dir / run_id / "report.json").read_text())


def test_a_verify_task_killed_while_resuming_leaves_no_earlier_tries_entry(captured_repo, tmp_path, monkeypatch):
    """The lease names the database from the task's start; a kill during resume() (a slow listing)
    must leave the database without a result, not an earlier try's entry of the same discovery."""
    from verification import pipeline

    settings = load_settings(None, state_dir=tmp_path, results_url=f"sqlite:///{tmp_path / 'r.db'}",
                             report_dir=tmp_path / "reports")
    params = orchestration.NightlyParams(source=str(captured_repo), engine="postgres", target="local")
    assert orchestration.discover(settings, params, "r1", datetime(2026, 11, 24, 1, 0, tzinfo=UTC),
                                  progress=lambda _: None) == ["demo1"]
    store = ResultStore(settings.results_database_url)
    try:
        plan = complete_plan()
        result = DatabaseResult("demo1", Verdict.PASSED, ["an earlier try"], plan, RestorePoint("latest"))
        store.record_database("r1", database_entry(result), store.run("r1").host["discovery"])  # type: ignore[union-attr]
        assert store.recorded("r1") == {"demo1"}
    finally:
        store.close()

    class Killed(BaseException):
        pass

    def killed_while_listing(*_: object) -> None:
        raise Killed("the worker was killed while listing the source")

    monkeypatch.setattr(pipeline, "resume", killed_while_listing)
    with pytest.raises(Killed):
        orchestration.verify(settings, params, "r1", "demo1", progress=lambda _: None)
    store = ResultStore(settings.results_database_url)
    try:
        assert store.recorded("r1") == set()
        (lease,) = store.leases(["r1"], open_only=False)[-1:]
        assert (lease.database, lease.generation) == ("demo1", store.run("r1").host["discovery"])  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_verify_task_sweeps_its_own_workers_folder_of_dead_runs_only(captured_repo, tmp_path, monkeypatch):
    """With Celery the teardown may run on another worker, which cannot see this one's folder: each
    verify task sweeps it, removing what dead runs left and keeping what a live holder has."""
    from tests.unit.factories import leftover_record
    from verification import pipeline
    from verification.targets.lease import Holder, this_process

    settings = load_settings(None, state_dir=tmp_path, results_url=f"sqlite:///{tmp_path / 'r.db'}",
                             report_dir=tmp_path / "reports")
    params = orchestration.NightlyParams(source=str(captured_repo), engine="postgres", target="local")
    store = ResultStore(settings.results_database_url)
    try:  # last night's run, published; one of its tasks was killed here, its target left behind
        store.start_run(RunResult(run_id="r0", engine="postgres", source="/b", started_at=datetime(2026, 11, 23,
                                                                                                   tzinfo=UTC)))
        store.finish_run("r0", datetime(2026, 11, 23, 2, tzinfo=UTC), "error")
    finally:
        store.close()
    assert orchestration.discover(settings, params, "r1", datetime(2026, 11, 24, 1, 0, tzinfo=UTC),
                                  progress=lambda _: None) == ["demo1"]
    me = this_process()
    dead = leftover_record(tmp_path, "r0", Holder(me.host, 4242, "gone"), "demo1")
    live = leftover_record(tmp_path, "r1", me, "demo2")  # a live task of tonight's run, on this worker

    def stop_after_the_sweep(*_: object) -> None:
        raise SourceError("stopped here: the sweep is what is tested")

    monkeypatch.setattr(pipeline, "resume", stop_after_the_sweep)
    said: list[str] = []
    with pytest.raises(SourceError, match="stopped here"):
        orchestration.verify(settings, params, "r1", "demo1", progress=said.append)
    assert not dead.exists() and live.exists()
    assert any(line.startswith(f"run r0: removed {dead} from this worker (run r0 finished at ") for line in said)
