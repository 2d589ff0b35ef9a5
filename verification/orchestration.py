"""The pipeline's steps as a scheduler runs them: separate tasks, on separate workers.

The steps are the pipeline's own (discover, verify one database, publish), the same the CLI composes
in one process; this module adds only what a scheduler needs around them: its parameters, the
rotation order, a time budget, the guaranteed cleanup, and small results for its task logs. What one
task hands the next goes through the results store (the plans, the entries), never a local file or
a large XCom, so Airflow's Celery or Kubernetes executors can run the tasks anywhere.

    discover  -> plans the source once; the databases to verify tonight, least recently verified first
    reserve   -> checks that the run's engine can have a target (image present, engine reachable)
    verify    -> one database, from its recorded plan: restore, check, record (its target removed after)
    remove    -> one database's leftovers, by label (the guaranteed cleanup)
    publish   -> the run's reports from what the store holds
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from verification import pipeline
from verification.config import Settings
from verification.errors import RestoreproofError
from verification.leases import LeaseKeeper, live_task, open_task_databases, sweep
from verification.model import identity_of
from verification.restore_points import PointChoice, PointStrategy
from verification.results import ResultStore
from verification.results.store import DISCOVERY, in_rotation
from verification.targets.labels import slug
from verification.targets.reaper import ReapReport, reap_run

# The nightly DAG's id. The Airflow page serves its reports to whoever Airflow's auth manager lets read
# this DAG, so the DAG and the page must name the same one.
DAG_ID = "restore_verification"


class BudgetExceeded(RestoreproofError):
    """The run's time budget is spent: this database is not started tonight (it goes first next time)."""


def utc_point(value: str | datetime | None) -> datetime | None:
    """A restore point in UTC. A time without an offset is refused: 01:30 on the worker, in the
    database's zone or in UTC are three different points, and a guess would restore the wrong one.
    A templated value ("{{ ... }}") is checked once rendered, at execution."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if "{{" in value:
            return None
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"restore point {value!r} is not an ISO 8601 time (for example "
                             "2026-11-22T01:30:00Z)") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"restore point {value.isoformat()} has no UTC offset: add one (Z, +00:00, +01:00, ...)")
    return value.astimezone(UTC)


@dataclass(frozen=True)
class NightlyParams:
    source: str
    engine: str = "auto"
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    point: str = "latest"
    seed: int | None = None
    # A point in time to restore every database to (ISO 8601 with an offset); None: `point` decides.
    at: str | None = None
    target: str = "auto"
    time_budget_minutes: float | None = None
    # The YAML configuration every task of the run loads (None: as the CLI finds one, settings_env.py).
    config: str | None = None
    # SQL Server: whose pages are verified offline, "chain" or "all" (None: the setting mssql.pages),
    # as `verify --pages` takes it; it overrides that setting in every task of the run.
    pages: str | None = None

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> NightlyParams:
        known = {k: values[k] for k in cls.__dataclass_fields__ if k in values and values[k] is not None}
        params = cls(**known)
        utc_point(params.at)  # a malformed or naive point fails the run's first task, naming it
        return params

    def settings_overrides(self) -> dict[str, Any]:
        """What the run's parameters set over its configuration file (load_settings' overrides)."""
        return {"mssql": {"pages": self.pages}} if self.pages is not None else {}

    def point_choice(self) -> PointChoice:
        return PointChoice(PointStrategy(self.point), self.seed)

    def request(self) -> pipeline.RunRequest:
        return pipeline.RunRequest(self.source, self.engine, tuple(self.include), tuple(self.exclude),
                                   at=utc_point(self.at), point=self.point_choice(), target=self.target)


def scheduler_run_id(dag_id: str, scheduler_run: str) -> str:
    """restoreproof's run id for a scheduler's run: stable, and safe in container names."""
    digest = hashlib.sha1(f"{dag_id}/{scheduler_run}".encode()).hexdigest()[:10]
    return f"{slug(dag_id, 30).lower()}-{digest}"


def discover(settings: Settings, params: NightlyParams, run_id: str, started: datetime,
             progress: pipeline.ProgressFn = print) -> list[str]:
    """Remove what dead runs left, then plan the run once; the databases to verify: those that ended
    in error last time (a worker killed at work) first, then never verified, then least recently verified."""
    with LeaseKeeper(settings, run_id, "task", progress=progress) as lease:
        pipeline.end_dead_runs_quietly(settings, lease.tracking(progress), run_id)
        discovery = pipeline.discover(settings, params.request(), run_id, started, progress=lease.tracking(progress))
    identities = {p.database: identity_of(discovery.source.describe(), p) for p in discovery.plans}
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        rotation = store.rotation(list(identities.values()))
    finally:
        store.close()
    return in_rotation(sorted(identities), rotation, key=lambda name: identities[name].key)


def reserve(settings: Settings, run_id: str) -> None:
    """Check that the run's engine can have a target of the kind asked for; raises TargetError."""
    discovery = pipeline.resume(settings, run_id)
    if discovery.target != pipeline.OFFLINE:  # an offline run needs no target at all
        discovery.engine.check_target(discovery.target)


