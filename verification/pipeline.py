"""discover -> plan -> provision -> restore -> check -> record -> report.

The one code path behind the CLI and the Airflow DAGs. Each database gets its own disposable
target, removed in a `finally` whatever happens (failure, Ctrl-C, SIGTERM turned into
KeyboardInterrupt by the CLI); a SIGKILLed run leaves labelled leftovers for `restoreproof reap`.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from verification import __version__
from verification.config import Settings
from verification.engines.base import Engine, Evidence, RestoreOutcome, SourcePlan
from verification.errors import RestoreproofError, SourceError, TargetError
from verification.model import (
    ChainStatus,
    CheckResult,
    CheckStatus,
    DatabaseResult,
    RestorePlan,
    RestorePoint,
    RunResult,
    Verdict,
)
from verification.prediction.context import PredictionContext
from verification.prediction.phase_model import Prediction
from verification.redaction import Redactor
from verification.reports import build_report, write_reports
from verification.reports.json_report import database_json
from verification.restore_points import PointChoice
from verification.results import ResultStore
from verification.sources import LocalSource
from verification.sources.base import Source
from verification.targets.base import Target, TargetProvider
from verification.targets.labels import new_run_id, slug
from verification.verdict import decide

ProgressFn = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _redacting(progress: ProgressFn, redact: Redactor) -> ProgressFn:
    return lambda message: progress(redact(message))


def engines(settings: Settings) -> dict[str, Engine]:
    from verification.engines.mssql.engine import MssqlEngine
    from verification.engines.postgres.engine import PostgresEngine

    return {"postgres": PostgresEngine(settings), "mssql": MssqlEngine(settings)}


def open_source(path: str | Path) -> LocalSource:
    return LocalSource(path)


def select_engine(settings: Settings, source: Source, requested: str) -> Engine:
    available = engines(settings)
    if requested != "auto":
        engine = available[requested]
        if not engine.detect(source):
            # Let the engine's own discovery say precisely what is missing.
            engine.plan(source, None, None)
            raise SourceError(f"{source.describe()} holds no {engine.display_name} backups")
        return engine
    for engine in available.values():
        if engine.detect(source):
            return engine
    raise SourceError(f"{source.describe()} holds no backups restoreproof recognises "
                      "(expected a pgBackRest repository, backup/<stanza>/backup.info, or SQL Server backup files)")


def plan_source(settings: Settings, source_path: str | Path, engine_name: str = "auto",
                at: datetime | None = None, point: PointChoice | None = None) -> tuple[Engine, Source, SourcePlan]:
    source = open_source(source_path)
    engine = select_engine(settings, source, engine_name)
    return engine, source, engine.plan(source, at, point)




def host_facts() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "restoreproof": __version__}


class RedactingEvidence(Evidence):
    def __init__(self, folder: Path, redact: Redactor) -> None:
        super().__init__(folder)
        self.redact = redact

    def write(self, name: str, text: str) -> str:
        return super().write(name, self.redact(text))


def record_versions(engine: Engine, target: Target, evidence: Evidence) -> None:
    """Tool and image versions for the evidence bundle, from inside the target."""
    versions: dict[str, Any] = {"restoreproof": __version__, "python": platform.python_version(),
                                "target": target.describe(), **engine.tool_versions(target)}
    evidence.write("versions.json", json.dumps(versions, indent=2, default=str) + "\n")


def record_backup_hashes(source: Source, plan: RestorePlan, evidence: Evidence) -> None:
    """SHA-256 of every file the chain consists of, as `sha256sum -c` reads it."""
    from verification.evidence.backup_hashes import hash_source_files, render_sha256sums

    evidence.write("backup-files.sha256", render_sha256sums(hash_source_files(source, plan.files)))


def redact_result(result: DatabaseResult, redact: Redactor) -> None:
    """Everything of a database's result that is written anywhere (report, store, JUnit, metrics)."""
    redact.in_place(result, "reasons", "checks", "phases", "target")
    redact.in_place(result.restore_point, "detail")


