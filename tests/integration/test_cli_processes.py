"""The command as a process: killed runs, SIGTERM, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import leftovers

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "verification.cli"]


def start_verify(repo: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.Popen([*CLI, "verify", str(repo), "--report-dir", str(tmp_path / "reports")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_restore(process: subprocess.Popen[bytes], reports: Path, timeout: float = 120) -> str:
    """Wait until the run has a target container and pgBackRest is restoring into it; return the run id.
    Only this process's run counts (its folder is in `reports`): other runs may share the Docker engine."""
    import docker.errors

    from verification.targets.docker import docker_client

    client = docker_client()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            ours = {folder.name for folder in reports.iterdir()} if reports.is_dir() else set()
            for container in client.containers.list(filters={"label": "restoreproof.role=target"}):
                if container.labels.get("restoreproof.run") not in ours:
                    continue
                try:
                    processes = container.top(ps_args="-eo pid,args")["Processes"] or []
                except docker.errors.APIError:
                    continue  # the container went away between list and top
                if any("pgbackrest" in p[-1] and p[-1].endswith(" restore") for p in processes):
                    return str(container.labels["restoreproof.run"])
            time.sleep(0.05)
    finally:
        client.close()
    pytest.fail("the run never reached the restore")


def test_a_run_killed_during_the_restore_leaves_nothing_after_reap(demo, tmp_path):
    process = start_verify(demo.repository, tmp_path)
    run_id = wait_for_restore(process, tmp_path / "reports")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    left = leftovers(run_id)
    assert len(left) == 2, f"a SIGKILLed run cannot clean up: its container and volume should remain: {left}"

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    # Without --run: only runs proven dead go (this one: its worker's pid and start time are gone), never
    # another run on this engine.
    reaped = subprocess.run([*CLI, "reap"], env=env, capture_output=True, text=True, timeout=120)
    assert reaped.returncode == 0, reaped.stderr
    assert f"run {run_id} (worker " in reaped.stdout and f"pid {process.pid}): dead: worker " in reaped.stdout
    for name in left:
        assert f"  removed {'volume' if name.endswith('-data') else 'container'} {name}" in reaped.stdout
    assert leftovers(run_id) == []


def stored_run(settings, run_id: str):  # type: ignore[no-untyped-def]
    from verification.results import ResultStore

    store = ResultStore(settings.results_database_url)
    try:
        run, entries = store.run_with_reports(run_id)
    finally:
        store.close()
    return run, {entry.database: (str(entry.verdict), entry.reasons) for entry in entries}


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_the_restore_records_the_run_as_interrupted_and_removes_the_target(
        demo, tmp_path, settings, sent, code):
    name = signal.Signals(sent).name
    process = start_verify(demo.repository, tmp_path)
    run_id = wait_for_restore(process, tmp_path / "reports")
    process.send_signal(sent)
    _, raw = process.communicate(timeout=180)
    stderr = raw.decode()
    assert process.returncode == code, stderr
    assert leftovers(run_id) == []
    run, verdicts = stored_run(settings, run_id)
    assert run.finished_at is not None and run.verdict == "error"
    interrupted = [database for database, (_, reasons) in verdicts.items() if reasons[0].startswith("interrupted")]
    assert len(interrupted) == 1 and run.host["interrupted"] == f"interrupted by {name} during {interrupted[0]}"
    verdict, (reason,) = verdicts.pop(interrupted[0])
    # The phase the signal came in: the restore the test waited for, not the removal that followed it.
    assert verdict == "error" and reason.startswith(f"interrupted by {name} during restoring "), reason
    assert reason.endswith("; nothing proven") and "removing" not in reason
    assert list(verdicts.values()) == [("error", ["not started: the run was interrupted"])]
    report = tmp_path / "reports" / run_id / "report.json"
    assert json.loads(report.read_text())["verdict"] == "error"
    assert (f"restoreproof: interrupted by {name}; the targets of this run were removed; run {run_id} recorded as "
            f"interrupted by {name} during {interrupted[0]} (error, 0 database(s) finished before it); report "
            f"{report}") in stderr


def test_a_source_that_is_not_a_repository_exits_2_with_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("not a backup")
    result = subprocess.run([*CLI, "verify", str(tmp_path)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
    assert result.returncode == 2
    assert f"{tmp_path} holds no backups restoreproof recognises" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_source_exits_2(tmp_path):
    result = subprocess.run([*CLI, "verify", str(tmp_path / "absent")], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
    assert result.returncode == 2
    assert f"source {tmp_path / 'absent'} does not exist" in result.stderr


def test_json_output_is_the_report_and_quiet(demo, tmp_path):
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    result = subprocess.run([*CLI, "verify", str(demo.repository), "--json", "--report-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr
    import json

    report = json.loads(result.stdout)
    assert report["verdict"] == "passed"
    assert result.stderr == ""


def test_verify_sql_server_backups_without_an_image_says_so(mssql_corpus, tmp_path):
    from verification.targets.docker import docker_client

    client = docker_client()
    try:
        if any("mcr.microsoft.com/mssql/server" in tag for image in client.images.list() for tag in image.tags):
            pytest.skip("a SQL Server image is present here: tests/integration/test_mssql_end_to_end.py runs instead")
    finally:
        client.close()
    result = subprocess.run([*CLI, "verify", str(mssql_corpus / "RestoreTimeClean")], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
    assert result.returncode == 2
    assert "SQL Server image mcr.microsoft.com/mssql/server:2022-latest is not present and cannot be pulled" \
        in result.stdout  # the reason of the verdict


def test_a_second_ctrl_c_while_the_target_is_removed_leaves_nothing(demo, tmp_path, settings):
    process = start_verify(demo.repository, tmp_path)
    run_id = wait_for_restore(process, tmp_path / "reports")
    process.send_signal(signal.SIGINT)
    assert process.stderr is not None
    said = []
    for line in iter(process.stderr.readline, b""):  # up to the removal the first Ctrl-C started
        said.append(line.decode())
        if "removing the target" in said[-1]:
            process.send_signal(signal.SIGINT)
            break
    _, rest = process.communicate(timeout=180)
    stderr = "".join(said) + rest.decode()
    assert process.returncode == 130, stderr
    assert "restoreproof: already stopping (SIGINT): removing this run's targets" in stderr
    assert leftovers(run_id) == []
    run, _ = stored_run(settings, run_id)
    assert run.finished_at is not None and run.host["interrupted"].startswith("interrupted by SIGINT during ")
    assert "recorded as interrupted by SIGINT during " in stderr
