"""The nightly DAG on Airflow's CeleryExecutor, distributed for real (issue 14, part 1).

A Redis broker (Debian's redis-server), a PostgreSQL server holding Airflow's metadata database and
restoreproof's results store, `airflow api-server`, `scheduler`, `dag-processor`, and two
`airflow celery worker` processes, each with its own host name and state folder, sharing the report
folder and the store (verification/demo/airflow_stack.py). The DAG verifies a demo repository of four
stanzas with a pool of two target slots; everything the test starts is stopped and removed, also
when it fails.
"""

from __future__ import annotations

import json
import secrets
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.integration.conftest import leftovers
from tests.integration.containers import ContainerEvents
from verification.demo.airflow_stack import AirflowStack
from verification.orchestration import scheduler_run_id
from verification.targets.labels import DATABASE_LABEL, ROLE_LABEL
from verification.targets.reaper import reap_docker

pytestmark = pytest.mark.integration

STANZAS = 4


def test_two_celery_workers_share_the_nightly_run(tmp_path):
    from verification.demo.source import make_demo

    clock = time.monotonic()
    # The demo's four clusters are made while the stack starts (each takes about a minute).
    with ThreadPoolExecutor(max_workers=1) as pool:
        making = pool.submit(make_demo, tmp_path / "demo", scale=1, clusters=STANZAS)
        stack = AirflowStack(workers=2, pool_slots=2)
        try:
            stack.start()  # when it fails, the pool still waits for the demo, which cleans up after itself
            demo4 = making.result()
        except BaseException:
            stack.stop(failed=True)
            raise
    assert leftovers(demo4.run_id) == [], "making the demo left containers behind"
    airflow_run = f"celery-{secrets.token_hex(4)}"
    run_id = scheduler_run_id("restore_verification", airflow_run)
    try:
        with stack:
            up = time.monotonic() - clock
            recorder = ContainerEvents(run_id)
            try:
                stack.trigger({"source": str(demo4.repository), "target": "docker"}, run_id=airflow_run)
                state = stack.wait_for_run(airflow_run, timeout=420)
            finally:
                events = recorder.stop()
            tis = stack.task_instances(airflow_run)
            run_seconds = stack.run_seconds(airflow_run)
            logs = stack.logs() if state != "success" else ""
            workers = stack.worker_names
            state_dirs = {name: stack.worker_state_dir(name) for name in workers}
            report_dir, results_url = stack.report_dir, stack.results_url
            leftover_records = {name: sorted(p.name for p in (folder / "leftovers").glob("*.json"))
                                for name, folder in state_dirs.items()}
            report = json.loads((report_dir / run_id / "report.json").read_text()) if state == "success" else None
            store = _store_rows(results_url, run_id)
        # After the stack stopped (workers first): what the run itself left behind.
        remaining = leftovers(run_id)
    finally:
        # A timeout or a failure stops the workers mid-task, and their targets would stay on the shared
        # engine: remove this run's, named by its run id (never every run's).
        reaped = reap_docker(run_id)
        if reaped.errors:
            print(f"removing run {run_id}'s containers and volumes: {'; '.join(reaped.errors)}")
    print(f"demo made and stack up in {up:.0f} s, run {run_seconds:.1f} s, everything in {time.monotonic() - clock:.0f} s")
    assert state == "success", {(t.task_id, t.name): t.state for t in tis} | {"logs": logs}

    # Both workers ran verifications, each under its own host name; no task ran anywhere else.
    by_task: dict[str, dict[str, object]] = {}
    for ti in tis:
        by_task.setdefault(ti.task_id, {})[ti.name] = ti
        assert ti.state == "success", (ti.task_id, ti.name, ti.state)
        assert ti.hostname in workers, (ti.task_id, ti.name, ti.hostname)
    verified = by_task["database.verify"]
    assert sorted(verified) == demo4.stanzas
    assert {ti.hostname for ti in verified.values()} == set(workers)  # type: ignore[attr-defined]

    # Each database's target was made and removed on the one Docker engine both workers use, by the
    # time its teardown (run on a worker) had finished; nothing of the run is left.
    for database in demo4.stanzas:
        mine = [e for e in events if e["Actor"]["Attributes"].get(DATABASE_LABEL) == database
                and e["Actor"]["Attributes"].get(ROLE_LABEL) == "target"]
        created = [e for e in mine if e["Action"] == "create"]
        destroyed = [e for e in mine if e["Action"] == "destroy"]
        assert created and len(destroyed) == len(created), (database, [e["Action"] for e in mine])
        teardown = by_task["database.remove_target"][database]
        assert teardown.end_date is not None  # type: ignore[attr-defined]
        assert max(e["time"] for e in destroyed) <= teardown.end_date.timestamp() + 1  # type: ignore[attr-defined]
    assert remaining == []
    # Each worker kept its own state folder, and no leftovers record is in either.
    assert leftover_records == {name: [] for name in workers}

    # Every database is in the report, passed.
    assert report is not None and report["verdict"] == "passed"
    assert sorted(d["database"] for d in report["databases"]) == demo4.stanzas
    assert all(d["verdict"] == "passed" and d["reasons"] for d in report["databases"])

    # The store agrees: the run finished, one row per database (and one plan, one report each).
    assert store["run"] is not None and store["run"]["finished_at"] is not None
    assert store["run"]["verdict"] == "passed"
    assert sorted(store["databases"]) == demo4.stanzas
    assert sorted(store["plans"]) == demo4.stanzas and sorted(store["reports"]) == demo4.stanzas


def _store_rows(url: str, run_id: str) -> dict[str, object]:
    """What the results store holds for the run, read with SQL (not through the store's own API)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            run = conn.execute(sa.text("SELECT id, verdict, finished_at FROM runs WHERE run_id = :r"),
                               {"r": run_id}).mappings().first()
            if run is None:
                return {"run": None, "databases": [], "plans": [], "reports": []}

            def names(table: str) -> list[str]:
                return [row[0] for row in conn.execute(
                    sa.text(f"SELECT database FROM {table} WHERE run_pk = :pk"), {"pk": run["id"]})]

            return {"run": dict(run), "databases": names("databases"), "plans": names("run_plans"),
                    "reports": names("database_reports")}
    finally:
        engine.dispose()
