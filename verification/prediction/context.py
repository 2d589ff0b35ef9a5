"""The prediction around one verification: calibration from the store, probes, and the report fields.

`PredictionContext.load` reads this deployment's history once per run (or per scheduler task);
`predict` runs before the restore (after the target is up, so the write probe can use it);
`annotate_entry` adds the predicted figures, RTO/RPO and drift to the database's report entry.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from verification.config import Settings
from verification.engines.base import Engine
from verification.model import (
    DatabaseIdentity,
    DatabaseResult,
    PhaseName,
    PhaseStatus,
    PhaseWork,
    RestorePlan,
    Verdict,
)
from verification.prediction import objectives
from verification.prediction.calibration import Calibration, calibration_key
from verification.prediction.drift import database_drift
from verification.prediction.phase_model import MB, Prediction, Probe
from verification.prediction.predictor import Predictor
from verification.prediction.probes import (
    container_start_probe,
    decompression_probe,
    source_read_probe,
    target_write_probe,
)
from verification.report_model import DatabaseEntry, DriftEntry, Objectives, SeriesKind, SeriesPoint
from verification.results.identity import NAME_MATCH_NOTE, Match, is_latest, match, point_of
from verification.sources.base import Source
from verification.targets.base import Target, TargetProvider

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoryEntry:
    run_id: str
    started_at: datetime
    entry: DatabaseEntry
    # The run's source: with the entry's identity (or, recorded before identities, its name), which
    # database the entry is (results.identity).
    source: str = ""

    def match(self, identity: DatabaseIdentity) -> Match | None:
        return match(identity, self.source, self.entry)


@dataclass
class PredictionContext:
    settings: Settings
    engine: str
    # Earlier runs' database entries, newest first.
    history: list[HistoryEntry] = field(default_factory=list)
    host: str = field(default_factory=socket.gethostname)
    # The identity of each database this run verifies, by its name (unique in a run): set by the
    # pipeline, which knows the source, before the database is predicted.
    identities: dict[str, DatabaseIdentity] = field(default_factory=dict)

    @classmethod
    def load(cls, settings: Settings, engine: str) -> PredictionContext:
        from verification.results import ResultStore

        store = ResultStore(settings.results_database_url, settings.results_retry)
        try:
            rows = store.history(engine=engine, limit=max(500, settings.prediction.recent_runs * 25))
        finally:
            store.close()
        return cls(settings, engine, [HistoryEntry(row.run_id, row.started_at, row.entry, row.source) for row in rows])

    @classmethod
    def load_or_cold(cls, settings: Settings, engine: str, progress: Callable[[str], None] | None = None
                     ) -> PredictionContext:
        """The history, or none (every prediction cold) when the store cannot be read for it: a
        calibration problem must not stop a verification."""
        try:
            return cls.load(settings, engine)
        except Exception as exc:
            (progress or log.warning)(f"calibration history not read, predictions will be cold: {exc}")
            return cls(settings, engine)

    def annotate_quietly(self, entry: DatabaseEntry, result: DatabaseResult, run_id: str, started_at: datetime,
                         progress: Callable[[str], None] | None = None) -> None:
        """`annotate_entry`, or none of its fields and the reason: the verdict and the measurements are
        the run's result; the figures derived from them must not cost it."""
        try:
            self.annotate_entry(entry, result, run_id, started_at)
        except Exception as exc:
            (progress or log.warning)(f"{result.database}: predictions, objectives and drift not reported: {exc}")
            for phase_entry in entry.phases:
                phase_entry.predicted_seconds = phase_entry.bound = phase_entry.error_percent = None
                phase_entry.prediction = None
            entry.prediction = entry.objectives = entry.drift = None
            entry.annotation_error = f"{type(exc).__name__}: {exc}"

    # before the restore ----------------------------------------------------------------------------

    def calibration(self, target: Target, identity: DatabaseIdentity | None = None) -> Calibration:
        """The rates of this engine, image and host. With `identity`, the entries of another database
        of the same name (another source, another cluster) are left out: what calibration learns per
        database (by its name) is then this database's alone."""
        key = calibration_key(self.engine, target.describe(), self.host)
        p = self.settings.prediction
        entries = [h.entry for h in self.history
                   if identity is None or h.entry.database != identity.name or h.match(identity) is not None]
        return Calibration(key, entries, min_runs=p.min_runs, recent_runs=p.recent_runs)

    def wants_probes(self, calibration: Calibration) -> bool:
        mode = self.settings.prediction.probes
        return mode == "always" or (mode == "auto" and calibration.runs < self.settings.prediction.min_runs)

    def predict(self, engine: Engine, plan: RestorePlan, target: Target, source: Source | None,
                provider: TargetProvider | None, run_id: str, repo_host_path: str,
                extra: Sequence[PhaseWork] = ()) -> Prediction:
        """Every phase's prediction: the engine's, and `extra`, the phases the pipeline runs itself (the
        download of a staged copy)."""
        calibration = self.calibration(target, self.identities.get(plan.database))
        probes: list[Probe] = []
        if self.wants_probes(calibration):
            probes = self.run_probes(engine, plan, target, source, provider, run_id, repo_host_path)
        return Predictor(calibration, probes).predict(plan.database, [*extra, *engine.phase_work(plan)])

    def run_probes(self, engine: Engine, plan: RestorePlan, target: Target, source: Source | None,
                   provider: TargetProvider | None, run_id: str, repo_host_path: str) -> list[Probe]:
        limit = self.settings.prediction.probe_megabytes * MB
        # The files the transfer reads (not the WAL): backup data, in order.
        data_files = [f for f in plan.files if not f.startswith("archive/") and not f.endswith((".info", ".copy"))]
        # Read as the transfer reads them: as many at once as the engine's restore reads (pgBackRest's
        # process-max), not as many as restoreproof's own reads of the source would make (s3.threads).
        transfer = next((w for w in engine.phase_work(plan) if w.phase == PhaseName.TRANSFER), None)
        probes: list[Probe | None] = []
        if source is not None:
            probes.append(source_read_probe(source, data_files, limit, transfer.parallel if transfer else None))
            probes.append(decompression_probe(source, data_files, limit))
        probes.append(target_write_probe(target, limit))
        from verification.targets.docker import DockerTargetProvider

        if isinstance(provider, DockerTargetProvider) and engine.probe_container_start:
            probes.append(container_start_probe(provider, run_id, plan.database, repo_host_path))
        return [p for p in probes if p is not None]

    # after the restore -----------------------------------------------------------------------------

    def annotate_entry(self, entry: DatabaseEntry, result: DatabaseResult, run_id: str, started_at: datetime,
                       now: datetime | None = None) -> None:
        """Add the schema 1.3 fields: per-phase prediction, prediction, objectives, drift."""
        now = now or datetime.now(UTC)
        prediction: Prediction | None = result.prediction
        measured = result.recovery_seconds
        for phase_entry, phase in zip(entry.phases, result.phases, strict=True):
            predicted = prediction.phase(phase.name) if prediction else None
            seconds = phase.seconds if phase.status is PhaseStatus.MEASURED else None
            phase_entry.predicted_seconds = round(predicted.seconds, 3) if predicted else None
            phase_entry.bound = predicted.bound if predicted else None
            phase_entry.error_percent = (round(100 * (predicted.seconds - seconds) / seconds, 1)
                                         if predicted and seconds else None)
            phase_entry.prediction = predicted.entry() if predicted else None
        entry.prediction = prediction.entry(measured) if prediction else None
        settings = self.settings
        name = result.database
        entry.objectives = Objectives(
            rto=objectives.rto(settings.rto.for_database(name), measured, result.phases,
                               prediction.recovery_seconds if prediction else None, settings.rto.count_checks,
                               verified=result.verdict is Verdict.PASSED,
                               target_source="configured" if name in settings.rto.databases else "default"),
            rpo=objectives.rpo(settings.rpo.for_database(name), result.plan.history,
                               result.restore_point.achieved if result.verdict is Verdict.PASSED else None, now,
                               target_source="configured" if name in settings.rpo.databases else "default"))
        entry.drift = self.drift(entry, run_id, started_at, now)

    def drift(self, entry: DatabaseEntry, run_id: str, started_at: datetime, now: datetime) -> DriftEntry:
        """The entry's drift through the earlier runs of the same database (its identity, or for runs
        recorded before identities its source and name) of the same kind (latest, or a point in time)."""
        identity = entry.identity or DatabaseIdentity("", entry.database)
        if entry.identity is None:  # nothing to tell databases of one name apart: its name (as before)
            earlier = [h for h in self.history if h.entry.database == entry.database]
        else:
            earlier = [h for h in self.history if h.match(identity) is not None]
        history, notes = same_kind(earlier, entry, identity)
        points = [series_point(h.entry, h.run_id, h.started_at) for h in history if h.run_id != run_id][:200]
        points.append(series_point(entry, run_id, started_at))
        settings = self.settings
        return database_drift(entry.database, points, settings.rto.for_database(entry.database), now,
                              horizon_days=settings.rto.horizon_days,
                              tolerance_percent=settings.prediction.tolerance_percent,
                              min_runs=settings.rto.trend_min_runs, min_days=settings.rto.trend_min_days,
                              kind=series_kind(entry), notes=notes)


