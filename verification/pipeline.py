"""discover -> plan -> provision -> restore -> check -> record -> report.

The one code path behind the CLI and the Airflow DAGs. Each database gets its own disposable
target, removed in a `finally` whatever happens (failure, Ctrl-C, SIGTERM turned into
KeyboardInterrupt by the CLI). A SIGKILLed run cannot: what it started is labelled with its run and
its process, its lease in the store stops being renewed, and the next run's start (or `restoreproof
reap`) removes what it left, records its killed databases as "error" and closes it (end_dead_runs).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verification import __version__
from verification.checks.suites import check_all, unknown_databases
from verification.config import Settings
from verification.engines.alongside import Alongside
from verification.engines.base import DataChecks, Engine, Evidence, RestoreOutcome, SourcePlan
from verification.errors import (
    RestoreproofError,
    RunFinishedError,
    SourceError,
    StaleDiscoveryError,
    StoreUnavailableError,
    TargetError,
)
from verification.interrupts import Interruptible, Interruption, deferred_signals
from verification.leases import LeaseKeeper, Sweep, ended_task_leases, sweep
from verification.model import (
    ChainStatus,
    CheckName,
    CheckResult,
    CheckStatus,
    DatabaseIdentity,
    DatabaseResult,
    IncompleteUpload,
    PhaseName,
    PhaseTiming,
    PhaseWork,
    RestorePlan,
    RestorePoint,
    RunResult,
    UnreadableFile,
    UnreadableKind,
    Verdict,
    identity_of,
)
from verification.phase_events import BACKUP_FILES, RESTORE_AND_CHECKS, phase
from verification.prediction.context import PredictionContext
from verification.prediction.phase_model import Prediction
from verification.prediction.upfront import announce_prediction, restore_seconds
from verification.redaction import Redactor
from verification.report_model import DatabaseEntry, NotVerified, RunReport
from verification.reports import ReportOutputs, write_reports
from verification.reports.folder import check_report_folder
from verification.reports.json_report import database_entry, run_report
from verification.restore_points import PointChoice
from verification.results import ResultStore
from verification.results.store import (
    DISCOVERY,
    DUE,
    INCOMPLETE_UPLOADS,
    PLANNED_OBJECTS,
    UNREADABLE,
    RunRow,
    in_rotation,
    unreadable_of,
    uploads_of,
)
from verification.sources import LocalSource
from verification.sources.base import Source
from verification.sources.s3_url import is_s3_url
from verification.targets.access import unreadable_at_plan, unreadable_by
from verification.targets.base import ResourceLimited, Target, TargetProvider
from verification.targets.labels import new_run_id, slug
from verification.targets.lease import Killed, describe_phase, this_process, utc_text
from verification.verdict import OFFLINE_REASON, decide

if TYPE_CHECKING:
    from verification.evidence.backup_hashes import FileHash
    from verification.sources.staging import StagedCopy, Stager

ProgressFn = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _redacting(progress: ProgressFn, redact: Redactor) -> ProgressFn:
    return lambda message: progress(redact(message))


def engines(settings: Settings) -> dict[str, Engine]:
    from verification.engines.mssql.engine import MssqlEngine
    from verification.engines.postgres.engine import PostgresEngine

    return {"postgres": PostgresEngine(settings), "mssql": MssqlEngine(settings)}


def open_source(path: str | Path, settings: Settings | None = None) -> Source:
    """The source a path names: an s3://bucket/prefix URL (catalogued once, here) or a folder."""
    if isinstance(path, str) and is_s3_url(path):
        from verification.sources.s3 import S3Source  # boto3 is loaded only for an S3 source

        return S3Source(path, (settings or Settings()).s3)
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


# The configured targets that restore into Docker (`auto` restores into Docker only).
DOCKER_TARGETS = ("auto", "docker")


def plan_source(settings: Settings, source_path: str | Path, engine_name: str = "auto",
                at: datetime | None = None, point: PointChoice | None = None,
                target: str | None = None) -> tuple[Engine, Source, SourcePlan]:
    """The source opened, its engine chosen, and every database planned; the plan's unread files include
    the objects of object storage no engine could read (see objects_not_read). With the `target` a run
    will restore into, what the configuration asks that the engine cannot do is refused first (a
    ConfigError naming the setting), before anything is planned, recorded or started."""
    source = open_source(source_path, settings)
    engine = select_engine(settings, source, engine_name)
    if target is not None:
        engine.check_settings(source, target)
    planned = engine.plan(source, at, point)
    planned.unreadable += objects_not_read(source, planned)
    if target is None and settings.target in DOCKER_TARGETS and isinstance(source, LocalSource):
        # Only a plan (a run's targets say it themselves, as they start), and only where the configured
        # target is Docker's: what it will not be allowed to read, said before anything is restored.
        planned.unreadable += unreadable_at_plan(source.root, planned.plans)
    return engine, source, planned


def objects_not_read(source: Source, planned: SourcePlan) -> list[UnreadableFile]:
    """The objects of object storage that cannot be read as files, each named with why, beside what the
    engine named itself: keys that are no path (an empty, '.' or '..' segment), and objects in an
    archive storage class with no restored copy. Either may be a backup nobody read: the run cannot
    pass. An archived object goes with the database whose plan needs it (that database is "error");
    one no plan needs is the run's."""
    prefix = str(getattr(source, "prefix", ""))
    found = [UnreadableFile(key.removeprefix(prefix), UnreadableKind.UNADDRESSABLE,
                            f"{source.describe().rstrip('/')}/{key.removeprefix(prefix)}: an object whose key is not "
                            "a path (an empty, '.' or '..' segment) cannot be read as a backup file; rename it to "
                            "have it verified")
             for key in getattr(source, "skipped", [])]
    archived: dict[str, str] = getattr(source, "archived", {})
    named = {unread.path for unread in planned.unreadable}
    owners: dict[str, str] = {}
    for plan in planned.plans:
        for path in plan.files:
            owners.setdefault(path, plan.database)
    found += [UnreadableFile(path, UnreadableKind.ARCHIVED, why, owners.get(path))
              for path, why in sorted(archived.items()) if path not in named]
    return found


# How many of a plan's archived objects its reason names one by one (all are in the run's unread files).
ARCHIVED_NAMED = 5


def archived_in_plan(source: Source, plan: RestorePlan) -> str | None:
    """Why the plan cannot be restored now: the objects it needs that are archived and not restored
    (each named with its storage class), or None."""
    archived: dict[str, str] = getattr(source, "archived", {})
    needed = [archived[path] for path in plan.files if path in archived]
    if not needed:
        return None
    more = f"; and {len(needed) - ARCHIVED_NAMED} more" if len(needed) > ARCHIVED_NAMED else ""
    return (f"not restored: {len(needed)} object(s) the plan needs cannot be read now, being in an archive storage "
            f"class: " + "; ".join(needed[:ARCHIVED_NAMED]) + more)




