"""The live display of a run's phases: what each line says, the ticker's lines without a terminal, and
that the display never costs the run and stops cleanly."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import TESTS
from verification.cli_progress import PhaseBoard, Progress, Running, ended_text, live_text, plain_text
from verification.phase_events import PhaseBytes, PhaseEnded, PhaseStarted, RunPredicted, emit, phase


def test_a_running_phase_shows_its_elapsed_and_predicted_time():
    running = Running("db1", "restore and checks", started=100.0, predicted=240.0)
    assert live_text(running, 172.0) == "db1: restore and checks 1 min 12 s of ~4 min (predicted)"
    assert plain_text(running, 172.0) == "db1: restore and checks running 1 min 12 s (predicted 4 min)"


def test_a_phase_past_its_prediction_says_by_how_much():
    running = Running("db1", "provision", started=0.0, predicted=30.0)
    assert live_text(running, 60.0) == "db1: provision 1 min, predicted 30 s: over the prediction by 30 s"
    assert plain_text(running, 60.0) == "db1: provision running 1 min (predicted 30 s, over the prediction by 30 s)"
    assert ended_text(PhaseEnded("db1", "provision", 60.0), 30.0) == \
        "db1: provision done in 1 min (predicted 30 s, over the prediction by 30 s)"


def test_a_phase_nothing_predicts_says_so():
    running = Running("db1", "backup file checks", started=0.0, predicted=None)
    assert plain_text(running, 5.0) == "db1: backup file checks running 5 s (no prediction)"
    assert ended_text(PhaseEnded("db1", "download", 3.0), None) == "db1: download done in 3 s (no prediction)"


def test_the_board_falls_back_on_the_runs_upfront_prediction():
    board = PhaseBoard()
    board.apply(RunPredicted({"db1": 300.0}, {"db1": {"provision": 20.0, "restore and checks": 250.0}}, "x"))
    board.apply(PhaseStarted("db1", "provision", None, at=10.0))
    board.apply(PhaseStarted("db2", "provision", None, at=10.0))
    assert board.lines(25.0, plain_text) == ["db1: provision running 15 s (predicted 20 s)",
                                             "db2: provision running 15 s (no prediction)"]
    # The pipeline's own figure, made once the target is up, wins over the upfront one.
    board.apply(PhaseStarted("db1", "restore and checks", 200.0, at=30.0))
    assert board.apply(PhaseEnded("db1", "provision", 21.0)) == \
        "db1: provision done in 21 s (predicted 20 s, over the prediction by 1 s)"
    assert board.lines(90.0, plain_text)[-1] == "db1: restore and checks running 1 min (predicted 3 min 20 s)"


def plain_progress(interval: float) -> tuple[Progress, io.StringIO]:
    out = io.StringIO()
    return Progress(Console(file=out, force_terminal=False, width=200), interval=interval), out


def test_without_a_terminal_each_running_phase_is_a_line_every_interval():
    progress, out = plain_progress(0.05)
    progress("run r1: reading /backups")
    try:
        with phase("db1", "restore and checks", 240.0):
            time.sleep(0.3)
    finally:
        progress.stop()
    lines = out.getvalue().splitlines()
    running = [line for line in lines if "db1: restore and checks running 0 s (predicted 4 min)" in line]
    assert len(running) >= 2, lines
    assert lines[-1].endswith("db1: restore and checks done in 0 s (predicted 4 min)")
    assert "run r1: reading /backups" in lines[0]
    # Stopped: the ticker is joined, no listener is left, and nothing more is said.
    assert not [t for t in threading.enumerate() if t.name == "progress"]
    emit(PhaseStarted("db1", "late", None))
    time.sleep(0.15)
    assert out.getvalue().splitlines() == lines


def test_a_display_that_fails_never_costs_the_run(caplog):
    def broken(*_: object) -> None:
        raise RuntimeError("display broke")

    progress, _ = plain_progress(0.02)
    progress("starting")
    progress.board.lines = broken  # type: ignore[assignment,method-assign]
    time.sleep(0.1)
    progress.stop()
    assert caplog.text.count("progress display failed") == 1 and "display broke" in caplog.text


def test_a_phase_ended_by_an_interrupt_is_still_ended_and_the_display_stops():
    progress, out = plain_progress(10)
    progress("starting")
    try:
        with phase("db1", "restore and checks", 60.0):
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    finally:
        progress.stop()
    assert out.getvalue().splitlines()[-1].endswith("db1: restore and checks stopped after 0 s (predicted 1 min)")
    assert not [t for t in threading.enumerate() if t.name == "progress"]


def test_on_a_terminal_the_status_line_shows_each_running_phase():
    out = io.StringIO()
    progress = Progress(Console(file=out, force_terminal=True, width=200), interval=0.05)
    progress("starting")
    try:
        with phase("db1", "restore and checks", 240.0):
            time.sleep(0.3)
    finally:
        progress.stop()
    assert "db1: restore and checks 0 s of ~4 min (predicted)" in out.getvalue()


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process, with no terminal: what a scheduler's log capture gets."""
    env = {**os.environ, "XDG_STATE_HOME": str(home / "state"), "RESTOREPROOF_PROGRESS_INTERVAL": "0.05",
           "PYTHONPATH": str(TESTS.parent)}
    return subprocess.run([sys.executable, "-m", "verification.cli", *args], capture_output=True, text=True,
                          env=env, cwd=home, timeout=600, check=False)


