"""The liveness rules of leases (pure: fake clocks, processes given as alive, gone or unknowable), and
the process identity they rest on, read from this host's real /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from verification.targets.lease import (
    Holder,
    LeaseFacts,
    RunFacts,
    StoreUnreadable,
    judge,
    judge_run,
    process_alive,
    process_identity,
    this_process,
    use_worker_name,
    worker_name,
)
from verification.targets.polling import poll_until

NOW = datetime(2026, 11, 25, 3, 0, tzinfo=UTC)
HERE = Holder("w1", 100, "boot/ns/1")
THERE = Holder("w2", 200, "otherboot/ns/2")


def checks(**known: bool | None):  # type: ignore[no-untyped-def]
    """A process check answering per holder's host: True running, False gone, None cannot tell."""
    return lambda holder: known.get(holder.host)


def lease(holder: Holder, heartbeat: datetime, *, seconds: float = 180, released: datetime | None = None,
          scope: str = "run", database: str | None = "demo2", phase: str | None = "demo2: restoring F1",
          lease_id: int = 1) -> LeaseFacts:
    return LeaseFacts(lease_id, "r1", holder, scope, heartbeat - timedelta(minutes=5), heartbeat, seconds,
                      database=database, phase=phase, released_at=released, ended="released" if released else None)


def running(*leases: LeaseFacts, finished: datetime | None = None) -> RunFacts:
    return RunFacts("r1", "passed" if finished else "running", finished, leases)


# --- judge: what a holder left ----------------------------------------------------------------------

def test_a_holder_seen_running_is_kept_whatever_the_store_says():
    for run in (None, StoreUnreadable("gone"), running(finished=NOW), running(lease(HERE, NOW - timedelta(days=1)))):
        judged = judge("r1", HERE, run, NOW, checks(w1=True))
        assert (judged.dead, judged.live, judged.reason) == (False, True, "worker w1 pid 100 is running"), run


def test_without_a_readable_store_or_a_row_of_the_run_nothing_is_established_so_it_is_kept():
    # The holder's process is gone here, yet the run is none of this store's: another store's run
    # (another user's, another test's) must never be touched by this one's reaper.
    unreadable = judge("r1", HERE, StoreUnreadable("sqlite:///x.db: OperationalError: locked"), NOW, checks(w1=False))
    assert not unreadable.dead and not unreadable.live
    assert unreadable.reason == ("the results store cannot be read (sqlite:///x.db: OperationalError: locked): "
                                 "whether run r1 is alive is unknown")
    unknown = judge("r1", HERE, None, NOW, checks(w1=False))
    assert not unknown.dead and "run r1 is not in this results store" in unknown.reason


def test_a_finished_run_is_dead_even_with_a_fresh_lease_elsewhere():
    judged = judge("r1", THERE, running(lease(THERE, NOW), finished=NOW - timedelta(minutes=1)), NOW, checks())
    assert judged.dead
    assert judged.reason == "run r1 finished at 2026-11-25T02:59:00Z (passed), yet this is still labelled with it"


def test_a_holder_gone_from_this_host_is_dead_at_once_even_within_its_lease():
    judged = judge("r1", HERE, running(lease(HERE, NOW)), NOW, checks(w1=False))
    assert judged.dead and judged.lease is not None and judged.lease.database == "demo2"
    assert judged.reason == "worker w1 pid 100 is gone (no process 100 with its start time on this host)"


@pytest.mark.parametrize(("age", "dead"), [(timedelta(seconds=179), False), (timedelta(seconds=180), False),
                                           (timedelta(seconds=181), True), (timedelta(hours=5), True)])
def test_a_holder_on_another_host_is_judged_by_its_heartbeat_against_its_lease(age, dead):
    judged = judge("r1", THERE, running(lease(THERE, NOW - age)), NOW, checks())
    assert judged.dead is dead
    assert judged.live is not dead
    if dead:
        beat = (NOW - age).isoformat().replace("+00:00", "Z")
        assert judged.reason.startswith(f"no heartbeat from worker w2 pid 200 since {beat} (its lease of 180 s ran out")
    else:
        assert judged.reason.startswith("worker w2 pid 200 is not on this host; its heartbeat at")


def test_the_lease_length_is_the_holders_own():
    short = running(lease(THERE, NOW - timedelta(seconds=61), seconds=60))
    assert judge("r1", THERE, short, NOW, checks()).dead


def test_a_released_lease_leaves_its_leftovers_dead():
    judged = judge("r1", THERE, running(lease(THERE, NOW, released=NOW - timedelta(seconds=5))), NOW, checks())
    assert judged.dead and judged.reason == ("worker w2 pid 200 released its lease at 2026-11-25T02:59:55Z "
                                             "(released)")


