"""report.json: the run as data, made from the domain results into the typed report (report_model).

This module alone turns results into report entries and entries into JSON; the schema is generated
from the models (`restoreproof schema`, docs/report-schema.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from importlib import resources
from typing import Any

from verification.model import (
    BackupSet,
    Chain,
    CheckResult,
    DatabaseResult,
    IncompleteUpload,
    PhaseTiming,
    RunResult,
    UnreadableFile,
    Verdict,
    overall_verdict,
)
from verification.report_model import (
    SCHEMA_VERSION,
    BackupEntry,
    BackupFileEntry,
    ChainEntry,
    CheckEntry,
    DatabaseEntry,
    NotVerified,
    PhaseEntry,
    RestorePointEntry,
    RunReport,
    VersionsEntry,
)

__all__ = ["SCHEMA_VERSION", "build_report", "database_entry", "dumps", "generated_schema", "run_report"]

SCHEMA_ID = "https://restoreproof.invalid/report.schema.json"
SCHEMA_DESCRIPTION = (
    "One verification run. Version 1.14 (1.0 plus the optional unreadable and not_verified lists in 1.1/1.2, "
    "per-phase predictions, prediction, objectives and drift in 1.3, chain defects and unread-file kinds "
    "not-a-backup/excluded in 1.4, a schema generated from the typed report model in 1.5, check kinds and "
    "SQL Server header facts in 1.6, the configuration's warnings, incomplete_uploads and chain unread in 1.7, "
    "a database's wall_seconds in 1.8, a backup's encryption in 1.9, "
    "the chain status refused, chain timelines, a database's identity and overridden settings, and drift's "
    "series kind and minimums in 1.10, the unread-file kind permission in 1.11, the WAL range's segment_bytes "
    "in 1.12, a database's versions (what wrote the backup, what restored it) in 1.13, a SQL Server backup's "
    "position in its file, its writer and whether that layout is proven, and the unread-file kind unsupported "
    "in 1.14); see "
    "docs/report-schema.md for the meaning of every field and the versioning rules.")


def backup_entry(backup: BackupSet) -> BackupEntry:
    return BackupEntry(
        label=backup.label, path=backup.path, type=backup.type, start=backup.start, finish=backup.finish,
        size_bytes=backup.size_bytes, repo_size_bytes=backup.repo_size_bytes, references=list(backup.references),
        start_wal=backup.start_wal, stop_wal=backup.stop_wal, start_lsn=backup.start_lsn, stop_lsn=backup.stop_lsn,
        first_lsn=backup.first_lsn, last_lsn=backup.last_lsn, family=backup.family,
        recovery_model=backup.recovery_model, copy_only=backup.copy_only, damaged=backup.damaged,
        compatibility_level=backup.compatibility_level, collation=backup.collation,
        database_files=[BackupFileEntry(logical_name=f.logical_name, type=f.type, size_bytes=f.size_bytes,
                                        file_id=f.file_id, filegroup=f.filegroup)
                        for f in backup.database_files] or None,
        encryption=backup.encryption, position=backup.position, writer=backup.writer,
        layout_proven=backup.layout_proven)


def phase_entry(phase: PhaseTiming) -> PhaseEntry:
    return PhaseEntry(name=phase.name, status=phase.status,
                      seconds=round(phase.seconds, 3) if phase.seconds is not None else None,
                      bytes=phase.bytes, started_at=phase.started_at, details=phase.details)


def check_entry(check: CheckResult) -> CheckEntry:
    return CheckEntry(name=check.name, status=check.status, required=check.required, kind=check.kind,
                      summary=check.summary,
                      findings=check.findings, details=check.details, evidence=check.evidence)


def chain_entry(chain: Chain) -> ChainEntry:
    return ChainEntry(status=chain.status, backups=[backup_entry(b) for b in chain.backups], wal=chain.wal,
                      problems=chain.problems, rules=chain.rules, defects=chain.defects,
                      unread=chain.unread, timelines=chain.timelines, timeline=chain.timeline,
                      timeline_choice=chain.timeline_choice)


def database_entry(result: DatabaseResult) -> DatabaseEntry:
    """A database's entry without prediction, objectives and drift (prediction adds those)."""
    recovery = result.recovery_seconds
    return DatabaseEntry(
        database=result.database, identity=result.identity, verdict=result.verdict, reasons=result.reasons,
        restore_point=RestorePointEntry(target=result.restore_point.target, achieved=result.restore_point.achieved,
                                        detail=result.restore_point.detail),
        recovery_seconds=round(recovery, 3) if recovery is not None else None,
        wall_seconds=round(result.wall_seconds, 3) if result.wall_seconds is not None else None,
        chain=chain_entry(result.plan.chain), phases=[phase_entry(p) for p in result.phases],
        checks=[check_entry(c) for c in result.checks], target=result.target, evidence=result.evidence,
        versions=(VersionsEntry(backup=result.plan.written_by, target=result.target_versions)
                  if result.plan.written_by or result.target_versions else None),
        overridden_settings=list(result.overridden_settings))


