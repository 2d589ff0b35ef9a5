"""A worker killed with SIGKILL in the middle of a restore, and a live run beside another run's start.

A real `restoreproof verify` (its own process group, as a worker runs it) restores the demo's real
pgBackRest repository into real containers; the whole group is SIGKILLed while pgBackRest restores.
Nothing can remove its target then: the next run must, and must record the killed database as
"error" with why, lose nothing the killed run had recorded, and take that database first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.integration.conftest import leftovers
from tests.integration.containers import restoring_target
from verification.config import load_settings
from verification.results import ResultStore

pytestmark = [pytest.mark.integration, pytest.mark.faults]

CLI = [sys.executable, "-m", "verification.cli"]


class Worker:
    """`restoreproof verify` as a worker process: its own session and process group, output to a file."""

    def __init__(self, repo: Path, reports: Path, log: Path, *options: str) -> None:
        self.reports = reports
        self.log: IO[bytes] = log.open("wb")
        self.process = subprocess.Popen([*CLI, "verify", str(repo), "--target", "docker", "--report-dir",
                                         str(reports), *options], stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True, env=dict(os.environ))
        self.log_path = log

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def restoring(self, database: str, timeout: float = 300) -> tuple[str, str]:
        """Wait until pgBackRest restores `database` in this worker's target; (run id, container name)."""
        def running() -> None:
            assert self.process.poll() is None, self.output()

        found = restoring_target(database, lambda: {folder.name for folder in self.reports.iterdir()}
                                 if self.reports.is_dir() else set(), running, timeout)
        if found is None:
            pytest.fail(f"{database} was never restored:\n{self.output()}")
        return found

    def kill(self) -> None:
        """SIGKILL the worker's whole process group: nothing of it can clean up."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # its own teardown removes its target
            self.process.wait(timeout=120)
        self.log.close()


@pytest.fixture
def workers(isolated: Path) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.close()


def recorded(store_url: str, run_id: str) -> tuple[Any, list[Any], Any]:
    """What the store holds of a run: the run, its databases' entries, and its one task lease."""
    store = ResultStore(store_url)
    try:
        run, entries = store.run_with_reports(run_id)
        (lease,) = store.leases([run_id])
    finally:
        store.close()
    return run, entries, lease


def said_restoring(store_url: str, run_id: str, timeout: float = 60) -> None:
    """Wait until the run's task lease says it restores demo2."""
    deadline = time.monotonic() + timeout
    phase = None
    while time.monotonic() < deadline:
        phase = recorded(store_url, run_id)[2].phase
        if phase is not None and phase.startswith("demo2: restoring"):
            return
        time.sleep(0.1)
    pytest.fail(f"the lease never said demo2 was restoring; last: {phase}")


def test_a_worker_killed_mid_restore_is_reaped_by_the_next_run_its_database_error_and_first(
        pg_repo, isolated, restoreproof, workers):
    reports = isolated / "reports"
    worker = Worker(pg_repo, reports, isolated / "killed.log")
    workers.append(worker)
    # demo1 is verified first (never verified, by name); demo2's restore is where the worker dies.
    run_id, container = worker.restoring("demo2")
    settings = load_settings(report_dir=reports)
    # The lease says what its holder does at its next heartbeat, a moment after the holder said it: on a
    # busy machine pgBackRest can be seen restoring first. The kill comes once the lease says so.
    said_restoring(settings.results_database_url, run_id)
    worker.kill()
    assert worker.process.returncode == -signal.SIGKILL
    left = leftovers(run_id)
    assert sorted(left) == sorted([container, f"{container}-data"]), \
        f"a SIGKILLed worker cannot remove its target: it should be left: {left}"
    run, entries, lease = recorded(settings.results_database_url, run_id)
    assert run.finished_at is None and [(e.database, str(e.verdict)) for e in entries] == [("demo1", "passed")]
    assert lease.released_at is None and lease.database == "demo2"

    # The next run: its start removes what the dead worker left, and records what it was doing.
    following = restoreproof("verify", pg_repo, "--target", "docker")
    assert leftovers(run_id) == []
    assert following.exit_code == 0, following.stderr
    # The killed database first in line, then the rest; both verified now.
    assert [(d["database"], d["verdict"]) for d in following.report["databases"]] == [
        ("demo2", "passed"), ("demo1", "passed")]
    run, entries, lease = recorded(settings.results_database_url, run_id)
    assert run.finished_at is not None and run.verdict == "error"
    verdicts = {e.database: (str(e.verdict), e.reasons) for e in entries}
    assert verdicts["demo1"] == ("passed", verdicts["demo1"][1])  # recorded before the kill: nothing lost
    verdict, (reason,) = verdicts["demo2"]
    assert verdict == "error"
    assert reason.startswith(f"restoreproof was killed while verifying it: worker {lease.host} pid {lease.pid} is "
                             f"gone (no process {lease.pid} with its start time on this host)"), reason
    assert "while: demo2: restoring" in reason, reason
    assert lease.released_at is not None and (lease.ended or "").startswith("killed: ")
    # Its report, published from the store by the run that found it dead.
    import json

    killed_report = json.loads((reports / run_id / "report.json").read_text())
    assert killed_report["verdict"] == "error"
    assert [(d["database"], d["verdict"], d["reasons"]) for d in killed_report["databases"]] == [
        ("demo1", "passed", verdicts["demo1"][1]), ("demo2", "error", [reason])]


def test_a_live_runs_target_survives_another_runs_start_and_a_bare_reap(pg_repo, isolated, restoreproof,
                                                                         workers):
    from typer.testing import CliRunner

    from verification.cli import app

    reports = isolated / "reports"
    worker = Worker(pg_repo, reports, isolated / "live.log", "-d", "demo1")
    workers.append(worker)
    run_id, container = worker.restoring("demo1")
    # Another run starts against the same store and engine (offline: its start's sweep is the point),
    # and someone runs `reap` without naming a run.
    other = restoreproof("verify", pg_repo, "--target", "offline")
    assert other.report is not None and other.report["run_id"] != run_id
    reaped = CliRunner().invoke(app, ["reap"])
    assert reaped.exit_code == 0, reaped.output
    assert f"run {run_id} (worker " in reaped.stdout and f"  kept container {container}" in reaped.stdout
    assert sorted(leftovers(run_id)) == sorted([container, f"{container}-data"])
    # The live run was never disturbed: it finishes and passes, and removes its own target.
    assert worker.process.wait(timeout=600) == 0, worker.output()
    assert leftovers(run_id) == []