def predict_quietly(context: PredictionContext, engine: Engine, plan: RestorePlan, target: Target,
                    source: Source | None, provider: TargetProvider | None, run_id: str, repo_host_path: str,
                    evidence: Evidence, progress: ProgressFn) -> Prediction | None:
    """The prediction, or None: a probe or model that fails must not cost the verification itself.
    The failure is kept as evidence and the report shows no prediction rather than a made-up one."""
    try:
        return context.predict(engine, plan, target, source, provider, run_id, repo_host_path)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        evidence.write("prediction-error.txt", traceback.format_exc())
        progress(f"{plan.database}: no prediction ({type(exc).__name__}: {exc})")
        return None


def stopped(partial: RestoreOutcome, reason: str) -> RestoreOutcome:
    """The outcome of a restore an exception stopped: what it had found, and why it stopped."""
    partial.errors.append(reason)
    return partial


def verify_database(engine: Engine, plan: RestorePlan, provider: TargetProvider | None, run_id: str,
                    repo_host_path: str, evidence: Evidence, progress: ProgressFn = _quiet, *,
                    context: PredictionContext | None = None, source: Source | None = None,
                    no_target: str | None = None) -> DatabaseResult:
    point = RestorePoint(target=plan.stop_at.isoformat() if plan.stop_at else "latest")
    result = DatabaseResult(plan.database, Verdict.ERROR, [], plan, point)
    outcome: RestoreOutcome | None = None
    if plan.chain.status is not ChainStatus.COMPLETE:
        progress(f"{plan.database}: chain broken, not restoring")
    elif provider is None:
        # Still decided: what the plan proved wrong (a known-bad backup) fails the database all the same.
        outcome = RestoreOutcome(errors=[f"not restored: {no_target or 'no target was available to restore into'}"])
    else:
        target = None
        # Filled by the engine as it goes: a failure it proved before an exception is still decided.
        partial = RestoreOutcome()
        try:
            progress(f"{plan.database}: provisioning a {provider.kind} target")
            target = provider.provision(run_id, plan.database, repo_host_path)
            result.target = target.describe()
            if context is not None:
                progress(f"{plan.database}: predicting each phase")
                result.prediction = predict_quietly(context, engine, plan, target, source, provider, run_id,
                                                    repo_host_path, evidence, progress)
                record_versions(engine, target, evidence)
            progress(f"{plan.database}: restoring {plan.target_backup.label if plan.target_backup else '?'}")
            outcome = engine.restore_and_check(plan, target, evidence, partial)
        except TargetError as exc:
            outcome = stopped(partial, f"target: {exc}")
        except RestoreproofError as exc:
            outcome = stopped(partial, str(exc))
        except Exception as exc:
            # A bug or an unexpected failure: this database gets "error" with the reason, the
            # others are still verified, and the traceback is kept as evidence.
            evidence.write("internal-error.txt", traceback.format_exc())
            outcome = stopped(partial, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            if target is not None:
                progress(f"{plan.database}: removing the target")
                try:
                    target.close()
                except Exception as exc:  # whatever stopped the removal, the next database is still verified
                    message = f"the target was not removed ({type(exc).__name__}: {exc}); `restoreproof reap` " \
                              "removes what is left"
                    progress(f"{plan.database}: {message}")
                    if outcome is not None:
                        outcome.errors.append(message)
    hashing = context is None or context.settings.evidence.hash_backups
    # Only what a restore read is hashed as its evidence.
    read = outcome is not None and provider is not None and plan.chain.status is ChainStatus.COMPLETE
    if read and not hashing and outcome is not None:
        outcome.checks.append(CheckResult("backup_hashes", CheckStatus.SKIPPED,
                                          "not run: disabled by the setting evidence.hash_backups: false",
                                          details={"disabled_by": "evidence.hash_backups"}, required=False))
    if read and source is not None and plan.files and hashing:
        # After the target is gone, and never in place of the verdict: a backup rewritten or
        # expired while it was hashed makes incomplete evidence, said as such, not a failed restore.
        progress(f"{plan.database}: hashing the {len(plan.files)} backup files read")
        try:
            record_backup_hashes(source, plan, evidence)
        except (RestoreproofError, OSError) as exc:
            evidence.write("backup-files.error.txt", f"the backup files could not all be hashed: {exc}\n")
            progress(f"{plan.database}: backup files not hashed: {exc}")
    if outcome is not None:
        result.phases, result.checks = outcome.phases, outcome.checks
        point.achieved, point.detail = outcome.achieved, outcome.achieved_detail
    result.verdict, result.reasons = decide(plan, outcome)
    result.evidence = dict(evidence.files)
    return result


@dataclass
class VerificationRun:
    run: RunResult
    report: dict[str, Any]
    run_dir: Path
    json_path: Path
    html_path: Path


def run_verification(settings: Settings, source_path: str | Path, *, engine_name: str | None = None,
                     at: datetime | None = None, target_kind: str | None = None, report_dir: Path | None = None,
                     run_id: str | None = None, progress: ProgressFn = _quiet,
                     databases: list[str] | None = None, point: PointChoice | None = None) -> VerificationRun:
    started = datetime.now(UTC)
    run_id = run_id or new_run_id(started)
    redact = Redactor(settings)
    progress = _redacting(progress, redact)
    progress(f"run {run_id}: reading {source_path}")
    engine, source, planned = plan_source(settings, source_path, engine_name or settings.engine, at, point)
    plans = planned.plans
    unreadable = list(planned.unreadable)
    if databases:
        unknown = sorted(set(databases) - {p.database for p in plans})
        if unknown:
            raise SourceError(f"{source.describe()} has no database {', '.join(unknown)} "
                              f"(it has: {', '.join(p.database for p in plans) or 'none'})")
        plans = [p for p in plans if p.database in databases]
        # Files of databases not asked for are theirs to answer for; unattributed files stay.
        unreadable = [u for u in unreadable if u.database is None or u.database in databases]
    run_dir = (report_dir or settings.report_dir) / run_id
    run = RunResult(run_id=run_id, engine=engine.name, source=source.describe(), started_at=started,
                    host=host_facts(), unreadable=unreadable)
    for unread in unreadable:
        progress(f"{unread.kind}: {unread.describe()}")
    provider, no_target = None, None
    if any(p.chain.status is ChainStatus.COMPLETE for p in plans):
        try:
            provider = engine.target_provider(target_kind or settings.target, plans)
            run.target_kind = provider.kind
        except TargetError as exc:
            # Every database is still planned and reported: a broken or known-bad chain is "failed"
            # without a server; the others are "error", not restored, with this reason.
            no_target = str(exc)
            progress(f"no target: {exc}")
    context = PredictionContext.load_or_cold(settings, engine.name, progress)
    entries = []
    for plan in plans:
        evidence = RedactingEvidence(run_dir / "evidence" / slug(plan.database), redact)
        result = verify_database(engine, plan, provider, run_id, source.describe(), evidence, progress,
                                 context=context, source=source, no_target=no_target)
        redact_result(result, redact)
        run.databases.append(result)
        entry = database_json(result)
        context.annotate_quietly(entry, result, run_id, started, progress)
        entries.append(redact.data(entry))
        progress(f"{plan.database}: {result.verdict}")
    run.finished_at = datetime.now(UTC)
    report = redact.data(build_report(run, entries))
    store = ResultStore(settings.results_database_url)
    try:
        store.record(run, run_dir, report)
        last_success = store.last_passed()
    finally:
        store.close()
    outputs = write_reports(report, run_dir, settings, last_success)
    for warning in outputs.warnings:
        progress(f"warning: {warning}")
    return VerificationRun(run, report, run_dir, outputs.json_path, outputs.html_path)
