"""The pipeline cut into steps a scheduler can run as separate tasks, on separate workers.

Each step takes plain values (names, ids, times) and hands its results on through the results
store, never through a local file, so Airflow's Celery or Kubernetes executors can run the steps
anywhere. The CLI's `run_verification` does the same work in one process.

    discover  -> the databases to verify tonight, least recently verified first
    verify    -> one database: plan, provision, restore, check, record (its target removed after)
    remove    -> one database's leftovers, by label (the guaranteed cleanup)
    publish   -> report.json / report.html from what the store holds
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from verification.config import Settings
from verification.errors import RestoreproofError, SourceError
from verification.model import RunResult, Verdict
from verification.pipeline import (
    RedactingEvidence,
    host_facts,
    plan_source,
    redact_result,
    verify_database,
)
from verification.prediction.context import PredictionContext
from verification.redaction import Redactor
from verification.report_model import NotVerified
from verification.reports import write_reports
from verification.reports.json_report import database_entry, run_report
from verification.restore_points import PointChoice, PointStrategy
from verification.results import ResultStore
from verification.results.store import unreadable_json, unreadable_of
from verification.targets.labels import slug
from verification.targets.local import reap_local
from verification.targets.reaper import ReapReport, reap_docker


class BudgetExceeded(RestoreproofError):
    """The run's time budget is spent: this database is not started tonight (it goes first next time)."""


@dataclass(frozen=True)
class NightlyParams:
    source: str
    engine: str = "auto"
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    point: str = "latest"
    seed: int | None = None
    target: str = "auto"
    time_budget_minutes: float | None = None
    # The YAML configuration every task of the run loads (None: RESTOREPROOF_CONFIG, then defaults).
    config: str | None = None

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> NightlyParams:
        known = {k: values[k] for k in cls.__dataclass_fields__ if k in values and values[k] is not None}
        return cls(**known)

    def point_choice(self) -> PointChoice:
        return PointChoice(PointStrategy(self.point), self.seed)


def scheduler_run_id(dag_id: str, scheduler_run: str) -> str:
    """restoreproof's run id for a scheduler's run: stable, and safe in container names."""
    digest = hashlib.sha1(f"{dag_id}/{scheduler_run}".encode()).hexdigest()[:10]
    return f"{slug(dag_id, 30).lower()}-{digest}"


def discover(settings: Settings, params: NightlyParams, run_id: str, started: datetime) -> list[str]:
    """Databases to verify, least recently verified first; starts the run in the store."""
    engine, source, planned = plan_source(settings, params.source, params.engine, None, params.point_choice())
    names = [p.database for p in planned.plans]
    if params.include:
        unknown = sorted(set(params.include) - set(names))
        if unknown:  # as the CLI's --database: a misspelt name is never a database quietly not verified
            raise SourceError(f"{', '.join(unknown)}: not a database of {source.describe()} "
                              f"(it holds {', '.join(names) or 'none'})")
        names = [n for n in names if n in params.include]
    names = [n for n in names if n not in params.exclude]
    store = ResultStore(settings.results_database_url)
    try:
        last = store.last_verified()
        host = {**host_facts(), "due": names, "unreadable": unreadable_json(planned.unreadable)}
        store.start_run(RunResult(run_id=run_id, engine=engine.name, source=source.describe(), started_at=started,
                                  target_kind=params.target, host=host))
    finally:
        store.close()
    never = datetime.min.replace(tzinfo=UTC)
    return sorted(names, key=lambda n: (_aware(last.get(n)) or never, n))


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def verify(settings: Settings, params: NightlyParams, run_id: str, database: str,
           deadline: datetime | None = None) -> dict[str, Any]:
    """Verify one database and record it; returns its verdict and reasons."""
    if deadline is not None and datetime.now(UTC) > deadline:
        raise BudgetExceeded(f"the run's time budget ended at {deadline.isoformat()}: {database} is not started "
                             "tonight and goes first next time")
    engine, source, planned = plan_source(settings, params.source, params.engine, None, params.point_choice())
    plan = next((p for p in planned.plans if p.database == database), None)
    if plan is None:
        raise RestoreproofError(f"{database} is no longer in {params.source}")
    provider = engine.target_provider(params.target, [plan]) if plan.chain.status == "complete" else None
    run_dir = settings.report_dir / run_id
    evidence = RedactingEvidence(run_dir / "evidence" / slug(database), Redactor(settings))
    context = PredictionContext.load_or_cold(settings, engine.name)
    result = verify_database(engine, plan, provider, run_id, source.describe(), evidence, context=context,
                             source=source)
    redact = Redactor(settings)
    redact_result(result, redact)
    entry = database_entry(result)
    store = ResultStore(settings.results_database_url)
    try:
        run = store.run(run_id)
        started = _aware(run.started_at) if run is not None else None
        context.annotate_quietly(entry, result, run_id, started or datetime.now(UTC))
        entry = redact.model(entry)
        store.record_database(run_id, entry)
    finally:
        store.close()
    return {"database": database, "verdict": str(result.verdict), "reasons": result.reasons,
            "recovery_seconds": entry.recovery_seconds}