@pytest.fixture
def readable_repo(captured_repo: Path) -> Iterator[Path]:
    """The captured repository where a local target (run as the OS user postgres) can read it."""
    folder = Path(tempfile.mkdtemp(prefix="restoreproof-progress-"))
    try:
        repo = Path(shutil.copytree(captured_repo, folder / "repo"))
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield repo
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_run_without_a_terminal_says_each_phase_with_its_elapsed_and_predicted_time(readable_repo, tmp_path):
    """A real run into a local target (the captured repository's restore then fails, which is beside the
    point): the predicted total first, then each phase, running and done, on stderr; with --json, only
    the report's JSON on stdout and no progress at all."""
    run = cli("verify", str(readable_repo), "--target", "local", "--report-dir", str(tmp_path / "reports"),
              home=tmp_path)
    said = run.stderr
    assert run.returncode == 1, said
    stamp = r"^\d\d:\d\d:\d\d "
    assert re.search(stamp + r"predicted: no prediction yet \(first run\)$", said, re.M), said
    assert re.search(stamp + r"demo1: backup file checks done in \d+ s \(no prediction\)$", said, re.M), said
    assert re.search(stamp + r"demo1: provision done in \d+ s \(no prediction\)$", said, re.M), said
    # Predicted once the target is up (cold, from probes and documented rates, on a first run).
    running = re.findall(stamp + r"demo1: restore and checks running (\d+ s) \(predicted (\d+ min \d+ s|\d+ s)\)$",
                         said, re.M)
    assert running, said
    assert re.search(stamp + rf"demo1: restore and checks done in \d+ s \(predicted {running[0][1]}\)$", said, re.M)
    assert said.index("predicted: ") < said.index("demo1: provision done") < said.index("restore and checks done")
    # The engine's own step inside it, ended (here by the restore's failure) before the whole restore is.
    transfer = re.search(stamp + r"demo1: transfer done in \d+ s \(no prediction\)$", said, re.M)
    assert transfer, said
    assert transfer.start() < said.index("restore and checks done")

    quiet = cli("verify", str(readable_repo), "--target", "local", "--report-dir", str(tmp_path / "reports"),
                "--json", home=tmp_path)
    assert quiet.returncode == 1, quiet.stderr
    assert json.loads(quiet.stdout)["databases"][0]["database"] == "demo1"
    assert not re.search(r"predicted|running|done in", quiet.stderr), quiet.stderr


def test_the_setting_spaces_the_lines_only_where_there_is_no_terminal():
    plain, _ = plain_progress(10)
    plain.plain_every(0.5)
    live = Progress(Console(file=io.StringIO(), force_terminal=True))
    live.plain_every(0.5)
    assert (plain.interval, live.interval) == (0.5, 1.0)


def test_a_step_shown_as_one_is_predicted_as_the_phases_it_covers_and_hides_the_whole_restore():
    board = PhaseBoard()
    board.apply(RunPredicted({"db1": 300.0}, {"db1": {"server_start": 5.0, "redo": 40.0, "recovery_end": 1.0,
                                                      "restore and checks": 250.0}}, "x"))
    board.apply(PhaseStarted("db1", "restore and checks", 200.0, at=0.0))
    assert board.lines(10.0, plain_text) == ["db1: restore and checks running 10 s (predicted 3 min 20 s)"]
    board.apply(PhaseStarted("db1", "server start and redo", None, at=10.0,
                             covers=("server_start", "redo", "recovery_end")))
    assert board.lines(30.0, plain_text) == ["db1: server start and redo running 20 s (predicted 46 s)"]
    # One phase it covers not predicted: no sum that would look like a prediction of the whole step.
    board.apply(PhaseStarted("db1", "checks", None, at=40.0, covers=("data_checks", "integrity_check")))
    assert board.lines(50.0, plain_text)[-1] == "db1: checks running 10 s (no prediction)"
    board.apply(PhaseEnded("db1", "server start and redo", 20.0))
    board.apply(PhaseEnded("db1", "checks", 10.0))
    assert board.lines(60.0, plain_text) == ["db1: restore and checks running 1 min (predicted 3 min 20 s)"]


def test_a_phase_moving_bytes_says_how_far_it_has_come_until_it_ends():
    board = PhaseBoard()
    board.apply(PhaseStarted("db1", "download", 60.0, at=0.0))
    board.apply(PhaseBytes("db1", "download", 3 * 2**20, 12 * 2**20))
    assert board.lines(20.0, plain_text) == ["db1: download running 20 s (predicted 1 min), 3.0 of 12.0 MiB"]
    board.apply(PhaseBytes("db1", "download", 5 * 2**20, None))
    assert board.lines(20.0, live_text) == ["db1: download 20 s of ~1 min (predicted), 5.0 MiB"]
    board.apply(PhaseEnded("db1", "download", 30.0))
    board.apply(PhaseStarted("db1", "download", None, at=40.0))  # a second run of it starts at nothing
    assert board.lines(41.0, plain_text) == ["db1: download running 1 s (no prediction)"]