def host_facts() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "restoreproof": __version__}


class RedactingEvidence(Evidence):
    def __init__(self, folder: Path, redact: Redactor) -> None:
        super().__init__(folder)
        self.redact = redact

    def mask(self, text: str) -> str:
        return super().mask(self.redact(text))


def record_versions(engine: Engine, target: Target, evidence: Evidence, plan: RestorePlan) -> dict[str, str]:
    """Tool and image versions for the evidence bundle, from inside the target, beside what wrote the
    backup (as its own files record it); returns the target's products' versions, for the report."""
    tools = engine.tool_versions(target)
    versions: dict[str, Any] = {"restoreproof": __version__, "python": platform.python_version(),
                                "written_by": plan.written_by, "target": target.describe(), **tools}
    evidence.write("versions.json", json.dumps(versions, indent=2, default=str) + "\n")
    return engine.product_versions(tools)


def record_backup_hashes(source: Source, plan: RestorePlan, evidence: Evidence,
                         hashed: list[FileHash] | None = None) -> None:
    """SHA-256 of every file the chain consists of, as `sha256sum -c` reads it (`hashed`: the hashes
    already taken alongside the restore, else they are taken now)."""
    from verification.evidence.backup_hashes import hash_source_files, render_sha256sums

    evidence.write("backup-files.sha256", render_sha256sums(hashed if hashed is not None
                                                             else hash_source_files(source, plan.files)))


def hash_alongside(source: Source, plan: RestorePlan, stop: threading.Event) -> Alongside[list[FileHash]]:
    """The backup files' hashes, taken while the restore reads the same files: both only read them,
    and the hashing needs no server. Every byte is still read by restoreproof itself (not taken from
    pgBackRest's manifest), so backup-files.sha256 says the same as when it was hashed after."""
    from verification.evidence.backup_hashes import hash_source_files

    return Alongside("backup-hashes", lambda: hash_source_files(source, plan.files, stop=stop))


def redact_result(result: DatabaseResult, redact: Redactor) -> None:
    """Everything of a database's result that is written anywhere (report, store, JUnit, metrics)."""
    redact.in_place(result, "reasons", "checks", "phases", "target")
    redact.in_place(result.restore_point, "detail")


def predict_quietly(context: PredictionContext, engine: Engine, plan: RestorePlan, target: Target,
                    source: Source | None, provider: TargetProvider | None, run_id: str, repo_host_path: str,
                    evidence: Evidence, progress: ProgressFn, extra: Sequence[PhaseWork] = ()) -> Prediction | None:
    """The prediction, or None: a probe or model that fails must not cost the verification itself.
    The failure is kept as evidence and the report shows no prediction rather than a made-up one.
    `extra`: what the phases the pipeline runs itself (the download) will move."""
    try:
        return context.predict(engine, plan, target, source, provider, run_id, repo_host_path, extra)
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


def check_backup_files(engine: Engine, plan: RestorePlan, source: Source | None, evidence: Evidence,
                       progress: ProgressFn) -> RestoreOutcome:
    """The engine's checks of the backup files, needing no server, as the start of the outcome."""
    outcome = RestoreOutcome()
    if source is None:
        return outcome
    progress(f"{plan.database}: checking the backup files without a server")
    try:
        with phase(plan.database, BACKUP_FILES):
            outcome.checks += engine.check_backup_files(plan, source, evidence)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a bug must not pass for a clean file, nor stop the restore
        evidence.write("internal-error-backup-files.txt", traceback.format_exc())
        outcome.errors.append(f"checking the backup files stopped: internal error: {type(exc).__name__}: {exc}")
    return outcome


def planned_point(plan: RestorePlan) -> str:
    """The point a plan restores, as its report names it (RestorePoint.target): "latest" or the moment."""
    return plan.stop_at.isoformat() if plan.stop_at else "latest"


def data_checks_for(settings: Settings, store: ResultStore, identity: DatabaseIdentity,
                    point: str) -> DataChecks | None:
    """The data checks of one database: its suites, and the baseline of the last passed verification of
    the same database (its identity) to a comparable point (results.identity): a verification of an
    earlier point is never held to the latest point's row counts, nor a stanza to another source's."""
    if not settings.checks.enabled:
        return None
    from verification.checks.baseline import BaselineBasis, previous_baseline
    from verification.checks.runner import DataCheckRunner
    from verification.checks.suites import load_suites

    database = identity.name
    stored = store.last_passed_baseline(identity, point)
    basis = (BaselineBasis(point) if stored is None else BaselineBasis(point, stored.run_id, stored.matched))
    return DataCheckRunner(settings, database, load_suites(settings.checks, database),
                           previous_baseline(stored.details if stored else None),
                           settings.rpo.for_database(database), basis)


# Why a restore from a folder has no download.
READ_IN_PLACE = ("the target reads the source in place (a folder mounted, or object storage read by the tool in "
                 "the target): nothing is downloaded first")


@dataclass
class Staging:
    """A restore's staged copy of object storage (None where it could not be made, and why)."""

    copy: StagedCopy | None
    phase: PhaseTiming
    error: str | None = None

    def work(self) -> list[PhaseWork]:
        """What the download moved, as the phase model predicts from it: its bytes, from the listing."""
        if self.copy is None:
            return []
        copy = self.copy
        return [PhaseWork(PhaseName.DOWNLOAD, copy.bytes, copy.bytes, parallel=copy.threads, files=len(copy.files),
                          note=f"{len(copy.files)} objects of {copy.source_url} downloaded, {copy.threads} at once")]


def stage_plan(stager: Stager, plan: RestorePlan, run_id: str, evidence: Evidence,
               progress: ProgressFn) -> Staging:
    """The plan's files staged, or why not: an object changed, gone or not matching its checksum since
    the plan was made is this database's error (never a verdict on the backups), naming the object."""
    try:
        with phase(plan.database, PhaseName.DOWNLOAD):
            copy = stager.stage(plan.files, run_id, plan.database, progress)
    except KeyboardInterrupt:
        raise
    except RestoreproofError as exc:
        reason = f"the backup files were not staged from {stager.source.describe()}: {exc}"
    except Exception as exc:  # a full disk, a bug: this database's error, the others still verified
        evidence.write("internal-error-staging.txt", traceback.format_exc())
        reason = f"the backup files were not staged from {stager.source.describe()}: {type(exc).__name__}: {exc}"
    else:
        progress(f"{plan.database}: staged {len(copy.files)} objects ({copy.bytes / 2**20:.1f} MiB) in "
                 f"{copy.seconds:.1f} s")
        return Staging(copy, copy.phase())
    progress(f"{plan.database}: {reason}")
    return Staging(None, PhaseTiming.not_reached(PhaseName.DOWNLOAD, reason), reason)


