"""restoreproof's own infrastructure failing under a real run: the target's disk and memory, the results
store, several runs at once. None of these is a fault of the backups: a database they stop is "error"
naming the cause, never "failed" and never "passed", and nothing is left behind.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def reasons(run, database: str) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(run.database(database)["reasons"])


# --- the target's resources ----------------------------------------------------------------------

def test_a_target_whose_data_volume_fills_up_is_an_error_saying_the_disk_is_full(demo, restoreproof, monkeypatch):
    # demo1's restore is about 100 MB: a 32 MiB data volume (a tmpfs of that size) fills up mid-restore.
    monkeypatch.setenv("RESTOREPROOF_DOCKER__DATA_SIZE", "32m")
    run = restoreproof("verify", demo.repository, "-d", "demo1", "--target", "docker")
    db = run.database("demo1")
    assert db["verdict"] == "error", db["reasons"]
    assert run.exit_code == 2 and run.report["verdict"] == "error"
    first = db["reasons"][0]
    assert first.startswith("the target's disk is full: the data volume restoreproof-"), first
    assert "holds 32 MiB (docker.data_size)" in first and "0 bytes available" in first, first
    # pgBackRest's own words follow: its worker could not write the restored file.
    assert "pgbackrest restore of backup" in reasons(run, "demo1")
    assert "unable to write '/var/lib/restoreproof/data/" in reasons(run, "demo1")
    assert leftovers(run.report["run_id"]) == []


def test_a_target_out_of_memory_is_an_error_saying_it_was_oom_killed(demo, restoreproof, monkeypatch):
    # 32 MiB: pgBackRest restores, then the server's startup process is killed by the kernel's OOM killer
    # while it replays WAL into shared buffers (at 64 MiB it is a backend of pg_amcheck, which without the
    # memory check made pg_amcheck say "corruption", and the database "failed").
    monkeypatch.setenv("RESTOREPROOF_DOCKER__MEMORY", "32m")
    run = restoreproof("verify", demo.repository, "-d", "demo1", "--target", "docker")
    db = run.database("demo1")
    assert db["verdict"] == "error", db["reasons"]
    assert run.exit_code == 2 and run.report["verdict"] == "error"
    first = db["reasons"][0]
    assert first.startswith("the target ran out of memory: container restoreproof-"), first
    assert "OOM-killed (limit 32 MiB, docker.memory): the kernel's OOM killer struck" in first, first
    said = reasons(run, "demo1")
    # What the kernel killed is said in the tools' own words (the server's, or a command's exit 137),
    # never as a timeout and never as a fault of the backups.
    assert "was terminated by signal 9: Killed" in said or "was killed (exit 137)" in said, said
    assert "did not finish within" not in said, said
    assert not [r for r in db["reasons"] if "corruption" in r and not r.startswith("not taken as a verdict")]
    assert leftovers(run.report["run_id"]) == []