def remove(settings: Settings, run_id: str, database: str | None = None) -> ReapReport:
    """Remove whatever the run (or one database of it) left: containers, volumes, local targets."""
    report = ReapReport(folders=reap_local(settings.state_dir, run_id, database))
    return reap_docker(run_id, report, database)


def publish(settings: Settings, run_id: str) -> dict[str, Any]:
    """Write the run's report from the store and close the run."""
    store = ResultStore(settings.results_database_url)
    try:
        run, entries = store.run_with_reports(run_id)
        unreadable = unreadable_of(run.host)
        recorded = {entry.database for entry in entries}
        # A database that was due but has no result must show, and keep the run from passing.
        not_verified = [NotVerified(database=name, reason="no result recorded: the time budget ran out before it "
                                                          "started, or its verification died (see the task log)")
                        for name in run.host.get("due", []) if name not in recorded]
        finished = datetime.now(UTC)
        host = {k: v for k, v in run.host.items() if k not in ("unreadable", "due")}
        report = Redactor(settings).model(run_report(
            run_id=run.run_id, engine=run.engine, source=run.source, target_kind=run.target_kind,
            started_at=_aware(run.started_at) or finished, finished_at=finished, host=host, databases=entries,
            unreadable=unreadable, not_verified=not_verified))
        run_dir = settings.report_dir / run_id
        store.finish_run(run_id, finished, str(report.verdict), run_dir, unreadable)
        outputs = write_reports(report, run_dir, settings, store.last_passed())
    finally:
        store.close()
    return {"run_id": run_id, "verdict": str(report.verdict), "summary": report.summary,
            "report_json": str(outputs.json_path), "report_html": str(outputs.html_path),
            "junit_xml": str(outputs.junit_path), "metrics": str(outputs.metrics_path),
            "evidence_manifest": str(outputs.manifest_path),
            "warnings": [Redactor(settings)(w) for w in outputs.warnings],
            "failed": [d.database for d in entries if d.verdict is not Verdict.PASSED]
            + [n.database for n in not_verified]}


def report_path(settings: Settings, run_id: str) -> Path:
    return settings.report_dir / run_id / "report.html"


def drift(settings: Settings, now: datetime | None = None) -> list[dict[str, Any]]:
    """Per database: the measured recovery times across runs, their trend, the model's error, and
    every alert (RTO missed, RTO crossed within the horizon, recalibration needed)."""
    from verification.prediction.context import series_point
    from verification.prediction.drift import database_drift

    now = now or datetime.now(UTC)
    store = ResultStore(settings.results_database_url)
    try:
        names = sorted(store.last_verified())
        histories = {name: store.report_entries(database=name, limit=200) for name in names}
    finally:
        store.close()
    results = []
    for name, rows in histories.items():
        points = [series_point(entry, run_id, started) for run_id, started, entry in rows]
        rto = settings.rto.for_database(name)
        found = database_drift(name, points, rto, now, horizon_days=settings.rto.horizon_days,
                               tolerance_percent=settings.prediction.tolerance_percent)
        measured = [p for p in found.series if p.recovery_seconds is not None]
        trend = found.trend
        results.append({"database": name, "runs": len(measured), "rto_seconds": rto,
                        "last_seconds": measured[-1].recovery_seconds if measured else None,
                        "slope_seconds_per_day": trend.slope_seconds_per_day if trend else None,
                        "crossing": found.crossing.model_dump(mode="json") if found.crossing else None,
                        "model_error_percent": found.model_error_percent,
                        "alerts": [a.message for a in found.alerts],
                        "notes": [found.attribution_note] if found.attribution_note else []})
    return results
