"""The run's predicted time, said before its first restore, from this host's history alone."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.unit.factories import history_entry
from verification.config import Settings
from verification.engines.postgres.chain import plan
from verification.engines.postgres.engine import PostgresEngine
from verification.engines.postgres.repository import discover
from verification.phase_events import predicted_line
from verification.prediction.context import HistoryEntry, PredictionContext
from verification.prediction.upfront import FIRST_RUN, predict_run
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024


def demo1(repo: Path):  # type: ignore[no-untyped-def]
    source = LocalSource(repo)
    (stanza,) = discover(source, MB16)
    return plan(source, stanza, None, MB16)


def earlier(runs: int, host: str) -> list[HistoryEntry]:
    key = {"engine": "postgres", "image": "sha256:abc", "host": host}
    phases = [("provision", 20.0), ("server_start", 2.0), ("recovery_end", 1.0), ("data_checks", 4.0)]
    return [HistoryEntry(f"r{i}", None, history_entry("demo1", key, [  # type: ignore[arg-type]
        {"name": name, "status": "measured", "seconds": seconds} for name, seconds in phases]))
        for i in range(runs)]


def test_a_first_run_says_there_is_no_prediction_yet(captured_repo: Path) -> None:
    context = PredictionContext(Settings(), "postgres")
    run = predict_run(context, PostgresEngine(Settings()), [demo1(captured_repo)])
    assert (run.databases, run.basis) == ({"demo1": None}, FIRST_RUN)
    assert predicted_line(run) == "predicted: no prediction yet (first run)"
    # Runs on another host say nothing of this one.
    context.history = earlier(5, "elsewhere")
    assert predict_run(context, PostgresEngine(Settings()), [demo1(captured_repo)]).basis == FIRST_RUN


def test_the_runs_on_this_host_predict_each_phase_and_the_total(captured_repo: Path) -> None:
    context = PredictionContext(Settings(), "postgres", earlier(5, socket.gethostname()))
    run = predict_run(context, PostgresEngine(Settings()), [demo1(captured_repo)])
    phases = run.phases["demo1"]
    assert (phases["provision"], phases["server_start"], phases["recovery_end"], phases["data_checks"]) == \
        (20.0, 2.0, 1.0, 4.0)
    total = run.databases["demo1"]
    assert total is not None and total >= 27.0
    # What the engine does once its target is up: everything but the provision.
    assert phases["restore and checks"] == total - 20.0
    assert run.basis == "from 5 earlier runs on this host"
    assert predicted_line(run).startswith("predicted: demo1 ") and predicted_line(run).endswith(
        f", total {predicted_line(run).split('demo1 ')[1].split(',')[0]} (from 5 earlier runs on this host)")


def test_an_offline_run_predicts_nothing_and_still_times_its_backup_file_checks(captured_repo: Path,
                                                                                 tmp_path: Path) -> None:
    """Nothing is restored without a target: no predicted time is said; the checks of the backup files
    that need no server are still a phase, started and ended."""
    from verification import pipeline
    from verification.config import load_settings
    from verification.phase_events import PhaseEvent, listening

    settings = load_settings(None, state_dir=tmp_path, results_url=f"sqlite:///{tmp_path / 'r.db'}",
                             report_dir=tmp_path / "reports")
    said: list[str] = []
    events: list[PhaseEvent] = []
    with listening(events.append):
        pipeline.run_verification(settings, captured_repo, engine_name="postgres", target_kind="offline",
                                  progress=said.append)
    assert not [line for line in said if line.startswith("predicted")], said
    assert [(type(e).__name__, e.database, e.phase) for e in events] == [  # type: ignore[union-attr]
        ("PhaseStarted", "demo1", "backup file checks"), ("PhaseEnded", "demo1", "backup file checks")]
