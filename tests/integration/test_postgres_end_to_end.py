"""The PostgreSQL path end to end: real pgBackRest repositories restored in real containers."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.conftest import leftovers
from verification.config import SqlCheck
from verification.engines.postgres.serverlog import parse_pg_timestamp
from verification.pipeline import plan_source, run_verification
from verification.reports.json_report import report_data, validate_report

pytestmark = pytest.mark.integration


def phase(db: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(p for p in db["phases"] if p["name"] == name)


def test_demo_repository_passes_with_every_phase_timed(demo, settings):
    result = run_verification(settings, demo.repository)
    report = report_data(result.report)
    validate_report(report)
    assert [d["database"] for d in report["databases"]] == ["demo1", "demo2"]
    assert [d["verdict"] for d in report["databases"]] == ["passed", "passed"], report["databases"][0]["reasons"]
    for db in report["databases"]:
        assert db["chain"]["status"] == "complete"
        assert [b["type"] for b in db["chain"]["backups"]] == ["full", "diff", "incr"]
        assert phase(db, "provision")["seconds"] > 0
        assert phase(db, "zeroing")["status"] == "absent" and phase(db, "zeroing")["seconds"] is None
        transfer = phase(db, "transfer")
        assert transfer["seconds"] > 0 and transfer["bytes"] > 50_000_000
        redo = phase(db, "redo")
        assert redo["status"] == "measured" and redo["bytes"] > 0
        assert phase(db, "recovery_end")["seconds"] is not None
        assert {c["name"]: c["status"] for c in db["checks"]} == {
            "pg_amcheck": "passed", "pg_checksums": "passed", "pgbackrest_verify": "passed",
            "data_baseline": "passed", "data_freshness": "passed"}
        checks = {c["name"]: c for c in db["checks"]}
        # Great Expectations read every table of the restored cluster over the socket: pgbench's
        # tables at the demo's scale (7 x 100,000 accounts per scale unit), and the events table.
        tables = checks["data_baseline"]["details"]["tables"]
        assert tables["postgres.public.pgbench_accounts"] == {"rows": 700_000,
                                                               "columns": ["aid", "bid", "abalance", "filler"]}
        assert tables["postgres.public.pgbench_branches"]["rows"] == 7
        assert checks["data_baseline"]["kind"] == "data"
        # events.at (timestamptz default clock_timestamp()) is found by itself; its newest row is the
        # last transaction the restore replayed, to the second.
        freshness = checks["data_freshness"]
        assert freshness["summary"].startswith("newest row in postgres.public.events.at: ")
        assert "before the restore point" in freshness["summary"]
        assert 0 <= freshness["details"]["data_rpo_seconds"] < 1
        assert phase(db, "data_checks")["status"] == "measured" and phase(db, "data_checks")["seconds"] > 0
        assert "data-docs/index.html" in db["evidence"]
        assert db["recovery_seconds"] > 0
        # The newest data made it: the last marker row was written just before the final WAL switch.
        last = parse_pg_timestamp(demo.manifest["stanzas"][db["database"]]["markers"]["last"])
        assert datetime.fromisoformat(db["restore_point"]["achieved"]) >= last
        for name in ("pgbackrest-restore.log", "server.log", "pg_amcheck.out", "pg_checksums.out"):
            assert (result.run_dir / "evidence" / db["evidence"][name]).stat().st_size > 0
    assert result.html_path.read_text().count('class="badge passed">passed') >= 3
    assert leftovers(result.run.run_id) == []


def test_point_in_time_between_two_backups_reaches_exactly_that_point(demo, settings):
    markers = demo.manifest["stanzas"]["demo1"]["markers"]
    before, after = parse_pg_timestamp(markers["pitr-before"]), parse_pg_timestamp(markers["pitr-after"])
    at = before + (after - before) / 2
    settings.checks.sql = [
        SqlCheck(name="row-before-target-exists", query="select count(*) from events where note = 'pitr-before'",
                 expect="1"),
        SqlCheck(name="row-after-target-absent", query="select count(*) from events where note = 'pitr-after'",
                 expect="0"),
    ]
    result = run_verification(settings, demo.repository, at=at, databases=["demo1"])
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "passed", db["reasons"]
    assert db["restore_point"]["target"] == at.isoformat()
    achieved = datetime.fromisoformat(db["restore_point"]["achieved"])
    assert before <= achieved <= at
    assert db["chain"]["backups"][-1]["type"] == "diff"  # the incr finished after the target
    checks = {c["name"]: (c["status"], c["details"]["value"]) for c in db["checks"] if c["name"].startswith("sql:")}
    assert checks == {"sql:row-before-target-exists": ("passed", "1"), "sql:row-after-target-absent": ("passed", "0")}


def test_a_flipped_byte_in_a_backed_up_file_fails_and_names_the_file(repo_copy, settings):
    stanza = "demo1"
    incr = sorted((repo_copy / "backup" / stanza).glob("*I"))[-1]
    victim = max((incr / "pg_data" / "base").rglob("*.gz"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    relative = victim.relative_to(repo_copy).as_posix()

    result = run_verification(settings, repo_copy, databases=[stanza])
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "failed"
    assert any(relative in reason for reason in db["reasons"]), db["reasons"]
    assert any(reason.startswith("pgbackrest restore of backup") for reason in db["reasons"])
    assert phase(db, "transfer")["status"] == "not_reached"
    assert result.run.verdict == "failed"
    assert leftovers(result.run.run_id) == []


def test_a_missing_wal_segment_breaks_the_chain_and_nothing_passes(repo_copy, settings, demo):
    _, _, planned = plan_source(settings, repo_copy)
    demo1 = next(p for p in planned.plans if p.database == "demo1")
    segment = demo1.target_backup.start_wal
    (victim,) = (repo_copy / "archive" / "demo1").rglob(f"{segment}-*")
    victim.unlink()

    result = run_verification(settings, repo_copy, databases=["demo1"])
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "failed"
    assert db["chain"]["status"] == "broken"
    assert db["chain"]["problems"][0]["files"] == [segment]
    assert any(segment in reason for reason in db["reasons"])
    assert result.run.target_kind is None  # nothing was provisioned for a chain that cannot restore
    assert leftovers(result.run.run_id) == []


def test_report_and_store_agree(demo, settings):
    result = run_verification(settings, demo.repository, databases=["demo2"])
    from verification.results import ResultStore

    store = ResultStore(settings.results_database_url)
    (row,) = store.recent_runs()
    assert row.run_id == result.run.run_id and row.verdict == "passed"
    ((run_id, _, entry),) = store.report_entries(database="demo2")
    report_db = json.loads(result.json_path.read_text())["databases"][0]
    assert run_id == result.run.run_id and entry.model_dump(mode="json") == report_db
    assert "demo2" in store.last_passed()
    store.close()


@pytest.fixture
def shared_repo(demo):  # type: ignore[no-untyped-def]
    """A copy of the demo repository where the postgres OS user can reach it (pytest's tmp is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="restoreproof-test-repo-"))
    folder.chmod(0o755)
    shutil.copytree(demo.repository, folder / "backups")
    yield folder / "backups"
    shutil.rmtree(folder)


def test_local_process_target_does_the_same_job(shared_repo, settings):
    if not Path(settings.postgres.bin_dir, "pg_ctl").exists():
        pytest.skip(f"PostgreSQL 15 is not installed on the host ({settings.postgres.bin_dir})")
    result = run_verification(settings, shared_repo, target_kind="local", databases=["demo1"])
    (db,) = report_data(result.report)["databases"]
    assert report_data(result.report)["target_kind"] == "local"
    assert db["verdict"] == "passed", db["reasons"]
    assert phase(db, "redo")["bytes"] > 0
    folder = Path(db["target"]["folder"])
    assert not folder.exists(), "the local target's folder was not removed"
    assert list((settings.state_dir / "leftovers").glob("*.json")) == []
    assert timedelta(seconds=db["recovery_seconds"]) < timedelta(minutes=5)


def test_local_target_that_cannot_read_the_repository_is_a_clear_error(demo, settings):
    if os.geteuid() != 0 or not Path(settings.postgres.bin_dir, "pg_ctl").exists():
        pytest.skip("needs root (commands then run as the postgres OS user) and PostgreSQL 15 on the host")
    # pytest's temporary folders are private to root: the postgres user cannot reach the demo there.
    result = run_verification(settings, demo.repository, target_kind="local", databases=["demo1"])
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "error"
    assert db["reasons"] == [f"target: local target: the OS user 'postgres' cannot read the repository "
                             f"{demo.repository} (every folder above it must be searchable, its files readable)"]


def test_a_target_that_cannot_be_created_is_an_error_and_leaves_nothing(demo, settings):
    # Docker refuses a memory limit under 6 MB when the container is created, after the volume exists.
    settings.docker.memory = "4m"
    result = run_verification(settings, demo.repository, databases=["demo1"])
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "error"
    assert db["reasons"][0].startswith("target: cannot start a container from restoreproof/postgres:15")
    assert "memory" in db["reasons"][0].lower()
    assert leftovers(result.run.run_id) == []


def test_the_teardown_step_removes_a_databases_leftovers_only(settings):
    from verification import orchestration
    from verification.targets.docker import docker_client
    from verification.targets.labels import labels

    client = docker_client()
    try:
        made = {db: client.containers.create("restoreproof/postgres:15", name=f"restoreproof-teardown-test-{db}",
                                             labels=labels("teardown-test", "target", db)) for db in ("a", "b")}
        report = orchestration.remove(settings, "teardown-test", "a")
        assert report.containers == ["restoreproof-teardown-test-a"] and report.errors == []
        assert leftovers("teardown-test") == ["restoreproof-teardown-test-b"]
    finally:
        for container in made.values():
            with contextlib.suppress(Exception):
                container.remove(force=True)
        client.close()


def test_checks_disabled_by_configuration_show_as_skipped_with_their_settings(demo, settings):
    settings.postgres.repository_verify = False
    settings.postgres.checksums_check = False
    settings.evidence.hash_backups = False
    result = run_verification(settings, demo.repository, databases=["demo2"])
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "passed", db["reasons"]  # pg_amcheck still proves the data
    skipped = {c["name"]: c["summary"] for c in db["checks"] if c["status"] == "skipped"}
    assert skipped == {
        "pgbackrest_verify": "not run: disabled by the setting postgres.repository_verify: false",
        "pg_checksums": "not run: disabled by the setting postgres.checksums_check: false",
        "backup_hashes": "not run: disabled by the setting evidence.hash_backups: false"}
    # A "passed" with checks turned off says so in its reasons.
    for name, summary in skipped.items():
        assert f"{name} skipped: {summary}" in db["reasons"]
    assert "backup-files.sha256" not in db["evidence"]
