"""Small builders for domain objects used by several unit tests."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from verification.engines.base import RestoreOutcome
from verification.model import (
    BackupSet,
    BackupType,
    Chain,
    ChainStatus,
    CheckResult,
    CheckStatus,
    PhaseStatus,
    PhaseTiming,
    Problem,
    RestorePlan,
    RuleCheck,
    WalRange,
)
from verification.report_model import DatabaseEntry, RunReport
from verification.targets.lease import Holder, process_identity, worker_name
from verification.targets.local import leftovers_dir

T0 = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)


def backup(label: str = "20261122-010000F", kind: BackupType = BackupType.FULL) -> BackupSet:
    return BackupSet(database="demo1", label=label, type=kind, start=T0, finish=T0, size_bytes=1000,
                     repo_size_bytes=100, path=f"backup/demo1/{label}")


def complete_plan() -> RestorePlan:
    full = backup()
    chain = Chain(ChainStatus.COMPLETE, [full], [], [RuleCheck("referenced-backups-present", True, "1 of 1")],
                  WalRange(1, "000000010000000000000002", "000000010000000000000003", 2, "the end of the archive"))
    return RestorePlan("postgres", "demo1", chain, None, full)


def broken_plan() -> RestorePlan:
    plan = complete_plan()
    plan.chain.status = ChainStatus.BROKEN
    plan.chain.problems.append(Problem("missing-wal", "missing 000000010000000000000003",
                                       ("000000010000000000000003",)))
    return plan


def passed_check(name: str = "pg_amcheck") -> CheckResult:
    return CheckResult(name, CheckStatus.PASSED, "no corruption")


def online_outcome(*checks: CheckResult) -> RestoreOutcome:
    return RestoreOutcome(
        phases=[PhaseTiming("provision", PhaseStatus.MEASURED, seconds=1.0),
                PhaseTiming.absent("zeroing", "none on PostgreSQL"),
                PhaseTiming("transfer", PhaseStatus.MEASURED, seconds=2.0, bytes=1000)],
        checks=list(checks), achieved=T0, online=True,
        proofs=["redo done at 0/3000088, in 000000010000000000000003, the last planned segment"])


def typed_report(data: dict[str, Any]) -> RunReport:
    """A report.json's data as the typed report every reader takes (validated as a reader would)."""
    return RunReport.model_validate(data)


def typed_database(data: dict[str, Any]) -> DatabaseEntry:
    return DatabaseEntry.model_validate(data)


def history_entry(database: str, key: dict[str, str], phases: list[dict[str, Any]]) -> DatabaseEntry:
    """An earlier run's entry as calibration reads it: its key, its measured phases and what each moved;
    the rest filled with what any passed entry holds."""
    prediction = {"mode": "cold", "runs": 0, "key": key, "recovery_seconds": 0.0, "probes": []}
    planned = {"inputs": "", "rates": {}, "calibrated": False, "runs": 0, "bytes_read": None, "bytes_written": None}
    return DatabaseEntry.model_validate({
        "database": database, "verdict": "passed", "reasons": ["passed"],
        "restore_point": {"target": "latest", "achieved": None},
        "chain": {"status": "complete", "backups": [], "problems": []}, "checks": [], "prediction": prediction,
        "phases": [{"bytes": None, **p, **({"prediction": {**planned, **p["prediction"]}} if "prediction" in p else {})}
                   for p in phases]})


def dead_holder(host: str | None = None) -> Holder:
    """The holder a worker killed on this host leaves in its labels and lease: a real process of this
    host that ran (its pid and start time read from /proc while it lived) and is gone."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        holder = Holder(host or worker_name(), child.pid, process_identity(child.pid))
    finally:
        child.kill()
        child.wait()
    return holder


def leftover_record(state_dir: Path, run_id: str, holder: Holder | None, database: str = "demo2") -> Path:
    """A local leftover (a target's folder and its state record) as a worker leaves it when killed."""
    folder = Path(tempfile.mkdtemp(prefix=f"restoreproof-{run_id}-", dir=state_dir))
    (folder / "data").mkdir()
    records = leftovers_dir(state_dir)
    records.mkdir(parents=True, exist_ok=True)
    owner: dict[str, Any] = holder.record() if holder is not None else {"pid": 1}
    (records / f"{folder.name}.json").write_text(json.dumps({"run_id": run_id, "database": database,
                                                             "folder": str(folder), **owner}))
    return folder
