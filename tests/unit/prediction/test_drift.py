from datetime import UTC, datetime, timedelta

import pytest

from verification.prediction.drift import assess, fit

T0 = datetime(2026, 10, 1, 1, 0, tzinfo=UTC)


def test_a_growing_series_crosses_its_rto_on_the_predicted_day():
    # 600 s on day 0, +30 s a day: a 3,600 s RTO is reached on day 100.
    series = [(T0 + timedelta(days=d), 600 + 30 * d) for d in range(0, 50, 7)]
    trend = fit(series)
    assert trend.slope_seconds_per_day == pytest.approx(30)
    assert trend.crosses(3600) == T0 + timedelta(days=100)
    now = T0 + timedelta(days=49)
    (alert,) = assess("db", series, 3600, now)
    assert alert.kind == "rto-trend" and "in about 51 days (2027-01-09)" in alert.message


def test_missed_rto_is_said_and_flat_series_never_cross():
    series = [(T0 + timedelta(days=d), 500.0) for d in range(5)]
    assert fit(series).crosses(3600) is None
    assert assess("db", series, 3600, T0 + timedelta(days=5)) == []
    (missed,) = assess("db", [*series, (T0 + timedelta(days=6), 4000.0)], 3600, T0 + timedelta(days=6))
    assert missed.kind == "rto-missed" and "4000 s" in missed.message


def test_too_little_history_has_no_trend():
    assert fit([]) is None and fit([(T0, 1.0)]) is None and fit([(T0, 1.0), (T0, 2.0)]) is None
