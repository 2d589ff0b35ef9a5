"""report.json: the run as data. The schema is versioned (docs/report-schema.md, report.schema.json)."""

from __future__ import annotations

import json
from datetime import datetime
from importlib import resources
from typing import Any

from verification.model import (
    BackupSet,
    Chain,
    CheckResult,
    DatabaseResult,
    PhaseTiming,
    Problem,
    RunResult,
    overall_verdict,
)

SCHEMA_VERSION = "1.4"


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def backup_json(backup: BackupSet) -> dict[str, Any]:
    return {
        "label": backup.label, "path": backup.path, "type": str(backup.type),
        "start": _time(backup.start), "finish": _time(backup.finish),
        "size_bytes": backup.size_bytes, "repo_size_bytes": backup.repo_size_bytes,
        "references": list(backup.references),
        "start_wal": backup.start_wal, "stop_wal": backup.stop_wal,
        "start_lsn": backup.start_lsn, "stop_lsn": backup.stop_lsn,
        "first_lsn": backup.first_lsn, "last_lsn": backup.last_lsn, "family": backup.family,
    }


def phase_json(phase: PhaseTiming) -> dict[str, Any]:
    return {"name": phase.name, "status": str(phase.status),
            "seconds": round(phase.seconds, 3) if phase.seconds is not None else None,
            "bytes": phase.bytes, "started_at": _time(phase.started_at), "details": phase.details}


def check_json(check: CheckResult) -> dict[str, Any]:
    return {"name": check.name, "status": str(check.status), "required": check.required, "summary": check.summary,
            "findings": check.findings, "details": check.details, "evidence": check.evidence}


def problem_json(problem: Problem) -> dict[str, Any]:
    return {"code": problem.code, "message": problem.message, "files": list(problem.files),
            "expected_lsn": problem.expected_lsn, "found_lsn": problem.found_lsn}


def chain_json(chain: Chain) -> dict[str, Any]:
    return {
        "status": str(chain.status),
        "backups": [backup_json(b) for b in chain.backups],
        "wal": None if chain.wal is None else {
            "timeline": chain.wal.timeline, "first": chain.wal.first, "last": chain.wal.last,
            "segments": chain.wal.segments, "bound": chain.wal.bound},
        "problems": [problem_json(p) for p in chain.problems],
        "rules": [{"rule": r.rule, "passed": r.passed, "detail": r.detail} for r in chain.rules],
        "defects": [problem_json(p) for p in chain.defects],
    }


def database_json(result: DatabaseResult) -> dict[str, Any]:
    return {
        "database": result.database,
        "verdict": str(result.verdict),
        "reasons": result.reasons,
        "restore_point": {"target": result.restore_point.target,
                          "achieved": _time(result.restore_point.achieved),
                          "detail": result.restore_point.detail},
        "recovery_seconds": round(result.recovery_seconds, 3) if result.recovery_seconds is not None else None,
        "chain": chain_json(result.plan.chain),
        "phases": [phase_json(p) for p in result.phases],
        "checks": [check_json(c) for c in result.checks],
        "target": result.target,
        "evidence": result.evidence,
    }


def report_envelope(*, run_id: str, engine: str, source: str, target_kind: str | None, started_at: datetime | None,
                    finished_at: datetime | None, host: dict[str, Any], databases: list[dict[str, Any]],
                    unreadable: list[dict[str, str | None]], not_verified: list[dict[str, str]] | None = None
                    ) -> dict[str, Any]:
    """The run-level report around the databases' entries."""
    verdicts = [d["verdict"] for d in databases]
    not_verified = not_verified or []
    verdict = str(overall_verdict(verdicts, [str(u["kind"]) for u in unreadable], bool(not_verified)))
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "engine": engine,
        "source": source,
        "target_kind": target_kind,
        "started_at": _time(started_at),
        "finished_at": _time(finished_at),
        "verdict": verdict,
        "summary": {v: verdicts.count(v) for v in ("passed", "failed", "error")},
        "host": host,
        "databases": databases,
        "unreadable": unreadable,
        "not_verified": not_verified,
    }


def build_report(run: RunResult, entries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The run's report; `entries` are the databases' entries when already made (and annotated with
    predictions, objectives and drift), else they are made here without those."""
    return report_envelope(
        run_id=run.run_id, engine=run.engine, source=run.source, target_kind=run.target_kind,
        started_at=run.started_at, finished_at=run.finished_at, host=run.host,
        databases=entries if entries is not None else [database_json(d) for d in run.databases],
        unreadable=[u.as_json() for u in run.unreadable])


def report_schema() -> dict[str, Any]:
    text = resources.files("verification.reports").joinpath("report.schema.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def validate_report(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError when the report does not match its schema."""
    import jsonschema

    jsonschema.validate(report, report_schema())


def dumps(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"
