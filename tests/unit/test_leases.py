"""The lease a working process holds (its heartbeat thread against a real SQLite store), and the sweep's
judgements of what runs left in the state folder (no Docker here: tests/integration/test_reaper.py)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from tests.unit.factories import dead_holder, leftover_record
from verification.config import load_settings
from verification.leases import LeaseKeeper, ended_task_leases, sweep
from verification.results import ResultStore
from verification.results.store import RunLeaseRow
from verification.targets.lease import Holder, this_process
from verification.targets.polling import poll_until


def settings_for(tmp_path: Any, **extra: Any) -> Any:
    return load_settings(None, state_dir=tmp_path, results_url=f"sqlite:///{tmp_path / 'r.db'}", **extra)


def lease_rows(settings: Any, run_id: str) -> list[RunLeaseRow]:
    store = ResultStore(settings.results_database_url)
    try:
        return store.leases([run_id])
    finally:
        store.close()


def test_a_lease_is_renewed_while_its_holder_works_says_what_it_does_and_is_released(tmp_path):
    settings = settings_for(tmp_path, lease={"seconds": 10, "heartbeat_seconds": 0.2},
                            s3={"access_key_id": "AKIAEXAMPLE", "secret_access_key": "s3cret-pass"})
    said: list[str] = []
    with LeaseKeeper(settings, "r1", "run", progress=said.append) as lease:
        (taken,) = lease_rows(settings, "r1")
        assert (taken.host, taken.pid, taken.process) == (this_process().host, os.getpid(), this_process().process)
        track = lease.tracking(said.append)
        lease.doing(None, database="demo2")
        track("demo2: restoring with password s3cret-pass")
        assert said == ["demo2: restoring with password s3cret-pass"]  # passed on as it came
        # Written by the heartbeat thread (secrets masked), and renewed: the store's clock ticks in seconds.
        assert poll_until(lambda: (lease_rows(settings, "r1")[0].phase or "").startswith("demo2: restoring"), 5, 0.05)
        (written,) = lease_rows(settings, "r1")
        assert written.database == "demo2" and "s3cret-pass" not in (written.phase or "")
        assert poll_until(lambda: lease_rows(settings, "r1")[0].heartbeat_at > taken.heartbeat_at, 5, 0.1)
        assert lease_rows(settings, "r1")[0].released_at is None
    (ended,) = lease_rows(settings, "r1")
    assert ended.released_at is not None and ended.ended == "released"
    assert said == ["demo2: restoring with password s3cret-pass"]


def test_a_lease_ended_by_an_exception_says_which(tmp_path):
    settings = settings_for(tmp_path)
    with pytest.raises(RuntimeError), LeaseKeeper(settings, "r1", "task", database="demo1"):
        raise RuntimeError("boom")
    (ended,) = lease_rows(settings, "r1")
    assert (ended.scope, ended.database, ended.ended) == ("task", "demo1", "ended by RuntimeError: boom")


def test_a_heartbeat_that_cannot_be_written_is_said_once_and_the_work_goes_on(tmp_path):
    settings = settings_for(tmp_path, lease={"seconds": 10, "heartbeat_seconds": 0.1})
    said: list[str] = []
    with LeaseKeeper(settings, "r1", "run", progress=said.append) as lease:
        store = ResultStore(settings.results_database_url)
        with store.engine.begin() as connection:  # the lease's row gone: every renewal fails
            connection.execute(RunLeaseRow.__table__.delete())
        store.close()
        lease.doing("still working")
        assert poll_until(lambda: len(said) == 1, 5, 0.05)
        time.sleep(0.5)
    assert len(said) == 1, said  # the warning, once, however many heartbeats failed
    assert said[0].startswith("warning: the lease on run r1 could not be renewed (KeyError: ")
    assert "other hosts may take this worker for dead" in said[0]


def test_with_the_store_unreadable_everything_is_kept_even_what_a_dead_holder_left(tmp_path):
    settings = load_settings(None, state_dir=tmp_path, results_url="sqlite:////proc/no-such-folder/r.db")
    left = leftover_record(tmp_path, "r1", dead_holder())
    found = sweep(settings, use_docker=False)
    assert left.exists()
    (decision,) = found.reaped.decisions
    assert not decision.judgement.dead
    assert decision.judgement.reason.startswith("the results store cannot be read (sqlite:////proc/no-such-folder")
    assert found.error is not None


def test_a_record_from_before_leases_is_kept_unless_its_run_is_known_dead(tmp_path):
    settings = settings_for(tmp_path)
    old = leftover_record(tmp_path, "r-old", None)
    (decision,) = sweep(settings, use_docker=False).reaped.decisions
    assert old.exists() and not decision.judgement.dead and decision.holder is None
    assert "is not in this results store" in decision.judgement.reason


def test_the_callers_own_run_is_never_judged(tmp_path):
    settings = settings_for(tmp_path)
    own = leftover_record(tmp_path, "mine", dead_holder())
    assert sweep(settings, keep_runs=frozenset({"mine"}), use_docker=False).reaped.decisions == []
    assert own.exists()


def test_a_schedulers_teardown_names_the_task_lease_left_open(tmp_path):
    settings = settings_for(tmp_path)
    store = ResultStore(settings.results_database_url)
    elsewhere = Holder("worker-b", 4242, "another-boot/4026531836/777")
    try:
        store.take_lease("r1", host=elsewhere.host, pid=elsewhere.pid, process=elsewhere.process, scope="task",
                         lease_seconds=180, database="demo2")
        done = store.take_lease("r1", host="worker-c", pid=1, process="b/n/1", scope="task", lease_seconds=180,
                                database="demo2")
        store.release_lease(done, "released")
        me = this_process()
        store.take_lease("r1", host=me.host, pid=me.pid, process=me.process, scope="task", lease_seconds=180,
                         database="demo2")
    finally:
        store.close()
    (killed,) = ended_task_leases(settings, "r1", "demo2")
    # Its heartbeat is fresh, but the scheduler says its task is over: it died without releasing it.
    assert killed.lease.holder == elsewhere
    assert killed.reason.startswith("its task is over (the scheduler ended it) but worker worker-b pid 4242 "
                                    "never released its lease")
    assert ended_task_leases(settings, "r1", "demo1") == []