def verify_database(engine: Engine, plan: RestorePlan, provider: TargetProvider | None, run_id: str,
                    repo_host_path: str, evidence: Evidence, progress: ProgressFn = _quiet, *,
                    context: PredictionContext | None = None, source: Source | None = None,
                    no_target: str | None = None, data_checks: DataChecks | None = None,
                    stager: Stager | None = None, changed: str | None = None,
                    watch: Callable[[list[str]], object] | None = None) -> DatabaseResult:
    """One database restored and checked. With a `stager` (a source in object storage), the plan's files
    are staged first and the target reads the staged copy (`repo_host_path` then unused), which is what
    the checks of the backup files and the evidence's hashes read too; it is removed at the end,
    whatever happened.

    `changed`: why the plan cannot be restored now (its objects changed since discovery, or some are
    archived and not restored): "error", and nothing staged or started. `watch`: where the target reads
    object storage itself (direct mode), the check that the plan's objects are still as listed (a
    SourceError naming each that is not), run before the target is provisioned and again after the
    restore."""
    if changed is not None:
        progress(f"{plan.database}: {changed}")
        point = RestorePoint(target=planned_point(plan))
        return DatabaseResult(plan.database, Verdict.ERROR, [changed], plan, point)
    began = time.monotonic()
    staging: Staging | None = None
    if plan.chain.status is ChainStatus.COMPLETE and provider is not None:
        staging = (stage_plan(stager, plan, run_id, evidence, progress) if stager is not None
                   else Staging(None, PhaseTiming.absent(PhaseName.DOWNLOAD, READ_IN_PLACE)))
    if staging is not None and staging.copy is not None and stager is not None:
        from verification.sources.staging import StagedSource

        source, repo_host_path = StagedSource(stager.source, staging.copy), str(staging.copy.root)
    try:
        result = _verify_database(engine, plan, provider, run_id, repo_host_path, evidence, progress,
                                  context=context, source=source, no_target=no_target, data_checks=data_checks,
                                  staging=staging, watch=watch)
    finally:
        if staging is not None and staging.copy is not None:
            progress(f"{plan.database}: removing the staged copy")
            try:
                with deferred_signals():  # a second Ctrl-C waits until the copy is gone
                    staging.copy.remove()
            except RestoreproofError as exc:  # the verdict stands; the reaper removes what is left
                progress(f"{plan.database}: {exc}")
                staging.phase.details["not_removed"] = str(exc)
    # Its phases' own seconds add up to more than this where some ran alongside others.
    result.wall_seconds = time.monotonic() - began
    return result


def _verify_database(engine: Engine, plan: RestorePlan, provider: TargetProvider | None, run_id: str,
                     repo_host_path: str, evidence: Evidence, progress: ProgressFn, *,
                     context: PredictionContext | None, source: Source | None, no_target: str | None,
                     data_checks: DataChecks | None, staging: Staging | None,
                     watch: Callable[[list[str]], object] | None = None) -> DatabaseResult:
    point = RestorePoint(target=planned_point(plan))
    result = DatabaseResult(plan.database, Verdict.ERROR, [], plan, point)
    hashing = context is None or context.settings.evidence.hash_backups
    hashes: Alongside[list[FileHash]] | None = None
    # Before any target: what the backup files show without a server fails a database that cannot be
    # restored here (a broken chain, no image) all the same, and is kept beside the restore's own checks.
    offline = check_backup_files(engine, plan, source, evidence, progress)
    if staging is not None and staging.copy is not None:
        copy = staging.copy
        offline.staged_copy = f"{len(copy.files)} objects staged from {copy.source_url}"
    outcome: RestoreOutcome | None = None
    if plan.chain.status is not ChainStatus.COMPLETE:
        progress(f"{plan.database}: chain {plan.chain.status}, not restoring")
        if offline.checks or offline.errors:
            outcome = offline
    elif provider is None:
        # Still decided: what the plan proved wrong (a known-bad backup) fails the database all the same.
        outcome = offline
        outcome.errors.insert(0, f"not restored: {no_target or 'no target was available to restore into'}")
    elif staging is not None and staging.error is not None:
        outcome = stopped(offline, staging.error)  # nothing to restore from: no target is started
    elif watch is not None and (moved := _moved(watch, plan)) is not None:
        outcome = stopped(offline, f"not restored: {moved}")  # the plan no longer holds: no target is started
    else:
        target = None
        versions: Alongside[dict[str, str]] | None = None
        # Filled by the engine as it goes: a failure it proved before an exception is still decided.
        partial = offline
        stop_hashing = threading.Event()
        try:
            if hashing and source is not None and plan.files:
                progress(f"{plan.database}: hashing the {len(plan.files)} backup files, alongside the restore")
                hashes = hash_alongside(source, plan, stop_hashing)
            if data_checks is not None:
                from verification.checks.runner import import_gx_alongside

                import_gx_alongside()  # seconds of imports, done by the time the server is online
            progress(f"{plan.database}: provisioning a {provider.kind} target")
            with phase(plan.database, PhaseName.PROVISION):
                target = provider.provision(run_id, plan.database, repo_host_path)
            result.target = target.describe()
            if (refused := unreadable_by(target, repo_host_path, plan.files)) is not None:
                raise TargetError(refused)
            if context is not None:
                progress(f"{plan.database}: predicting each phase")
                result.prediction = predict_quietly(context, engine, plan, target, source, provider, run_id,
                                                    repo_host_path, evidence, progress,
                                                    staging.work() if staging is not None else ())
                # The tools' versions, asked while the restore starts: nothing waits for them.
                versions = Alongside("versions", lambda: record_versions(engine, target, evidence, plan))
            progress(f"{plan.database}: restoring {plan.target_backup.label if plan.target_backup else '?'}")
            with phase(plan.database, RESTORE_AND_CHECKS, restore_seconds(result.prediction)):
                outcome = engine.restore_and_check(plan, target, evidence, partial, data_checks)
            if outcome is not partial:  # an engine that made its own outcome still keeps what came before it
                outcome.checks[:0], outcome.errors[:0] = partial.checks, partial.errors
            if versions is not None:
                result.target_versions = versions.result()  # before the target goes
        except TargetError as exc:
            outcome = stopped(partial, f"target: {exc}")
        except RestoreproofError as exc:
            outcome = stopped(partial, str(exc))
        except Exception as exc:
            # A bug or an unexpected failure: this database gets "error" with the reason, the
            # others are still verified, and the traceback is kept as evidence.
            evidence.write("internal-error.txt", traceback.format_exc())
            outcome = stopped(partial, f"internal error: {type(exc).__name__}: {exc}")
        except BaseException:
            stop_hashing.set()  # interrupted: nothing more is read, nothing is written
            raise
        finally:
            if versions is not None and target is not None:
                # Asked of the target while it still exists: it is removed next.
                versions.wait()
            if target is not None:
                # Asked before the target goes: what it ran out of decides what its failures are worth.
                exhausted = exhausted_quietly(target, evidence)
                for cause in exhausted:
                    progress(f"{plan.database}: {cause}")
                if outcome is not None:
                    outcome.exhausted += exhausted
                progress(f"{plan.database}: removing the target")
                try:
                    with deferred_signals():  # a second Ctrl-C waits until the target is gone
                        target.close()
                except Exception as exc:  # whatever stopped the removal, the next database is still verified
                    message = f"the target was not removed ({type(exc).__name__}: {exc}); `restoreproof reap` " \
                              "removes what is left"
                    progress(f"{plan.database}: {message}")
                    if outcome is not None:
                        outcome.errors.append(message)
    # Direct mode: the target read the objects itself, with nothing holding them to the listing (no
    # If-Match): one rewritten while it read them makes whatever it found unjudgeable.
    during = (_moved(watch, plan) if watch is not None and result.target and outcome is not None else None)
    # Only what a restore read is hashed as its evidence.
    read = (outcome is not None and provider is not None and plan.chain.status is ChainStatus.COMPLETE
            and (staging is None or staging.error is None))
    if read and not hashing and outcome is not None:
        outcome.checks.append(CheckResult(CheckName.BACKUP_HASHES, CheckStatus.SKIPPED,
                                          "not run: disabled by the setting evidence.hash_backups: false",
                                          details={"disabled_by": "evidence.hash_backups"}, required=False))
    if read and source is not None and plan.files and hashing:
        # Never in place of the verdict: a backup rewritten or expired while it was hashed makes
        # incomplete evidence, said as such, not a failed restore. From a staged copy, the staged
        # bytes: what the restore read, not a second download. Taken alongside the restore where a
        # target was started (waited for here), else now.
        if hashes is None:
            progress(f"{plan.database}: hashing the {len(plan.files)} backup files read")
        try:
            record_backup_hashes(source, plan, evidence, hashes.result() if hashes is not None else None)
        except (RestoreproofError, OSError) as exc:
            evidence.write("backup-files.error.txt", f"the backup files could not all be hashed: {exc}\n")
            progress(f"{plan.database}: backup files not hashed: {exc}")
    if outcome is not None:
        if staging is not None:
            outcome.phases.insert(0, staging.phase)
        result.phases, result.checks = outcome.phases, outcome.checks
        result.overridden_settings = outcome.overridden_settings
        point.achieved, point.detail = outcome.achieved, outcome.achieved_detail
    result.verdict, result.reasons = decide(plan, outcome)
    if during is not None:
        progress(f"{plan.database}: {during}")
        result.reasons = [f"during the restore, {during}", *(f"not taken as a verdict ({result.verdict}): {r}"
                                                             for r in result.reasons)]
        result.verdict = Verdict.ERROR
    result.evidence = dict(evidence.files)
    return result


