"""The DAGs in real Airflow: they import, their structure is what the product promises, and the
nightly DAG runs end to end on real PostgreSQL backups in real containers."""

from __future__ import annotations

import pytest

from tests.integration.airflow.conftest import ROOT, load_dag

pytestmark = pytest.mark.integration


def test_every_dag_imports_without_errors():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    assert {"restore_verification", "rto_drift"} <= set(bag.dag_ids)


def test_nightly_dag_structure():
    dag = load_dag("restore_verification")
    assert dag.schedule == "0 1 * * *" or str(dag.timetable.summary) == "0 1 * * *"
    assert dag.catchup is False
    assert set(dag.params) >= {"source", "engine", "include", "exclude", "point", "seed", "at", "target", "pages",
                               "time_budget_minutes"}
    tasks = {t.task_id: t for t in dag.tasks}
    # One planning task: every other task works from the plans it recorded.
    assert set(tasks) == {"discover", "database.reserve_target", "database.verify",
                          "database.remove_target", "publish", "verdict"}
    assert tasks["database.reserve_target"].upstream_task_ids == {"discover"}
    reserve, verify, remove = (tasks[f"database.{name}"] for name in ("reserve_target", "verify", "remove_target"))
    assert reserve.is_setup and remove.is_teardown and remove.on_failure_fail_dagrun
    assert verify.pool == "restoreproof_targets"
    assert verify.retries == 0 and reserve.retries == 2 and remove.retries == 3
    assert verify.map_index_template == "{{ database }}"
    assert tasks["publish"].trigger_rule == "all_done"
    assert [o.uri for o in tasks["publish"].outlets] == ["restoreproof://reports/restore_verification"]
    assert verify.upstream_task_ids == {"database.reserve_target"}
    assert remove.upstream_task_ids == {"database.reserve_target", "database.verify"}
    # The report is published once every teardown is over (one may record its killed task), never
    # as soon as the verifications are.
    assert tasks["publish"].upstream_task_ids == {"database.remove_target"}
    assert type(dag.task_group_dict["database"]).__name__ == "MappedTaskGroup"


def test_drift_dag_is_triggered_by_the_report_asset():
    dag = load_dag("rto_drift")
    assert [a.uri for a in dag.timetable.asset_condition.objects] == ["restoreproof://reports/restore_verification"]
    assert {t.task_id for t in dag.tasks} == {"trends", "alert"}
