"""RTO drift: a trend through a database's measured recovery times, and when it crosses the RTO."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from verification.report_model import (
    AlertKind,
    Attribution,
    Crossing,
    DriftAlert,
    DriftEntry,
    PredictionMode,
    SeriesKind,
    SeriesPoint,
    TrendEntry,
)


@dataclass(frozen=True)
class Trend:
    slope_seconds_per_day: float
    intercept_seconds: float  # at the first point
    start: datetime
    points: int

    def at(self, when: datetime) -> float:
        return self.intercept_seconds + self.slope_seconds_per_day * (when - self.start) / timedelta(days=1)

    def crosses(self, limit_seconds: float) -> datetime | None:
        """When the trend reaches `limit_seconds`; None when it never does (flat or falling)."""
        if self.slope_seconds_per_day <= 0:
            return None
        days = (limit_seconds - self.intercept_seconds) / self.slope_seconds_per_day
        return self.start + timedelta(days=days)


def fit(series: list[tuple[datetime, float]]) -> Trend | None:
    """Least-squares line through (time, seconds); None with fewer than two distinct times."""
    if len(series) < 2:
        return None
    series = sorted(series)
    start = series[0][0]
    xs = [(t - start) / timedelta(days=1) for t, _ in series]
    ys = [v for _, v in series]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return Trend(slope, mean_y - slope * mean_x, start, len(series))


# The defaults of rto.trend_min_runs and rto.trend_min_days (verification.config.RtoSettings).
MIN_RUNS, MIN_DAYS = 5, 3.0


def span_days(series: Sequence[tuple[datetime, float]]) -> float:
    """Days from the first to the last measured run of a series."""
    if not series:
        return 0.0
    times = [t for t, _ in series]
    return (max(times) - min(times)) / timedelta(days=1)


def enough_history(series: Sequence[tuple[datetime, float]], min_runs: int = MIN_RUNS,
                   min_days: float = MIN_DAYS) -> bool:
    """Whether a series may carry a trend and the alerts drawn from history: at least `min_runs`
    measured runs, spread over at least `min_days` days."""
    return len(series) >= min_runs and span_days(series) >= min_days


def too_little_history(series: Sequence[tuple[datetime, float]], min_runs: int, min_days: float) -> str:
    return (f"no trend and no alert from history: {len(series)} measured runs over {span_days(series):.1f} days; "
            f"a trend needs at least {min_runs} runs over at least {min_days:g} days "
            "(rto.trend_min_runs, rto.trend_min_days)")


def assess(database: str, series: list[tuple[datetime, float]], rto_seconds: float, now: datetime,
           horizon_days: float = 90, min_runs: int = MIN_RUNS, min_days: float = MIN_DAYS) -> list[DriftAlert]:
    """The alerts of a series: the newest run missed its RTO (a measurement, whatever the history), or
    the trend crosses the RTO within the horizon (only with enough history: `enough_history`)."""
    alerts = []
    if series:
        last_time, last = max(series)
        if last > rto_seconds:
            alerts.append(DriftAlert(kind=AlertKind.RTO_MISSED, message=(
                f"{database}: last measured recovery {last:.0f} s on {last_time:%Y-%m-%d} "
                f"exceeds its RTO of {rto_seconds:.0f} s")))
    trend = fit(series) if enough_history(series, min_runs, min_days) else None
    if trend is not None and not alerts:
        crossing = trend.crosses(rto_seconds)
        if crossing is not None and now <= crossing <= now + timedelta(days=horizon_days):
            days = (crossing - now) / timedelta(days=1)
            alerts.append(DriftAlert(kind=AlertKind.RTO_TREND, message=(
                f"{database}: at the current growth ({trend.slope_seconds_per_day:+.1f} s/day "
                f"over {trend.points} runs) recovery exceeds its RTO of {rto_seconds:.0f} s in "
                f"about {days:.0f} days ({crossing:%Y-%m-%d})")))
    return alerts


def _median(values: list[float]) -> float | None:
    from statistics import median

    return median(values) if values else None


def model_error(points: Sequence[SeriesPoint], window: int = 5, min_points: int = 3) -> float | None:
    """Median absolute percentage error of the calibrated predictions over the newest `window` runs.

    Cold predictions (documented defaults, probes) are not counted: their error says the model has
    not learned this deployment yet, not that what it learned went stale."""
    errors = [abs(p.predicted_seconds - p.recovery_seconds) / p.recovery_seconds * 100
              for p in sorted(points, key=lambda p: p.at)
              if p.predicted_seconds is not None and p.recovery_seconds
              and p.prediction_mode is not PredictionMode.COLD][-window:]
    return _median(errors) if len(errors) >= min_points else None


def attribution(points: Sequence[SeriesPoint]) -> Attribution | None:
    """Why recovery grew: "size" (more bytes at a steady rate) or "throughput" (a slower rate)."""
    measured = sorted((p for p in points if p.recovery_seconds and p.transfer_bytes
                       and p.transfer_bytes_per_second), key=lambda p: p.at)
    if len(measured) < 4:
        return None
    third = max(1, len(measured) // 3)
    early, late = measured[:third], measured[-third:]

    def change(key: str) -> float:
        before = _median([float(getattr(p, key)) for p in early]) or 0.0
        after = _median([float(getattr(p, key)) for p in late]) or 0.0
        return (after - before) / before if before else 0.0

    if change("recovery_seconds") < 0.1:
        return None
    size_growth, rate_change = change("transfer_bytes"), change("transfer_bytes_per_second")
    return Attribution.SIZE if size_growth >= -rate_change else Attribution.THROUGHPUT


def database_drift(database: str, points: Sequence[SeriesPoint], rto_seconds: float, now: datetime, *,
                   horizon_days: float = 90, tolerance_percent: float = 25.0, error_window: int = 5,
                   min_runs: int = MIN_RUNS, min_days: float = MIN_DAYS, kind: SeriesKind | None = None,
                   notes: Sequence[str] = ()) -> DriftEntry:
    """The drift of a database's report entry: its series, trend, crossing, model error, alerts.

    `points` are runs of one kind (`kind`: all to the latest point, or all to earlier points), whoever
    builds the series. A trend, its crossing and the model-error alert need enough history
    (`enough_history`): with less, the entry says so in its notes and draws none of them."""
    ordered = sorted(points, key=lambda p: p.at)
    series = [(p.at, float(p.recovery_seconds)) for p in ordered if p.recovery_seconds is not None]
    enough = enough_history(series, min_runs, min_days)
    said = list(notes)
    if not enough:
        said.append(too_little_history(series, min_runs, min_days))
    trend = fit(series) if enough else None
    crossing = trend.crosses(rto_seconds) if trend is not None else None
    alerts = assess(database, series, rto_seconds, now, horizon_days, min_runs, min_days)
    error = model_error(ordered, error_window) if enough else None
    if error is not None and error > tolerance_percent:
        alerts.append(DriftAlert(kind=AlertKind.MODEL_ERROR,
                                 message=f"{database}: the model's median error over the last "
                                         f"{min(error_window, len(ordered))} runs is {error:.0f}% (tolerance "
                                         f"{tolerance_percent:.0f}%): recalibration needed"))
    cause = attribution(ordered) if enough else None
    # Why it grew is information for whoever reads an alert, not an alert of its own.
    note = None if cause is None else (f"{database}: recovery time grew mostly through "
                                       + ("more bytes to restore at a steady rate" if cause is Attribution.SIZE
                                          else "a slower transfer rate for about the same bytes"))
    return DriftEntry(
        series=ordered,
        trend=None if trend is None else TrendEntry(
            slope_seconds_per_day=round(trend.slope_seconds_per_day, 6),
            intercept_seconds=round(trend.intercept_seconds, 3), start=trend.start, points=trend.points),
        crossing=None if crossing is None or crossing < now else Crossing(
            at=crossing, days=round((crossing - now) / timedelta(days=1), 1)),
        model_error_percent=round(error, 1) if error is not None else None,
        attribution=cause, attribution_note=note, alerts=alerts, series_kind=kind, min_runs=min_runs,
        min_days=min_days, notes=said)
