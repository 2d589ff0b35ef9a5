"""The run's predicted time, said before its first restore: each database's phases predicted from
this host's history alone.

The prediction the report keeps is made per database once its target is up (its image is then known,
and a cold start probes it); before any target, the calibration of the newest earlier run on this host
stands in for it: the image a deployment restores into seldom changes between runs. With no earlier
run here there is nothing to say yet, and it is said so rather than a default passed off as a figure.
The download of a staged copy is not counted: its size is known only once it is listed for staging.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from verification.engines.base import Engine
from verification.model import PhaseName, RestorePlan
from verification.phase_events import RESTORE_AND_CHECKS, RunPredicted, emit, predicted_line
from verification.prediction.calibration import Calibration
from verification.prediction.context import PredictionContext
from verification.prediction.phase_model import Prediction
from verification.prediction.predictor import Predictor
from verification.report_model import CalibrationKey

log = logging.getLogger(__name__)

FIRST_RUN = "no prediction yet (first run)"
# Phases the pipeline runs around the engine's restore, shown as phases of their own.
AROUND_RESTORE = (PhaseName.DOWNLOAD, PhaseName.PROVISION)


def restore_seconds(prediction: Prediction | None) -> float | None:
    """The predicted seconds of the engine's restore and checks (every phase but those around it)."""
    if prediction is None:
        return None
    return sum(p.seconds for p in prediction.phases if p.phase not in AROUND_RESTORE)


def newest_key(context: PredictionContext) -> CalibrationKey | None:
    for h in context.history:  # newest first
        key = h.entry.prediction.key if h.entry.prediction is not None else None
        if key is not None and key.host == context.host and key.engine == context.engine:
            return key
    return None


def predict_run(context: PredictionContext, engine: Engine, plans: Sequence[RestorePlan]) -> RunPredicted:
    key = newest_key(context)
    if key is None:
        return RunPredicted({p.database: None for p in plans}, basis=FIRST_RUN)
    p = context.settings.prediction
    totals: dict[str, float | None] = {}
    phases: dict[str, dict[str, float]] = {}
    runs = 0
    for plan in plans:
        identity = context.identities.get(plan.database)
        entries = [h.entry for h in context.history
                   if identity is None or h.entry.database != identity.name or h.match(identity) is not None]
        calibration = Calibration(key, entries, min_runs=p.min_runs, recent_runs=p.recent_runs)
        runs = max(runs, calibration.runs)
        prediction = Predictor(calibration).predict(plan.database, engine.phase_work(plan))
        phases[plan.database] = {ph.phase: ph.seconds for ph in prediction.phases}
        totals[plan.database] = sum(phases[plan.database].values())
        phases[plan.database][RESTORE_AND_CHECKS] = restore_seconds(prediction) or 0.0
    return RunPredicted(totals, phases, basis=f"from {runs} earlier run{'s' if runs != 1 else ''} on this host")


def predict_run_quietly(context: PredictionContext, engine: Engine, plans: Sequence[RestorePlan]) -> RunPredicted:
    """`predict_run`, or nothing predicted and why: a figure for the display must not cost the run."""
    try:
        return predict_run(context, engine, plans)
    except Exception as exc:
        log.warning("the run's time was not predicted: %r", exc)
        return RunPredicted({plan.database: None for plan in plans}, basis=f"not predicted ({type(exc).__name__})")


def announce_prediction(context: PredictionContext, engine: Engine, plans: Sequence[RestorePlan],
                        progress: Callable[[str], None]) -> RunPredicted:
    """The run's predicted time said (a progress line) and told to whoever listens (a live display)."""
    run = predict_run_quietly(context, engine, plans)
    emit(run)
    progress(predicted_line(run))
    return run