def test_the_holders_newest_lease_decides():
    old = lease(THERE, NOW - timedelta(hours=2), released=NOW - timedelta(hours=2), lease_id=1)
    new = LeaseFacts(2, "r1", THERE, "task", NOW - timedelta(seconds=10), NOW - timedelta(seconds=10), 180)
    assert not judge("r1", THERE, running(old, new), NOW, checks()).dead


def test_without_holder_labels_every_lease_of_the_run_must_be_dead():
    stale = lease(THERE, NOW - timedelta(hours=1), lease_id=1)
    fresh = lease(Holder("w3", 300, "b3/ns/3"), NOW, lease_id=2)
    kept = judge("r1", None, running(stale, fresh), NOW, checks())
    assert not kept.dead and kept.reason.startswith("run r1 is alive: worker w3 pid 300 is not on this host")
    gone = judge("r1", None, running(stale, lease(HERE, NOW, lease_id=3)), NOW, checks(w1=False))
    assert gone.dead and gone.reason.startswith("no lease of run r1 is alive: ")


def test_a_holder_without_a_lease_falls_back_to_the_runs_leases_and_no_lease_at_all_is_kept():
    assert not judge("r1", THERE, running(), NOW, checks()).dead
    assert "holds no lease in the store" in judge("r1", THERE, running(), NOW, checks()).reason
    other = lease(Holder("w3", 300, "b3/ns/3"), NOW - timedelta(hours=1))
    assert judge("r1", THERE, running(other), NOW, checks()).dead


# --- judge_run: which leases died held, and whether the run is over ------------------------------------

def test_a_run_held_by_one_process_that_died_is_over_with_its_lease_killed():
    judged = judge_run(running(lease(HERE, NOW)), NOW, checks(w1=False))
    assert judged.dead and [k.lease.database for k in judged.killed] == ["demo2"]
    assert judged.reason == "worker w1 pid 100 is gone (no process 100 with its start time on this host)"


def test_a_run_whose_worker_lives_or_released_is_not_over():
    assert judge_run(running(lease(HERE, NOW - timedelta(days=1))), NOW, checks(w1=True)).killed == ()
    released = judge_run(running(lease(THERE, NOW, released=NOW)), NOW, checks())
    assert (released.dead, released.killed) == (False, ())
    fresh = judge_run(running(lease(THERE, NOW - timedelta(seconds=30))), NOW, checks())
    assert (fresh.dead, fresh.killed) == (False, ())


def test_a_schedulers_run_names_its_dead_tasks_but_is_closed_by_its_scheduler():
    dead_task = lease(THERE, NOW - timedelta(hours=1), scope="task", lease_id=1)
    living = lease(Holder("w3", 300, "b3/ns/3"), NOW, scope="task", database="demo1", lease_id=2)
    judged = judge_run(running(dead_task, living), NOW, checks())
    assert not judged.dead and [k.lease.lease_id for k in judged.killed] == [1]
    alone = judge_run(running(dead_task), NOW, checks())
    assert not alone.dead and len(alone.killed) == 1


# --- the process identity, from this host's /proc ----------------------------------------------------

def test_this_process_is_alive_and_an_exited_one_is_gone():
    me = this_process()
    assert me.pid == os.getpid() and process_alive(me) is True
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        holder = Holder("w", child.pid, process_identity(child.pid))
        assert process_alive(holder) is True
    finally:
        child.kill()
    # Killed but not yet waited for: a zombie, as dead as it gets (the kill lands within moments).
    assert poll_until(lambda: process_alive(holder) is False, 5.0, 0.01)
    child.wait()
    assert process_alive(holder) is False


def test_a_pid_reused_by_another_process_is_not_the_holder():
    me = this_process()
    boot, namespace, ticks = me.process.split("/")
    assert process_alive(Holder(me.host, me.pid, f"{boot}/{namespace}/{int(ticks) + 1}")) is False


def test_a_process_of_another_boot_or_namespace_cannot_be_looked_up_here():
    me = this_process()
    boot, namespace, ticks = me.process.split("/")
    assert process_alive(Holder(me.host, me.pid, f"another-boot/{namespace}/{ticks}")) is None
    assert process_alive(Holder(me.host, me.pid, f"{boot}/4026500000/{ticks}")) is None
    assert process_alive(Holder(me.host, me.pid, "unknown")) is None


def test_the_worker_name_is_the_configured_one_else_the_host_name():
    import socket

    try:
        use_worker_name("celery-a")
        assert worker_name() == "celery-a" and this_process().host == "celery-a"
    finally:
        use_worker_name(None)
    assert worker_name() == socket.gethostname()


def test_a_holder_round_trips_through_labels_and_records_and_old_ones_have_none():
    me = this_process()
    assert Holder.from_labels(me.labels()) == me
    assert Holder.from_record({"run_id": "r", **me.record()}) == me
    assert Holder.from_labels({"restoreproof.run": "r"}) is None
    assert Holder.from_record({"run_id": "r", "pid": 5}) is None