def exhausted_quietly(target: Target, evidence: Evidence) -> list[str]:
    """What the target ran out of (memory, disk), or [] for a target with no limits of its own. Asking
    must not cost the verdict: a failure to ask is kept as evidence."""
    if not isinstance(target, ResourceLimited):
        return []
    try:
        return target.exhausted()
    except Exception:
        evidence.write("internal-error-resources.txt", traceback.format_exc())
        return []


def _moved(watch: Callable[[list[str]], object], plan: RestorePlan) -> str | None:
    """Why the plan's objects are no longer as listed (each named), or None when they all are."""
    try:
        watch(plan.files)
    except RestoreproofError as exc:
        return str(exc)
    return None


# ---- the steps: discover, verify one database, publish ----------------------------------------------------
# The CLI composes them in one process (`run_verification`); a scheduler runs each as its own task,
# on any worker (verification.orchestration): what one step hands the next goes through the store.


# What the run row's host facts carry for the later steps, beside the host's own facts; never in the
# report's `host`: the databases due, in the run's order; the target kind the run asked for ("auto",
# "docker", "local"); the configuration's warnings, for the report; and the store's own (every file
# not read, which discovery the run is at; the databases due are the store's too: its run listings
# count the ones not verified).
TARGET_ASKED, WARNINGS, INTERRUPTED = "target_asked", "warnings", "interrupted"
# The target kind that restores nothing on purpose: chain proof and the checks of the backup files only
# (a fast pre-check of a whole folder); every database is then "failed" or "error: not restored".
OFFLINE = "offline"
RUN_FACTS = frozenset({DUE, TARGET_ASKED, WARNINGS, INTERRUPTED, UNREADABLE, DISCOVERY, INCOMPLETE_UPLOADS,
                       PLANNED_OBJECTS})


@dataclass(frozen=True)
class RunRequest:
    """What to verify, said the same way by the CLI and by a scheduler's run."""

    source: str
    engine: str = "auto"
    # Only these databases (empty: all); a name the source does not hold is an error, never skipped.
    databases: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    at: datetime | None = None
    point: PointChoice | None = None
    target: str = "auto"


@dataclass
class Discovery:
    """A run's plans, made once: what every later step of the run works from."""

    run_id: str
    started_at: datetime
    engine: Engine
    source: Source
    plans: list[RestorePlan]
    unreadable: list[UnreadableFile]
    # The kind of target asked for ("auto" until a provider is chosen) and the run's own folder.
    target: str
    run_dir: Path
    # Which discovery of the run this is: a run discovered again (a scheduler's task cleared) makes
    # every step of the earlier one record nothing. None for a run started before discoveries had one.
    generation: str | None
    # Per database: why its plan no longer holds (an object it names changed or gone since discovery
    # listed it), found when a later step re-opened the source. Such a database is "error", unrestored.
    changed: dict[str, str] = field(default_factory=dict)
    # The run row's host facts and the source's unfinished uploads as discovery recorded them: what a
    # report is made of beside the entries, kept here too for a report made without the store.
    host: dict[str, Any] = field(default_factory=dict)
    uploads: list[IncompleteUpload] = field(default_factory=list)

    def plan(self, database: str) -> RestorePlan:
        found = next((p for p in self.plans if p.database == database), None)
        if found is None:
            raise SourceError(f"{database} was not planned in run {self.run_id} "
                              f"(its databases: {', '.join(p.database for p in self.plans) or 'none'})")
        return found


