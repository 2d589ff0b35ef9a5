"""Small builders for domain objects used by several unit tests."""

from __future__ import annotations

from datetime import UTC, datetime
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
