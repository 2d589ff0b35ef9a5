"""A Celery worker killed with SIGKILL in the middle of a restore, on the real CeleryExecutor stack.

The nightly DAG verifies a demo repository of two real pgBackRest stanzas on two `airflow celery
worker` processes (verification/demo/airflow_stack.py: Redis, PostgreSQL, api-server, scheduler,
dag-processor). While pgBackRest restores demo2 in its target, the worker running demo2's `verify`
is SIGKILLed with everything it started (pool, supervisor, task runner): nothing of it can clean
up or tell Airflow. Airflow must notice the task's missing heartbeat (`[scheduler]
task_instance_heartbeat_timeout`, lowered here from 300 s), fail it, and run its `remove_target`
teardown on the surviving worker, which removes the target and records demo2 as "error" with why;
demo1 passes; nothing is left; demo2 goes first next time.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import leftovers
from tests.integration.containers import ContainerEvents, restoring_target
from verification.config import load_settings
from verification.demo.airflow_stack import DAG_ID, FINISHED, AirflowStack
from verification.model import identity_of
from verification.orchestration import scheduler_run_id, sweep_own_folder
from verification.results import ResultStore
from verification.results.store import in_rotation
from verification.targets.labels import DATABASE_LABEL, ROLE_LABEL
from verification.targets.lease import utc_text
from verification.targets.reaper import reap_docker

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# Airflow fails a running task whose heartbeat is older than this (default 300 s); it looks every
# DETECTION s. A live task's supervisor beats every 5 s ([workers] min_heartbeat_interval), so a live
# task would have to miss four beats in a row to be taken for dead.
HEARTBEAT_TIMEOUT = 30  # a live task would miss six 5 s beats in a row: safe on a loaded machine
DETECTION = 5
KILLED, SURVIVING = "demo2", "demo1"


def test_a_celery_worker_killed_mid_restore_has_its_target_removed_by_the_teardown_on_the_other(tmp_path):
    from verification.demo.source import make_demo

    clock = time.monotonic()
    # The demo's clusters are made while the stack starts (the stack in this thread: its processes
    # die with the thread that started them).
    with ThreadPoolExecutor(max_workers=1) as pool:
        making = pool.submit(make_demo, tmp_path / "demo", scale=1, clusters=2)
        stack = AirflowStack(workers=2, pool_slots=2, extra_env={
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": str(DETECTION)})
        try:
            stack.start()
            demo = making.result()
        except BaseException:
            stack.stop(failed=True)
            raise
    assert leftovers(demo.run_id) == [], "making the demo left containers behind"
    airflow_run = f"killed-{secrets.token_hex(4)}"
    run_id = scheduler_run_id(DAG_ID, airflow_run)
    try:
        with stack:
            up = time.monotonic() - clock
            recorder = ContainerEvents(run_id)
            try:
                stack.trigger({"source": str(demo.repository), "target": "docker"}, run_id=airflow_run)
                found = restoring_target(KILLED, lambda: {run_id}, _run_not_over(stack, airflow_run), timeout=300)
                assert found is not None, f"{KILLED} was never restored:\n{stack.logs()}"
                _, container = found
                # A running task's rendered map index is not recorded yet: its index in discover's list is.
                discovered = _xcom(stack, airflow_run, "discover", -1)
                killed_index, surviving_index = discovered.index(KILLED), discovered.index(SURVIVING)
                (verifying,) = [ti for ti in stack.task_instances(airflow_run)
                                if ti.task_id == "database.verify" and ti.map_index == killed_index]
                killed_worker = verifying.hostname
                (surviving_worker,) = set(stack.worker_names) - {killed_worker}
                killed_pids = stack.kill_worker(killed_worker)
                killed_at = time.time()
                state = stack.wait_for_run(airflow_run, timeout=300)
            finally:
                events = recorder.stop()
            tis = {(ti.task_id, ti.map_index): ti for ti in stack.task_instances(airflow_run)}
            logs = stack.logs() if state != "failed" else ""
            airflow_log = stack.query("SELECT event, extra FROM log WHERE dag_id = %s AND run_id = %s AND "
                                      "task_id = 'database.verify' AND map_index = %s",
                                      DAG_ID, airflow_run, killed_index)
            removed = _xcom(stack, airflow_run, "database.remove_target", killed_index)
            report = json.loads((stack.report_dir / run_id / "report.json").read_text())
            store = ResultStore(stack.results_url)
            try:
                run, entries = store.run_with_reports(run_id)
                leases = store.leases([run_id])
                # The rotation is by database identity (source, stanza, system id), as the run planned them.
                identities = {p.database: identity_of(run.source, p) for p in store.plans(run_id)}
                next_order = in_rotation([SURVIVING, KILLED], store.rotation(list(identities.values())),
                                         key=lambda name: identities[name].key)
            finally:
                store.close()
            # What the killed task left on its worker's own disk (its exchange folder, under that worker's
            # TMPDIR) no other worker sees: that worker's next verify task sweeps its state folder, as here.
            killed_state = stack.worker_state_dir(killed_worker)
            records = [json.loads(p.read_text()) for p in (killed_state / "leftovers").glob("*.json")]
            swept: list[str] = []
            sweep_own_folder(load_settings(state_dir=killed_state, results_url=stack.results_url), swept.append)
            records_after = sorted(p.name for p in (killed_state / "leftovers").glob("*.json"))
        # After the stack stopped (workers first): what the run itself left behind.
        remaining = leftovers(run_id)
    finally:
        # A failure stops the workers mid-task, and their targets would stay on the shared engine:
        # remove this run's, named by its run id (never every run's).
        reaped = reap_docker(run_id)
        if reaped.errors:
            print(f"removing run {run_id}'s containers and volumes: {'; '.join(reaped.errors)}")
    teardown = tis[("database.remove_target", killed_index)]
    assert teardown.end_date is not None
    destroyed = [e for e in events if e["Action"] == "destroy" and e["Actor"]["Attributes"].get(ROLE_LABEL) == "target"
                 and e["Actor"]["Attributes"].get(DATABASE_LABEL) == KILLED]
    print(f"demo made and stack up in {up:.0f} s; {KILLED}'s target removed {destroyed[-1]['time'] - killed_at:.0f} s "
          f"after the kill (teardown {teardown.start_date} -> {teardown.end_date}); everything in "
          f"{time.monotonic() - clock:.0f} s" if destroyed else "no destroy event")

    # The run ends failed (a database in error), every task where it should have run.
    assert state == "failed", {k: v.state for k, v in tis.items()} | {"logs": logs}
    assert tis[("database.verify", killed_index)].state == "failed"
    assert tis[("database.verify", killed_index)].hostname == killed_worker
    # Airflow noticed the dead task by its heartbeat, not by anything the worker said.
    assert [event for event, _ in airflow_log].count("heartbeat timeout") == 1, airflow_log
    assert f"within time limit ({HEARTBEAT_TIMEOUT} seconds)" in dict(airflow_log)["heartbeat timeout"]
    # The teardown ran on the surviving worker, and it is what removed the killed task's target.
    assert teardown.state == "success" and teardown.hostname == surviving_worker
    assert container in removed and f"{container}-data" in removed, removed
    assert len(destroyed) == 1, [(e["Action"], e["Actor"]["Attributes"].get("name")) for e in events]
    assert destroyed[0]["Actor"]["Attributes"]["name"] == container
    assert killed_at < destroyed[0]["time"] <= teardown.end_date.timestamp() + 1
    assert teardown.start_date is not None and destroyed[0]["time"] >= teardown.start_date.timestamp() - 1
    for task in ("database.reserve_target", "database.verify", "database.remove_target"):
        assert tis[(task, surviving_index)].state == "success", task
    assert tis[("publish", -1)].state == "success" and tis[("verdict", -1)].state == "failed"
    # The report was published once the teardown was over, not as soon as the verifications were.
    publish_start = tis[("publish", -1)].start_date
    assert publish_start is not None and publish_start >= teardown.end_date

    # The store: demo1 passed, demo2 "error" naming the killed worker and what it was doing; the
    # verify task's lease was held by a process of the killed worker, and ended as killed.
    (lease,) = [row for row in leases if row.database == KILLED]
    assert lease.pid in killed_pids
    assert lease.released_at is not None and (lease.ended or "").startswith("killed: ")
    assert lease.released_at <= teardown.end_date  # ended by the teardown (publish found it ended)
    verdicts = {e.database: (str(e.verdict), e.reasons) for e in entries}
    assert verdicts[SURVIVING][0] == "passed"
    verdict, (reason,) = verdicts[KILLED]
    assert verdict == "error"
    assert reason.startswith(f"restoreproof was killed while verifying it: worker {lease.host} pid {lease.pid} is "
                             f"gone (no process {lease.pid} with its start time on this host)"), reason
    assert f"while: {KILLED}: restoring" in reason and reason.endswith("it goes first in the next run"), reason
    # The report says the same, published by the DAG once the teardown had recorded it.
    assert report["verdict"] == "error"
    assert sorted((d["database"], d["verdict"], tuple(d["reasons"])) for d in report["databases"]) == sorted(
        [(SURVIVING, "passed", tuple(verdicts[SURVIVING][1])), (KILLED, "error", (reason,))])
    # Next night, the killed database first.
    assert next_order == [KILLED, SURVIVING]
    # Nothing of the run is left on the engine; the killed worker's exchange folder, left on its own
    # disk, is removed by the sweep of its next task there (its run is over).
    assert remaining == []
    (record,) = records
    assert (record["run_id"], record["database"], record["kind"], record["pid"]) == (run_id, KILLED, "exchange",
                                                                                    lease.pid)
    assert records_after == [] and not Path(record["folder"]).exists()
    assert [line for line in swept if record["folder"] in line] == [
        f"run {run_id}: removed {record['folder']} from this worker (run {run_id} finished at "
        f"{utc_text(run.finished_at)} (error), yet this is still labelled with it)"], swept


def _run_not_over(stack: AirflowStack, airflow_run: str) -> Callable[[], None]:
    """A check for restoring_target: fails when the run ended before the restore was seen (looked up
    every 2 s, not at each of the watcher's rounds)."""
    last = [0.0]

    def check() -> None:
        if time.monotonic() - last[0] >= 2:
            last[0] = time.monotonic()
            state = stack.run_state(airflow_run)
            assert state not in FINISHED, f"run {airflow_run} {state} before {KILLED} was restored:\n{stack.logs()}"

    return check


def _xcom(stack: AirflowStack, airflow_run: str, task_id: str, map_index: int) -> Any:
    """What a task returned, as Airflow keeps it (JSON)."""
    rows = stack.query("SELECT value FROM xcom WHERE dag_id = %s AND run_id = %s AND task_id = %s AND map_index = %s "
                       "AND key = 'return_value'", DAG_ID, airflow_run, task_id, map_index)
    if not rows:
        return None
    value = rows[0][0]
    return json.loads(value) if isinstance(value, str) else value