def discover(settings: Settings, request: RunRequest, run_id: str, started: datetime, *,
             report_dir: Path | None = None, progress: ProgressFn = _quiet) -> Discovery:
    """Read and plan the source once, and start the run in the store with its plans, the databases
    due and every file not read."""
    progress = _redacting(progress, Redactor(settings))
    engine, source, planned = plan_source(settings, request.source, request.engine, request.at, request.point,
                                          request.target)
    plans, unreadable = list(planned.plans), list(planned.unreadable)
    if request.databases:
        unknown = sorted(set(request.databases) - {p.database for p in plans})
        if unknown:  # a misspelt name is never a database quietly not verified
            raise SourceError(f"{source.describe()} has no database {', '.join(unknown)} "
                              f"(it has: {', '.join(p.database for p in plans) or 'none'})")
        plans = [p for p in plans if p.database in request.databases]
    plans = [p for p in plans if p.database not in request.exclude]
    # A file goes with a database left out only when it is positively that database's: one the source
    # could read backups of. A file whose owner is a guess (a database known only from unreadable
    # files), none, or a database the source does not plan at all stays named in this run.
    kept = {p.database for p in plans}
    left_out = {p.database for p in planned.plans if p.database not in kept and p.chain.backups}
    unreadable = [u for u in unreadable if u.database not in left_out]
    for unread in unreadable:
        progress(f"{unread.kind}: {unread.describe()}")
    uploads = source.incomplete_uploads()
    unlisted = getattr(source, "uploads_unlisted", None)  # object storage that would not list them
    for upload in uploads:
        progress(f"incomplete upload: {upload.path} (multipart upload {upload.upload_id}, started "
                 f"{upload.initiated.isoformat() if upload.initiated else 'at an unknown time'}, never completed)")
    if request.target != OFFLINE:
        # Every suite is read and checked against Great Expectations before any restore starts:
        # one that is not valid stops the run here (exit 2), not one database's checks later.
        check_all(settings.checks, [plan.database for plan in plans])
    # What the configuration says that does not apply, said now and in the run's report: deprecated
    # keys, and keys naming a database the source does not have (the whole source's, not only the
    # ones due: a database left out tonight is not a misspelling).
    warnings = settings.checks.deprecations() + unknown_databases(settings.checks,
                                                                   [p.database for p in planned.plans])
    warnings += planned.warnings  # what the engine found the configuration does not fit
    if unlisted:
        warnings.append(unlisted)
    for said in warnings:
        progress(f"warning: {said}")
    run_dir = (report_dir or settings.report_dir) / run_id
    check_report_folder(run_dir)  # before the run is recorded: never a run restored with nowhere to report
    generation = uuid.uuid4().hex[:12]
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        # The run's order: a database that ended in error last time (killed with its worker, timed
        # out) first, then those never verified, then the least recently verified.
        identities = {plan.database: identity_of(source.describe(), plan) for plan in plans}
        plans = in_rotation(plans, store.rotation(list(identities.values())),
                            key=lambda plan: identities[plan.database].key)
        host = {**host_facts(), DUE: [p.database for p in plans], TARGET_ASKED: request.target,
                DISCOVERY: generation, WARNINGS: warnings, **planned_objects(source, plans)}
        # The target kind stays unset until a restore gets one: a run that restored nothing names none.
        store.start_run(RunResult(run_id=run_id, engine=engine.name, source=source.describe(), started_at=started,
                                  unreadable=unreadable, incomplete_uploads=uploads, host=host), run_dir)
        store.record_plans(run_id, plans)
    finally:
        store.close()
    for plan in plans:
        progress(f"{plan.database}: chain {plan.chain.status}"
                 + (f", {len(plan.chain.defects)} known-bad backups" if plan.chain.defects else ""))
    return Discovery(run_id, started, engine, source, plans, unreadable, request.target, run_dir, generation,
                     host=host, uploads=uploads)


def resume(settings: Settings, run_id: str) -> Discovery:
    """A run's discovery as the store keeps it, for a step in another process: nothing is planned again."""
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        run = store.run(run_id)
        if run is None:
            raise RestoreproofError(f"run {run_id} is not in the results store {settings.results_database_url}: "
                                    "its discovery did not run or another store is configured")
        plans = store.plans(run_id)
    finally:
        store.close()
    engine = engines(settings)[run.engine]
    source = open_source(run.source, settings)  # listed again, here: held to discovery's listing below
    return Discovery(run_id, run.started_at, engine, source, plans, unreadable_of(run.host),
                     str(run.host.get(TARGET_ASKED, "auto")),
                     Path(run.report_dir or settings.report_dir / run_id), run.host.get(DISCOVERY),
                     changed_since_discovery(source, run.host.get(PLANNED_OBJECTS) or {}, plans),
                     host=dict(run.host), uploads=uploads_of(run.host))


def planned_objects(source: Source, plans: list[RestorePlan]) -> dict[str, Any]:
    """The run fact holding each planned object as discovery listed it: its size and ETag (and its
    LastModified, what tells versions apart where a store lists no ETag). A local folder
    records nothing: its files are read where they are, and nothing in a folder says a file was
    rewritten in place (the evidence's hashes are what shows the bytes read)."""
    if not is_s3_url(source.describe()):
        return {}  # no boto3 loaded for a folder
    from verification.sources.s3 import S3Source, whole_seconds

    if not isinstance(source, S3Source):
        return {}
    recorded: dict[str, Any] = {}
    for path in sorted({path for plan in plans for path in plan.files}):
        try:
            info = source.listed(path)
        except SourceError:
            continue  # not in the listing (a broken chain names what it misses): nothing to hold it to
        recorded[path] = {"url": info.url, "size": info.size, "etag": info.etag,
                          "last_modified": whole_seconds(info.last_modified).isoformat()}
    return {PLANNED_OBJECTS: recorded}


def changed_since_discovery(source: Source, recorded: dict[str, Any], plans: list[RestorePlan]) -> dict[str, str]:
    """Per database, its planned objects that a new listing of `source` finds changed or gone since
    discovery listed them, said as a reason naming each s3:// URL and what changed."""
    if not recorded or not is_s3_url(source.describe()):
        return {}
    from verification.sources.s3 import S3Source, whole_seconds

    if not isinstance(source, S3Source):
        return {}
    changed: dict[str, str] = {}
    for plan in plans:
        said = []
        for path in plan.files:
            then = recorded.get(path)
            if then is None:
                continue  # a plan recorded before discoveries kept their objects
            try:
                now = source.listed(path)
            except SourceError:
                said.append(f"{then['url']}: gone since discovery listed it")
                continue
            compared: list[tuple[str, str, object]] = [("size", "size", now.size), ("etag", "ETag", now.etag)]
            if then["etag"] is None or now.etag is None:  # a store that lists no ETag: its LastModified
                compared[1] = ("last_modified", "LastModified", whole_seconds(now.last_modified).isoformat())
            differences = [f"{label} {then[field]} when planned, {value} now"
                           for field, label, value in compared if field in then and then[field] != value]
            if differences:
                said.append(f"{then['url']}: {', '.join(differences)}")
        if said:
            changed[plan.database] = (f"{len(said)} object(s) of the plan changed since the run's discovery listed "
                                      f"{source.describe()}, so the plan no longer holds: " + "; ".join(said))
    return changed