def run_report(*, run_id: str, engine: str, source: str, target_kind: str | None, started_at: datetime,
               finished_at: datetime | None, host: dict[str, Any], databases: Sequence[DatabaseEntry],
               unreadable: Sequence[UnreadableFile], not_verified: Sequence[NotVerified] = (),
               warnings: Sequence[str] = (), incomplete_uploads: Sequence[IncompleteUpload] = ()) -> RunReport:
    """The run-level report around the databases' entries; its verdict follows from theirs."""
    verdicts = [d.verdict for d in databases]
    verdict = overall_verdict([str(v) for v in verdicts], [str(u.kind) for u in unreadable], bool(not_verified))
    return RunReport(run_id=run_id, engine=engine, source=source, target_kind=target_kind, started_at=started_at,
                     finished_at=finished_at, verdict=verdict,
                     summary={str(v): verdicts.count(v) for v in Verdict}, host=host,
                     databases=list(databases), unreadable=list(unreadable), not_verified=list(not_verified),
                     warnings=list(warnings), incomplete_uploads=list(incomplete_uploads))


def build_report(run: RunResult, entries: Sequence[DatabaseEntry] | None = None) -> RunReport:
    """The run's report; `entries` are the databases' entries when already made (and annotated with
    predictions, objectives and drift), else they are made here without those."""
    return run_report(
        run_id=run.run_id, engine=run.engine, source=run.source, target_kind=run.target_kind,
        started_at=run.started_at, finished_at=run.finished_at, host=run.host,
        databases=entries if entries is not None else [database_entry(d) for d in run.databases],
        unreadable=run.unreadable, incomplete_uploads=run.incomplete_uploads)


def report_data(report: RunReport) -> dict[str, Any]:
    """The report as JSON data (what report.json holds)."""
    return report.model_dump(mode="json")


def dumps(report: RunReport) -> str:
    # json.dumps over the JSON data, not pydantic's writer: the same bytes as every earlier version
    # (ASCII escapes, float spelling), so reports compare across versions.
    return json.dumps(report_data(report), indent=2, sort_keys=False) + "\n"


def generated_schema() -> dict[str, Any]:
    """report.schema.json as the models define it (draft 2020-12)."""
    schema = RunReport.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            **{k: v for k, v in schema.items() if k != "description"}, "description": SCHEMA_DESCRIPTION}


def schema_text() -> str:
    return json.dumps(generated_schema(), indent=2) + "\n"


def report_schema() -> dict[str, Any]:
    """The checked-in report.schema.json (kept equal to `generated_schema` by a test)."""
    text = resources.files("verification.reports").joinpath("report.schema.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def validate_report(report: dict[str, Any]) -> RunReport:
    """The report read back as the typed model, after checking it against the published schema;
    raises jsonschema.ValidationError or pydantic.ValidationError."""
    import jsonschema

    jsonschema.validate(report, report_schema())
    return RunReport.model_validate(report)
