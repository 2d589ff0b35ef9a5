"""RTO drift: a trend through a database's measured recovery times, and when it crosses the RTO."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


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


@dataclass(frozen=True)
class DriftAlert:
    database: str
    kind: str  # "rto-missed" or "rto-trend"
    message: str


def assess(database: str, series: list[tuple[datetime, float]], rto_seconds: float, now: datetime,
           horizon_days: float = 90) -> list[DriftAlert]:
    alerts = []
    if series:
        last_time, last = max(series)
        if last > rto_seconds:
            alerts.append(DriftAlert(database, "rto-missed",
                                     f"{database}: last measured recovery {last:.0f} s on {last_time:%Y-%m-%d} "
                                     f"exceeds its RTO of {rto_seconds:.0f} s"))
    trend = fit(series)
    if trend is not None and not alerts:
        crossing = trend.crosses(rto_seconds)
        if crossing is not None and now <= crossing <= now + timedelta(days=horizon_days):
            days = (crossing - now) / timedelta(days=1)
            alerts.append(DriftAlert(database, "rto-trend",
                                     f"{database}: at the current growth ({trend.slope_seconds_per_day:+.1f} s/day "
                                     f"over {trend.points} runs) recovery exceeds its RTO of {rto_seconds:.0f} s in "
                                     f"about {days:.0f} days ({crossing:%Y-%m-%d})"))
    return alerts


def _median(values: list[float]) -> float | None:
    from statistics import median

    return median(values) if values else None


def model_error(points: list[dict[str, Any]], window: int = 5, min_points: int = 3) -> float | None:
    """Median absolute percentage error of the calibrated predictions over the newest `window` runs.

    Cold predictions (documented defaults, probes) are not counted: their error says the model has
    not learned this deployment yet, not that what it learned went stale."""
    errors = [abs(p["predicted_seconds"] - p["recovery_seconds"]) / p["recovery_seconds"] * 100
              for p in sorted(points, key=lambda p: p["at"])
              if p.get("predicted_seconds") is not None and p.get("recovery_seconds")
              and p.get("prediction_mode", "calibrated") != "cold"][-window:]
    return _median(errors) if len(errors) >= min_points else None


def attribution(points: list[dict[str, Any]]) -> str | None:
    """Why recovery grew: "size" (more bytes at a steady rate) or "throughput" (a slower rate)."""
    measured = sorted((p for p in points if p.get("recovery_seconds") and p.get("transfer_bytes")
                       and p.get("transfer_bytes_per_second")), key=lambda p: p["at"])
    if len(measured) < 4:
        return None
    third = max(1, len(measured) // 3)
    early, late = measured[:third], measured[-third:]

    def change(key: str) -> float:
        before = _median([float(p[key]) for p in early]) or 0.0
        after = _median([float(p[key]) for p in late]) or 0.0
        return (after - before) / before if before else 0.0

    if change("recovery_seconds") < 0.1:
        return None
    size_growth, rate_change = change("transfer_bytes"), change("transfer_bytes_per_second")
    return "size" if size_growth >= -rate_change else "throughput"


def database_drift(database: str, points: list[dict[str, Any]], rto_seconds: float, now: datetime, *,
                   horizon_days: float = 90, tolerance_percent: float = 25.0, error_window: int = 5
                   ) -> dict[str, Any]:
    """The drift fields of a database's report entry: its series, trend, crossing, model error, alerts."""
    points = sorted(points, key=lambda p: p["at"])
    series = [(datetime.fromisoformat(p["at"]), float(p["recovery_seconds"])) for p in points
              if p.get("recovery_seconds") is not None]
    trend = fit(series)
    crossing = trend.crosses(rto_seconds) if trend is not None else None
    alerts = [{"kind": a.kind, "message": a.message}
              for a in assess(database, series, rto_seconds, now, horizon_days)]
    error = model_error(points, error_window)
    if error is not None and error > tolerance_percent:
        alerts.append({"kind": "model-error",
                       "message": f"{database}: the model's median error over the last "
                                  f"{min(error_window, len(points))} runs is {error:.0f}% (tolerance "
                                  f"{tolerance_percent:.0f}%): recalibration needed"})
    cause = attribution(points)
    # Why it grew is information for whoever reads an alert, not an alert of its own.
    note = None if cause is None else (f"{database}: recovery time grew mostly through "
                                       + ("more bytes to restore at a steady rate" if cause == "size"
                                          else "a slower transfer rate for about the same bytes"))
    return {
        "series": points,
        "trend": None if trend is None else {
            "slope_seconds_per_day": round(trend.slope_seconds_per_day, 6),
            "intercept_seconds": round(trend.intercept_seconds, 3), "start": trend.start.isoformat(),
            "points": trend.points},
        "crossing": None if crossing is None or crossing < now else {
            "at": crossing.isoformat(), "days": round((crossing - now) / timedelta(days=1), 1)},
        "model_error_percent": round(error, 1) if error is not None else None,
        "attribution": cause,
        "attribution_note": note,
        "alerts": alerts,
    }