def choose_target(settings: Settings, discovery: Discovery, plans: list[RestorePlan],
                  progress: ProgressFn = _quiet) -> tuple[TargetProvider | None, str | None]:
    """The provider the plans restore into, or why there is none: every database is still decided
    without one (a broken or known-bad chain is "failed" without a server; the others are "error")."""
    if discovery.target == OFFLINE:
        return None, OFFLINE_REASON
    if not any(p.chain.status is ChainStatus.COMPLETE for p in plans):
        return None, None
    try:
        provider = discovery.engine.target_provider(discovery.target, plans, discovery.source)
    except TargetError as exc:
        progress(f"no target: {exc}")
        return None, str(exc)
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        store.set_target_kind(discovery.run_id, provider.kind)
    finally:
        store.close()
    return provider, None


def stager_for(settings: Settings, source: Source, provider: TargetProvider | None) -> Stager | None:
    """How a restore reads `source`: None for a folder (the target reads it in place) and for object
    storage in `s3.restore_mode: direct`, a Stager in `stage` (the default)."""
    if provider is None or not is_s3_url(source.describe()):
        return None
    if settings.s3.restore_mode == "direct":
        # The engine's provider made targets that read S3 themselves (or refused, for an engine that
        # cannot): nothing is staged.
        return None
    from verification.sources.s3 import S3Source
    from verification.sources.staging import Stager
    from verification.targets.local import leftovers_dir

    if not isinstance(source, S3Source):
        raise SourceError(f"{source.describe()} is an S3 URL but was not opened as object storage")
    return Stager(source, settings.s3.staging_dir or settings.state_dir / "staging", leftovers_dir(settings.state_dir),
                  holder=lambda: this_process().record())


def direct_watch(source: Source, provider: TargetProvider | None,
                 stager: Stager | None) -> Callable[[list[str]], object] | None:
    """Where a target reads object storage itself (restored from, not staged): the check that objects
    are still as the source listed them. None for a folder and for a staged copy (the download holds
    each object to the listing with If-Match)."""
    if provider is None or stager is not None or not is_s3_url(source.describe()):
        return None
    from verification.sources.s3 import S3Source

    return source.check_unchanged if isinstance(source, S3Source) else None


@dataclass
class Verified:
    result: DatabaseResult
    entry: DatabaseEntry


def verify_one(settings: Settings, discovery: Discovery, plan: RestorePlan, *,
               target: tuple[TargetProvider | None, str | None] | None = None,
               context: PredictionContext | None = None, progress: ProgressFn = _quiet,
               lease: LeaseKeeper | None = None) -> Verified:
    """Verify one database of a discovered run and record its entry in the store; `target` is a
    provider already chosen for the run (else one is chosen for this plan alone). `lease`: the
    process's lease on the run, told which database it works on (what a reaper names if it dies)."""
    redact = Redactor(settings)
    progress = _redacting(progress, redact)
    if lease is not None:
        lease.doing(f"{plan.database}: starting", database=plan.database, generation=discovery.generation)
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        # An earlier try's entry goes first: if this one dies, the database has no result, not that one.
        store.forget_database(discovery.run_id, plan.database, discovery.generation)
        provider, no_target = target if target is not None else choose_target(settings, discovery, [plan], progress)
        engine = discovery.engine
        context = context or PredictionContext.load_or_cold(settings, engine.name, progress)
        evidence = RedactingEvidence(discovery.run_dir / "evidence" / slug(plan.database), redact)
        identity = identity_of(discovery.source.describe(), plan)
        context.identities[plan.database] = identity
        checks = data_checks_for(settings, store, identity, planned_point(plan))
        stager = stager_for(settings, discovery.source, provider)
        unrestorable = discovery.changed.get(plan.database) or archived_in_plan(discovery.source, plan)
        result = verify_database(engine, plan, provider, discovery.run_id, discovery.source.describe(), evidence,
                                 progress, context=context, source=discovery.source, no_target=no_target,
                                 data_checks=checks, stager=stager, changed=unrestorable,
                                 watch=direct_watch(discovery.source, provider, stager))
        result.identity = identity
        redact_result(result, redact)
        entry = database_entry(result)
        context.annotate_quietly(entry, result, discovery.run_id, discovery.started_at, progress)
        entry = redact.model(entry)
        store.record_database(discovery.run_id, entry, discovery.generation)
    finally:
        store.close()
    if lease is not None:
        lease.doing(f"{plan.database}: recorded {result.verdict}", database=None)
    progress(f"{plan.database}: {result.verdict}")
    return Verified(result, entry)


@dataclass
class Publication:
    report: RunReport
    run_dir: Path
    outputs: ReportOutputs


# Why a database that was due has no entry when the run is published.
NOT_VERIFIED = ("no result recorded: the time budget ran out before it started, or its verification died "
                "(see the task log)")


def assemble(settings: Settings, *, run_id: str, engine: str, source: str, target_kind: str | None,
             started_at: datetime, host: dict[str, Any], entries: list[DatabaseEntry],
             unreadable: list[UnreadableFile], uploads: list[IncompleteUpload], warnings: Sequence[str] = ()
             ) -> RunReport:
    """The run's report: its entries, every database that was due without one (which keeps the run from
    passing), the run row's `host` facts (those of the run's own kept out), and its warnings."""
    recorded = {entry.database for entry in entries}
    not_verified = [NotVerified(database=name, reason=NOT_VERIFIED)
                    for name in host.get(DUE, []) if name not in recorded]
    return Redactor(settings).model(run_report(
        run_id=run_id, engine=engine, source=source, target_kind=target_kind, started_at=started_at,
        finished_at=datetime.now(UTC), host={k: v for k, v in host.items() if k not in RUN_FACTS},
        databases=entries, unreadable=unreadable, not_verified=not_verified,
        warnings=[str(said) for said in host.get(WARNINGS, [])] + list(warnings), incomplete_uploads=uploads))