def verify(settings: Settings, params: NightlyParams, run_id: str, database: str,
           deadline: datetime | None = None, progress: pipeline.ProgressFn = print) -> dict[str, Any]:
    """Verify one database of the run from its recorded plan; returns its verdict and reasons."""
    if deadline is not None and datetime.now(UTC) > deadline:
        raise BudgetExceeded(f"the run's time budget ended at {deadline.isoformat()}: {database} is not started "
                             "tonight and goes first next time")
    # An earlier try's entry goes first, before the lease names the database and before resume()'s
    # slow listing: a task killed in between then leaves no result (not verified), never that one.
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        run = store.run(run_id)
        generation = run.host.get(DISCOVERY) if run is not None else None
        if run is not None:
            store.forget_database(run_id, database, generation)
    finally:
        store.close()
    # The task's lease: its heartbeat keeps its target from every other run's reaper while it works.
    with LeaseKeeper(settings, run_id, "task", database=database, generation=generation,
                     progress=progress) as lease:
        sweep_own_folder(settings, lease.tracking(progress))
        discovery = pipeline.resume(settings, run_id)
        entry = pipeline.verify_one(settings, discovery, discovery.plan(database),
                                    progress=lease.tracking(progress), lease=lease).entry
    return {"database": database, "verdict": str(entry.verdict), "reasons": entry.reasons,
            "recovery_seconds": entry.recovery_seconds}


def sweep_own_folder(settings: Settings, progress: pipeline.ProgressFn) -> None:
    """This worker's own state folder, swept of what dead runs' tasks left here (local targets, staged
    copies, exchange folders). A scheduler's teardown may run on another worker (Celery), where this
    folder cannot be seen: each verify task on this worker does it instead. Judged by the lease rules
    (a holder running or with a fresh lease, this run's included, is kept); the Docker engine is not
    looked at here (the teardown's label removal and every run's start do that)."""
    try:
        swept = sweep(settings, use_docker=False)
    except Exception as exc:  # never this database's verdict: said, and the task goes on
        progress(f"warning: this worker's state folder was not swept ({type(exc).__name__}: {exc})")
        return
    for decision in swept.reaped.decisions:
        if decision.judgement.dead and decision.removed:
            progress(f"run {decision.run_id}: removed {', '.join(decision.removed)} from this worker "
                     f"({decision.judgement.reason})")
    for problem in swept.reaped.errors + swept.reaped.notes:
        progress(f"this worker's state folder: {problem}")


def remove(settings: Settings, run_id: str, database: str | None = None,
           progress: pipeline.ProgressFn = print) -> ReapReport:
    """Remove whatever the run (or one database of it) left: containers, volumes, local targets. The
    scheduler runs this once the database's task is over, so a lease of it still open names a
    worker killed at work: the database is then recorded "error" with why (never over an entry). A
    database whose task still shows signs of life (holder running, lease fresh) is kept, and said why."""
    if database is not None:
        # Judged first: a holder still at work keeps its target (removing it would fail its restore).
        living = live_task(settings, run_id, database)
        if living is not None:
            report = ReapReport(notes=[f"{database} of run {run_id}: kept, its task still works ({living}); "
                                       "the next sweep removes it once its lease says the holder is dead"])
            progress(f"run {run_id}: {report.notes[0]}")
            return report
    report = reap_run(settings.state_dir, run_id, database)
    if database is not None:
        pipeline.end_killed_task(settings, run_id, database, progress)
    return report


