"""RTO drift: a trend through a database's measured recovery times, and when it crosses the RTO."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


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