def publish(settings: Settings, run_id: str) -> Publication:
    """The run's report from what the store holds: every entry recorded, and every database that was
    due without one. Writes every output and closes the run."""
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        run, entries = store.run_with_reports(run_id)
        report = assemble(settings, run_id=run.run_id, engine=run.engine, source=run.source,
                          target_kind=run.target_kind, started_at=run.started_at, host=run.host, entries=entries,
                          unreadable=unreadable_of(run.host), uploads=uploads_of(run.host))
        run_dir = run_folder(settings, run)
        assert report.finished_at is not None
        store.finish_run(run_id, report.finished_at, str(report.verdict))
        last_success = store.last_passed(run.source)
    finally:
        store.close()
    from verification.checks.runner import imports_settled

    imports_settled()  # the charts take pandas from sys.modules: never half imported
    outputs = write_reports(report, run_dir, settings, last_success)
    outputs.warnings = [Redactor(settings)(warning) for warning in outputs.warnings]
    return Publication(report, run_dir, outputs)


def publish_unrecorded(settings: Settings, discovery: Discovery, entries: list[DatabaseEntry],
                       target_kind: str | None, why: StoreUnavailableError) -> Publication:
    """The reports of a run the store would not take, from what this process holds: the same entries
    and facts the store was given, every output written but the folder's index (which lists the store's
    runs), and a warning in the report that the run is not in the store."""
    unrecorded = (f"this run is not recorded in the results store, which did not answer at publication: {why}; "
                  f"the folder's index.html does not list it")
    report = assemble(settings, run_id=discovery.run_id, engine=discovery.engine.name,
                      source=discovery.source.describe(), target_kind=target_kind,
                      started_at=discovery.started_at, host=discovery.host, entries=entries,
                      unreadable=discovery.unreadable, uploads=discovery.uploads, warnings=[unrecorded])
    outputs = write_reports(report, discovery.run_dir, settings, {}, index=False)
    outputs.warnings = [Redactor(settings)(warning) for warning in outputs.warnings]
    return Publication(report, discovery.run_dir, outputs)


def run_folder(settings: Settings, run: RunRow) -> Path:
    """A run's own folder as every process sharing its report folder names it: the absolute report
    folder the run row keeps (a relative report_dir means the starting process's working folder)."""
    if run.report_dir and run.report_folder and not Path(run.report_dir).is_absolute():
        return Path(run.report_folder) / Path(run.report_dir).name
    return Path(run.report_dir or settings.report_dir / run.run_id)


@dataclass
class DeadRuns:
    """What the sweep at a run's start (or `restoreproof reap`) found and did."""

    sweep: Sweep
    # Per run: what was recorded for its killed databases, and how the run was closed.
    recorded: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def killed_reason(killed: Killed, in_flight: bool) -> str:
    """Why a database of a killed worker has no verdict on its backups."""
    lease = killed.lease
    if in_flight:
        return (f"restoreproof was killed while verifying it: {killed.reason}; last heard from at "
                f"{utc_text(lease.heartbeat_at)} {describe_phase(lease)}. Not a verdict on "
                "the backups: it goes first in the next run")
    return (f"not verified: the run was killed before it started this database ({killed.reason}); it goes first "
            "in the next run")


def _record_killed(settings: Settings, store: ResultStore, run_id: str, database: str, reason: str,
                   generation: str | None) -> bool:
    """The database's "error" entry, unless it has one already (nothing recorded is replaced)."""
    plan = next((p for p in store.plans(run_id) if p.database == database), None)
    if plan is None:
        return False
    point = RestorePoint(target=planned_point(plan))
    result = DatabaseResult(database, Verdict.ERROR, [reason], plan, point)
    run = store.run(run_id)
    if run is not None:
        result.identity = identity_of(run.source, plan)
    redact_result(result, Redactor(settings))
    try:
        return store.record_if_absent(run_id, Redactor(settings).model(database_entry(result)), generation)
    except StaleDiscoveryError:
        return False  # the run was discovered again since: the killed task's plan is no longer its
    except RunFinishedError:
        return False  # another sweep closed the run first: its report is out, with what it recorded


def end_dead_runs(settings: Settings, progress: ProgressFn = _quiet, *, keep_runs: frozenset[str] = frozenset(),
                  only_run: str | None = None, force: bool = False, use_docker: bool = True) -> DeadRuns:
    """Remove what dead runs left (judged by their leases; a live or unknown run is kept), record each
    killed database as "error" with why, and close a run whose only worker died: its report is
    published from what the store holds, so nothing it recorded is lost."""
    found = DeadRuns(sweep(settings, keep_runs=keep_runs, only_run=only_run, force=force, use_docker=use_docker))
    claim = uuid.uuid4().hex[:12]  # this sweep's: ending a lease again after a lost answer is still its own
    for decision in found.sweep.reaped.decisions:
        if decision.judgement.dead and decision.removed:
            progress(f"run {decision.run_id}: removed {', '.join(decision.removed)} ({decision.judgement.reason})")
    if found.sweep.error is not None:
        progress(f"leftovers of other runs kept: {found.sweep.error}")
    store = ResultStore(settings.results_database_url, settings.results_retry) if found.sweep.runs else None
    try:
        for judged in found.sweep.runs:
            if not judged.killed:
                continue
            assert store is not None
            row = found.sweep.rows.get(judged.run_id)
            said = found.recorded.setdefault(judged.run_id, [])
            closing = row is not None and row.finished_at is None
            claimed = False
            for killed in judged.killed:
                # Ended once, first: of several runs starting at the same moment, the one that ends the
                # lease records its database (and closes the run), the others leave it to that one.
                if not store.release_lease(killed.lease.lease_id, f"killed: {killed.reason}"[:500], claim):
                    continue
                claimed = True
                database = killed.lease.database
                if closing and database and _record_killed(settings, store, judged.run_id, database,
                                                           killed_reason(killed, True), killed.lease.generation):
                    said.append(f"{database}: error, killed ({killed.reason})")
            if row is not None and closing and judged.dead and claimed:
                recorded = store.recorded(judged.run_id)
                for name in [name for name in (row.host.get(DUE) or []) if name not in recorded]:
                    if _record_killed(settings, store, judged.run_id, name, killed_reason(judged.killed[-1], False),
                                      judged.killed[-1].lease.generation):
                        said.append(f"{name}: error, not started")
                try:
                    published = publish(settings, judged.run_id)
                    said.append(f"closed as {published.report.verdict}; report {published.outputs.json_path}")
                except Exception as exc:  # the store at least says it is over
                    store.finish_run(judged.run_id, datetime.now(UTC), str(Verdict.ERROR))
                    said.append(f"closed as error; its report could not be written: {type(exc).__name__}: {exc}")
                    found.errors.append(f"run {judged.run_id}: report not written: {exc}")
            for line in said:
                progress(f"run {judged.run_id} (killed: {judged.reason}): {line}")
    finally:
        if store is not None:
            store.close()
    return found


