"""Robust estimators for calibration: medians and the Theil-Sen line.

Nightly timings carry outliers (a noisy neighbour, a cold cache, a retried step). The median
ignores up to half of the points being wild, Theil-Sen (the median of pairwise slopes) about 29%,
where least squares would follow a single bad run.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median


@dataclass(frozen=True)
class LineFit:
    """seconds = intercept + slope * x, from `points` observations."""

    intercept: float
    slope: float
    points: int
    method: str

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x


def robust_constant(values: list[float]) -> float | None:
    return median(values) if values else None


def theil_sen(points: list[tuple[float, float]], *, min_spread: float = 0.2) -> LineFit | None:
    """A robust line through (x, y); None without points.

    When the x values barely differ (every run restored the same size: `min_spread` is the relative
    spread below which a slope cannot be told from noise) the fit is a line through the origin with
    the median ratio y/x, which is what a single size can support.
    """
    points = [(x, y) for x, y in points if x >= 0 and y >= 0]
    if not points:
        return None
    xs = [x for x, _ in points]
    low, high = min(xs), max(xs)
    if high <= 0:
        return LineFit(median(y for _, y in points), 0.0, len(points), "median (no size)")
    if (high - low) / high < min_spread:
        ratios = [y / x for x, y in points if x > 0]
        return LineFit(0.0, median(ratios), len(points), "median rate (one size)")
    # Pairs of nearly the same size say nothing about the slope, only about noise: two runs of one
    # database differ by a few bytes and by seconds of jitter, a "slope" of any size. Only pairs
    # whose sizes differ by a tenth of the range vote.
    apart = 0.1 * (high - low)
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1:]
              if abs(x2 - x1) >= apart and x2 != x1]
    slope = max(0.0, median(slopes))
    intercept = max(0.0, median(y - slope * x for x, y in points))
    return LineFit(intercept, slope, len(points), "Theil-Sen")