def publish(settings: Settings, run_id: str, progress: pipeline.ProgressFn = print) -> dict[str, Any]:
    """Write the run's report from the store and close the run; a summary for the task log.

    The scheduler runs this once every database's tasks are over. A verify task killed at work whose
    teardown did not record it (the teardown failed, or never ran) still holds its lease: it is
    recorded "error" with why first, as the teardown would have, since nothing can be recorded into
    the run once it is closed (the database would be in the report only as not verified, and not
    first in line next time)."""
    try:
        for database in open_task_databases(settings, run_id):
            pipeline.end_killed_task(settings, run_id, database, progress)
    except Exception as exc:  # the report goes out either way: what it lacks is said
        progress(f"warning: the run's killed tasks were not looked for ({type(exc).__name__}: {exc})")
    published = pipeline.publish(settings, run_id)
    report, outputs = published.report, published.outputs
    return {"run_id": run_id, "verdict": str(report.verdict), "summary": report.summary,
            "report_json": str(outputs.json_path), "report_html": str(outputs.html_path),
            "junit_xml": str(outputs.junit_path), "metrics": str(outputs.metrics_path),
            "evidence_manifest": str(outputs.manifest_path), "warnings": outputs.warnings,
            "failed": [d.database for d in report.databases if d.verdict != "passed"]
            + [n.database for n in report.not_verified]}


def report_path(settings: Settings, run_id: str) -> Path:
    return settings.report_dir / run_id / "report.html"


def drift(settings: Settings, now: datetime | None = None) -> list[dict[str, Any]]:
    """Per database (its identity: source, name, system id) and per kind of run (latest, point in time,
    trended apart): the measured recovery times across runs, their trend, the model's error, and every
    alert (RTO missed, RTO crossed within the horizon, recalibration needed). A trend and the alerts
    drawn from history need rto.trend_min_runs runs over rto.trend_min_days days."""
    from verification.prediction.context import HistoryEntry, same_kind, series_kind, series_point
    from verification.prediction.drift import database_drift

    now = now or datetime.now(UTC)
    store = ResultStore(settings.results_database_url, settings.results_retry)
    try:
        histories = {identity: [HistoryEntry(row.run_id, row.started_at, row.entry, row.source)
                                for row in store.history(identity=identity, limit=200)]
                     for identity in store.known_databases()}
    finally:
        store.close()
    results = []
    for identity, rows in histories.items():
        name = identity.name
        rto = settings.rto.for_database(name)
        # One series per kind of point, each as the newest run of that kind saw it.
        newest_of_kind = {series_kind(h.entry): h for h in reversed(rows)}
        for kind, newest in sorted(newest_of_kind.items()):
            history, notes = same_kind(rows, newest.entry, identity)
            points = [series_point(h.entry, h.run_id, h.started_at) for h in history]
            found = database_drift(name, points, rto, now, horizon_days=settings.rto.horizon_days,
                                   tolerance_percent=settings.prediction.tolerance_percent,
                                   min_runs=settings.rto.trend_min_runs, min_days=settings.rto.trend_min_days,
                                   kind=kind, notes=notes)
            measured = [p for p in found.series if p.recovery_seconds is not None]
            trend = found.trend
            results.append({"database": name, "source": identity.source,
                            "system_id": identity.system_id.value if identity.system_id else None,
                            "series": str(kind), "runs": len(measured), "rto_seconds": rto,
                            "last_seconds": measured[-1].recovery_seconds if measured else None,
                            "slope_seconds_per_day": trend.slope_seconds_per_day if trend else None,
                            "crossing": found.crossing.model_dump(mode="json") if found.crossing else None,
                            "model_error_percent": found.model_error_percent,
                            "alerts": [a.message for a in found.alerts],
                            "notes": [*found.notes, *([found.attribution_note] if found.attribution_note else [])]})
    return results