def series_kind(entry: DatabaseEntry) -> SeriesKind:
    return SeriesKind.LATEST if is_latest(point_of(entry)) else SeriesKind.POINT_IN_TIME


def same_kind(history: Sequence[HistoryEntry], entry: DatabaseEntry,
              identity: DatabaseIdentity) -> tuple[list[HistoryEntry], list[str]]:
    """The runs of `history` restored to the same kind of point as `entry` (latest runs and runs to a
    point in time are trended apart), and what to say of them: how many of the other kind were left
    out, and how many were matched by source and name only."""
    kind = series_kind(entry)
    kept = [h for h in history if series_kind(h.entry) is kind]
    notes = []
    other = len(history) - len(kept)
    if other:
        others = "an earlier point in time" if kind is SeriesKind.LATEST else "the latest point"
        notes.append(f"{other} runs to {others} left out: latest and point-in-time runs are trended apart")
    by_name = sum(1 for h in kept if h.match(identity) is Match.NAME)
    if by_name:
        notes.append(f"{by_name} runs of the series {NAME_MATCH_NOTE}")
    return kept, notes


def series_point(entry: DatabaseEntry, run_id: str, at: datetime) -> SeriesPoint:
    """A database entry as one point of its history (the drift series and the history charts)."""
    transfer = next((p for p in entry.phases if p.name is PhaseName.TRANSFER and p.status is PhaseStatus.MEASURED),
                    None)
    transfer_bytes = transfer.bytes if transfer else None
    seconds = transfer.seconds if transfer else None
    prediction = entry.prediction
    return SeriesPoint(run_id=run_id, at=at if at.tzinfo else at.replace(tzinfo=UTC), verdict=entry.verdict,
                       recovery_seconds=entry.recovery_seconds,
                       predicted_seconds=prediction.recovery_seconds if prediction else None,
                       prediction_mode=prediction.mode if prediction else None, transfer_bytes=transfer_bytes,
                       transfer_bytes_per_second=round(transfer_bytes / seconds, 1)
                       if transfer_bytes and seconds else None)
