"""SIGINT/SIGTERM during a run: real signals to this process, and the run recorded in a real SQLite store."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import complete_plan
from tests.unit.test_pipeline import (
    START,
    ExplodingEngine,
    MemoryProvider,
    MemoryTarget,
    record_passed,
    settings_for,
    three_stanzas,
)
from verification.engines.base import Evidence
from verification.interrupts import (
    NOT_STARTED,
    Interrupted,
    Interruptible,
    Interruption,
    deferred_signals,
    signal_of,
)


def wait_for_signal() -> None:
    """Long enough for a signal sent to this process to be handled (it is, between two bytecodes)."""
    time.sleep(2)
    pytest.fail("the signal never came")


def test_sigterm_in_a_run_is_recorded_with_where_the_run_was_when_it_came(capfd):
    where = {"database": "demo2", "phase": "demo2: restoring 20261122-010000F"}
    recorded: list[Interruption] = []

    def record(interruption: Interruption) -> str:
        recorded.append(interruption)
        return "run r recorded as interrupted"

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as raised, Interruptible(lambda: (where["database"], where["phase"]), record):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            wait_for_signal()
        finally:
            where["phase"] = "demo2: removing the target"  # the unwinding's own progress is not the phase
            os.kill(os.getpid(), signal.SIGINT)  # a second signal while unwinding: said, and nothing cut short
            time.sleep(0.2)
            where["database"] = None
    assert raised.value.signum == signal.SIGTERM and raised.value.exit_code == 143
    assert raised.value.recorded == "run r recorded as interrupted"
    assert recorded == [Interruption(signal.SIGTERM, "demo2", "demo2: restoring 20261122-010000F")]
    assert recorded[0].reason("demo2") == "interrupted by SIGTERM during restoring 20261122-010000F; nothing proven"
    assert recorded[0].reason("demo3") == NOT_STARTED
    assert signal.getsignal(signal.SIGTERM) is before
    assert capfd.readouterr().err == ("restoreproof: already stopping (SIGTERM): removing this run's targets and "
                                      "recording what it did (SIGKILL would leave them to `restoreproof reap`)\n")


def test_a_run_that_ends_without_a_signal_records_nothing():
    with Interruptible(lambda: (None, None), lambda _: pytest.fail("recorded")):
        pass


def test_a_failing_record_still_ends_with_the_signal_and_says_so():
    def record(_: Interruption) -> str:
        raise OSError("disk full")

    with pytest.raises(Interrupted) as raised, Interruptible(lambda: (None, None), record):
        raise KeyboardInterrupt  # Python's own Ctrl-C: SIGINT
    assert raised.value.exit_code == 130 and signal_of(raised.value) == signal.SIGINT
    assert raised.value.recorded == "the run was not recorded as interrupted (OSError: disk full)"


def test_a_second_ctrl_c_during_cleanup_waits_until_it_is_done():
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), deferred_signals():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the signal is handled meanwhile, and held
        done.append("removed")
    assert done == ["removed"]
    with deferred_signals(raise_held=False):  # already unwinding from the first: the second is dropped
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class SignalledTarget(MemoryTarget):
    """A target whose removal is hit by a second Ctrl-C halfway: it must still finish."""

    def close(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        self.closed += 1


class SignalledProvider(MemoryProvider):
    def provision(self, run_id: str, database: str, repo_host_path: str) -> MemoryTarget:
        self.targets.append(SignalledTarget())
        return self.targets[-1]


def test_a_second_ctrl_c_while_the_target_is_removed_does_not_leave_it(tmp_path):
    from verification.pipeline import verify_database

    provider = SignalledProvider()
    with pytest.raises(KeyboardInterrupt):
        verify_database(ExplodingEngine(Interrupted(signal.SIGINT)), complete_plan(), provider, "run", "/repo",
                        Evidence(tmp_path / "demo1"))
    assert provider.targets[0].closed == 1


def stored(settings: Any, run_id: str) -> tuple[Any, dict[str, tuple[str, list[str]]]]:
    from verification.results import ResultStore

    store = ResultStore(settings.results_database_url)
    try:
        run, entries = store.run_with_reports(run_id)
    finally:
        store.close()
    return run, {e.database: (str(e.verdict), e.reasons) for e in entries}


def test_an_interrupted_run_keeps_what_was_decided_and_no_database_passes_unproven(captured_repo, tmp_path):
    from verification import pipeline

    settings = settings_for(tmp_path)
    discovery = pipeline.discover(settings, pipeline.RunRequest(str(three_stanzas(captured_repo)), "postgres"),
                                  "cut", START)
    record_passed(settings, "cut", "demo1", discovery.generation)

    said = pipeline.end_interrupted(settings, "cut", Interruption(signal.SIGINT, "demo2",
                                                                  "demo2: restoring 20261122-010000F"))

    run, verdicts = stored(settings, "cut")
    assert run.finished_at is not None and run.verdict == "error"
    assert run.host["interrupted"] == "interrupted by SIGINT during demo2"
    assert verdicts == {
        "demo1": ("passed", ["ok"]),  # decided before the signal: kept as it was
        "demo2": ("error", ["interrupted by SIGINT during restoring 20261122-010000F; nothing proven"]),
        "demo3": ("error", ["not started: the run was interrupted"]),
    }
    report_path = tmp_path / "reports" / "cut" / "report.json"
    assert said == (f"run cut recorded as interrupted by SIGINT during demo2 (error, 1 database(s) finished before "
                    f"it); report {report_path}")
    report = json.loads(report_path.read_text())
    assert report["verdict"] == "error"
    assert [(d["database"], d["verdict"]) for d in report["databases"]] == [
        ("demo1", "passed"), ("demo2", "error"), ("demo3", "error")]
    assert ("the run was interrupted by SIGINT during demo2: the databases it had not finished are errors, none "
            "proven") in report["warnings"]
    assert "interrupted" not in report["host"]
    assert (tmp_path / "reports" / "cut" / "report.html").is_file()
    # Closed once: a second recording changes nothing.
    assert pipeline.end_interrupted(settings, "cut", Interruption(signal.SIGTERM, None, None)) == (
        "run cut was recorded as error before the signal")


def test_a_run_interrupted_before_the_store_had_it_records_nothing(tmp_path: Path):
    from verification import pipeline

    said = pipeline.end_interrupted(settings_for(tmp_path), "never", Interruption(signal.SIGINT, None, None))
    assert said == "nothing was recorded: the run was interrupted before the results store had it"


def test_sigterm_while_the_reports_are_written_leaves_them_whole_and_signed(tmp_path, monkeypatch):
    """A scheduler's SIGTERM after the run is closed in the store, as its reports are written: the page
    already says "Evidence: signed"; the manifest and its signature must be there too."""
    from typer.testing import CliRunner

    import verification.evidence.bundle as bundle
    from tests.conftest import MSSQL_CORPUS
    from verification.cli import app

    folder = MSSQL_CORPUS / "singlerestore"
    if not folder.exists():
        pytest.skip(f"the SQL Server backup corpus is not at {MSSQL_CORPUS}")
    original = bundle.write_bundle

    def terminated_first(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)

    monkeypatch.setattr(bundle, "write_bundle", terminated_first)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("RESTOREPROOF_PREDICTION__PROBES", "never")
    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    ran = CliRunner().invoke(app, ["verify", str(folder), "--target", "offline", "--report-dir", str(tmp_path / "r")])
    assert ran.exit_code == 143, ran.output
    (run_dir,) = [p for p in (tmp_path / "r").iterdir() if (p / "report.html").exists()]
    assert "Evidence: signed." in (run_dir / "report.html").read_text()
    assert (run_dir / "manifest.json").exists() and (run_dir / "manifest.sig").exists(), sorted(
        p.name for p in run_dir.iterdir())


def test_a_handler_python_cannot_put_back_is_left_alone(monkeypatch):
    # getsignal() says None for a handler C code installed: replacing it could never be undone.
    replaced: list[int] = []
    monkeypatch.setattr(signal, "getsignal", lambda signum: None)
    monkeypatch.setattr(signal, "signal", lambda signum, handler: replaced.append(signum))
    with deferred_signals():
        pass
    assert replaced == []
