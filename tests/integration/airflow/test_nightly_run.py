"""`dag.test()` runs the nightly DAG end to end on real PostgreSQL backups in real containers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.airflow.conftest import load_dag
from tests.integration.conftest import leftovers

pytestmark = pytest.mark.integration


def run_nightly(source: Path, **conf):  # type: ignore[no-untyped-def]
    """Run the DAG once; return the run, each task instance's state by (task, map name), and logs."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    dag = load_dag("restore_verification")
    dag_run = dag.test(run_conf={"source": str(source), "target": "docker", **conf})
    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == dag.dag_id,
                                                 TaskInstance.run_id == dag_run.run_id).all()
        states = {(ti.task_id, ti.rendered_map_index or str(ti.map_index)): str(ti.state) for ti in tis}
    return dag_run, states


def latest_report(reports: Path) -> dict:  # type: ignore[type-arg]
    (path,) = reports.glob("*/report.json")
    return json.loads(path.read_text())


def test_nightly_run_verifies_every_database(demo, airflow_env):
    dag_run, states = run_nightly(demo.repository)
    assert str(dag_run.state) == "success", states
    for db in ("demo1", "demo2"):
        for task in ("reserve_target", "verify", "remove_target"):
            assert states[(f"database.{task}", db)] == "success"
    report = latest_report(airflow_env / "reports")
    assert report["verdict"] == "passed"
    assert sorted(d["database"] for d in report["databases"]) == ["demo1", "demo2"]
    assert all(d["verdict"] == "passed" and d["reasons"] for d in report["databases"])
    assert (airflow_env / "reports" / report["run_id"] / "report.html").exists()
    assert leftovers(report["run_id"]) == []


def test_a_broken_chain_fails_its_database_only_and_leaves_nothing(repo_copy, airflow_env):
    from verification.config import load_settings
    from verification.pipeline import plan_source

    _, _, planned = plan_source(load_settings(), repo_copy)
    demo1 = next(p for p in planned.plans if p.database == "demo1")
    segment = demo1.target_backup.start_wal
    (victim,) = (repo_copy / "archive" / "demo1").rglob(f"{segment}-*")
    victim.unlink()

    dag_run, states = run_nightly(repo_copy)
    assert str(dag_run.state) == "failed"
    assert states[("database.verify", "demo1")] == "failed"
    assert states[("database.verify", "demo2")] == "success"
    assert states[("database.remove_target", "demo1")] == "success" and states[("database.remove_target", "demo2")] == "success"
    assert states[("publish", "-1")] == "success" and states[("verdict", "-1")] == "failed"
    report = latest_report(airflow_env / "reports")
    by_name = {d["database"]: d for d in report["databases"]}
    assert by_name["demo1"]["verdict"] == "failed"
    assert any(segment in reason for reason in by_name["demo1"]["reasons"])
    assert by_name["demo2"]["verdict"] == "passed"
    assert leftovers(report["run_id"]) == []


def test_teardown_runs_after_a_restore_task_is_made_to_fail(demo, airflow_env, monkeypatch):
    # A setting the restored server rejects: the restore task fails after the target exists.
    monkeypatch.setenv("RESTOREPROOF_POSTGRES__SERVER_OPTIONS", '{"shared_buffers": "not-a-size"}')
    dag_run, states = run_nightly(demo.repository, include=["demo2"])
    assert str(dag_run.state) == "failed"
    assert states[("database.verify", "demo2")] == "failed"
    assert states[("database.remove_target", "demo2")] == "success"
    report = latest_report(airflow_env / "reports")
    (db,) = report["databases"]
    assert db["verdict"] == "error"  # our setting, not the backup, stopped it
    assert any("refused its configuration" in reason and "shared_buffers" in reason for reason in db["reasons"])
    assert leftovers(report["run_id"]) == []


def test_every_task_of_the_run_loads_the_config_file_it_is_given(demo, airflow_env):
    import yaml

    config = airflow_env / "restoreproof.yaml"
    config.write_text(yaml.safe_dump({"checks": {"sql": [
        {"name": "catalog-present", "query": "select count(*) > 0 from pg_class", "expect": "t"}]}}))
    dag_run, states = run_nightly(demo.repository, include=["demo1"], config=str(config))
    assert str(dag_run.state) == "success", states
    (db,) = latest_report(airflow_env / "reports")["databases"]
    checks = {c["name"]: c["status"] for c in db["checks"]}
    assert checks["sql:catalog-present"] == "passed", checks


def test_a_config_file_that_is_not_there_fails_the_run_naming_it(demo, airflow_env):
    dag_run, states = run_nightly(demo.repository, include=["demo1"], config=str(airflow_env / "missing.yaml"))
    assert str(dag_run.state) == "failed"
    assert states[("discover", "-1")] == "failed"