def end_dead_runs_quietly(settings: Settings, progress: ProgressFn, run_id: str) -> DeadRuns | None:
    """end_dead_runs at the start of a run: whatever goes wrong there (the store busy, an engine that
    answers oddly) is said, and the run goes on: what dead runs left is never this run's verdict."""
    try:
        return end_dead_runs(settings, progress, keep_runs=frozenset({run_id}))
    except Exception as exc:
        progress(f"warning: what dead runs left was not looked at ({type(exc).__name__}: {exc}); "
                 "`restoreproof reap` does it on demand")
        return None


def end_killed_task(settings: Settings, run_id: str, database: str, progress: ProgressFn = _quiet) -> list[str]:
    """A scheduler's teardown of one database, once its task is over: a lease of that task still open
    names a worker killed at work; the database is then recorded "error" with why (if it has no entry)."""
    said: list[str] = []
    killed = ended_task_leases(settings, run_id, database)
    if not killed:
        return said
    store = ResultStore(settings.results_database_url, settings.results_retry)
    claim = uuid.uuid4().hex[:12]
    try:
        for one in killed:
            if store.release_lease(one.lease.lease_id, f"killed: {one.reason}"[:500], claim) and _record_killed(
                    settings, store, run_id, database, killed_reason(one, True), one.lease.generation):
                said.append(f"{database}: error, killed ({one.reason})")
    finally:
        store.close()
    for line in said:
        progress(f"run {run_id}: {line}")
    return said


def end_interrupted(settings: Settings, run_id: str, interruption: Interruption) -> str:
    """An interrupted run closed in the store, as far as it went: what was recorded stays; each database
    due without an entry gets "error" (the one at work: interrupted during its phase, nothing proven; the
    others: not started), so the run is never "passed"; then its reports are written. Says what was kept."""
    said = f"interrupted by {interruption.name}" + (f" during {interruption.database}" if interruption.database else "")
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        run = store.run(run_id)
        if run is None:
            return "nothing was recorded: the run was interrupted before the results store had it"
        if run.finished_at is not None:
            return f"run {run_id} was recorded as {run.verdict} before the signal"
        recorded = store.recorded(run_id)
        for name in [name for name in run.host.get(DUE) or [] if name not in recorded]:
            _record_killed(settings, store, run_id, name, interruption.reason(name), run.host.get(DISCOVERY))
        store.add_run_facts(run_id, {INTERRUPTED: said, WARNINGS: [*run.host.get(WARNINGS, []), f"the run was {said}: "
                                     "the databases it had not finished are errors, none proven"]})
    finally:
        store.close()
    try:
        published = publish(settings, run_id)
    except Exception as exc:  # the store at least says it is over
        store = ResultStore(settings.results_database_url, settings.results_retry)
        try:
            store.finish_run(run_id, datetime.now(UTC), str(Verdict.ERROR))
        finally:
            store.close()
        return f"run {run_id} recorded as {said} (error); its report was not written: {type(exc).__name__}: {exc}"
    return (f"run {run_id} recorded as {said} ({published.report.verdict}, {len(recorded)} database(s) finished "
            f"before it); report {published.outputs.json_path}")


@dataclass
class VerificationRun:
    run: RunResult
    report: RunReport
    run_dir: Path
    json_path: Path
    html_path: Path


def run_verification(settings: Settings, source_path: str | Path, *, engine_name: str | None = None,
                     at: datetime | None = None, target_kind: str | None = None, report_dir: Path | None = None,
                     run_id: str | None = None, progress: ProgressFn = _quiet,
                     databases: list[str] | None = None, point: PointChoice | None = None) -> VerificationRun:
    """The whole run in one process: discover, verify each database, publish (the scheduler's steps)."""
    started = datetime.now(UTC)
    run_id = run_id or new_run_id(started)
    redact = Redactor(settings)
    # The run's lease, held by this process until the run is published: what this run starts is
    # labelled with this process, and the heartbeat tells every other run that it is alive.
    with LeaseKeeper(settings, run_id, "run", progress=_redacting(progress, redact)) as lease, \
            Interruptible(lambda: (lease.database, lease.phase), lambda said: end_interrupted(settings, run_id, said)):
        progress = _redacting(lease.tracking(progress), redact)
        # First what dead runs left (never a live one's): their targets, and their databases recorded.
        end_dead_runs_quietly(settings, progress, run_id)
        progress(f"run {run_id}: reading {source_path}")
        request = RunRequest(str(source_path), engine_name or settings.engine, tuple(databases or ()), at=at,
                             point=point, target=target_kind or settings.target)
        discovery = discover(settings, request, run_id, started, report_dir=report_dir, progress=progress)
        # One provider for the whole run, chosen once (a scheduler's tasks each choose their own).
        target = choose_target(settings, discovery, discovery.plans, progress)
        context = PredictionContext.load_or_cold(settings, discovery.engine.name, progress)
        if target[0] is not None:  # with no target nothing is restored, so nothing to predict
            announce_prediction(context, discovery.engine, discovery.plans, progress)
        verified = [verify_one(settings, discovery, plan, target=target, context=context, progress=progress,
                               lease=lease) for plan in discovery.plans]
        results = [one.result for one in verified]
        lease.doing("publishing the run's reports")
        try:
            # Held until the reports are whole: once the store closes the run, a signal cut short would
            # leave a page saying "signed" beside no signature.
            with deferred_signals():
                published = publish(settings, run_id)
        except StoreUnavailableError as exc:
            # Everything was verified and is held here: the reports on disk are still complete, and the run
            # still fails, saying where they are, since no later step or run can find it in the store.
            kind = target[0].kind if target[0] is not None else None
            kept = publish_unrecorded(settings, discovery, [one.entry for one in verified], kind, exc)
            raise StoreUnavailableError(
                f"run {run_id} verified ({kept.report.verdict}) but not recorded: {exc}; its reports are complete "
                f"on disk: {kept.outputs.json_path}, {kept.outputs.html_path}") from None
    for warning in published.outputs.warnings:
        progress(f"warning: {warning}")
    report = published.report
    run = RunResult(run_id=run_id, engine=report.engine, source=report.source, started_at=started,
                    finished_at=report.finished_at, target_kind=report.target_kind, databases=results,
                    host=report.host, unreadable=list(report.unreadable),
                    incomplete_uploads=list(report.incomplete_uploads))
    return VerificationRun(run, report, published.run_dir, published.outputs.json_path, published.outputs.html_path)
