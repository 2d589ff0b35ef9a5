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


# --- enough history (issue 29, class 8): a trend and an alert need enough runs over enough days -----------

from verification.prediction.drift import MIN_DAYS, MIN_RUNS, database_drift, enough_history, span_days  # noqa: E402
from verification.report_model import SeriesKind, SeriesPoint  # noqa: E402


def _points(times: list[timedelta], seconds: list[float]) -> list[SeriesPoint]:
    return [SeriesPoint(run_id=f"r{i}", at=T0 + t, recovery_seconds=s) for i, (t, s) in enumerate(zip(times, seconds,
                                                                                                     strict=True))]


def test_the_defaults_are_five_runs_over_three_days_as_the_settings_say():
    from verification.config import RtoSettings

    assert (MIN_RUNS, MIN_DAYS) == (5, 3.0) == (RtoSettings().trend_min_runs, RtoSettings().trend_min_days)


@pytest.mark.parametrize(("runs", "days", "enough"), [
    (5, 3.0, True), (6, 10.0, True), (4, 10.0, False), (5, 2.99, False), (2, 28 / 86400, False)])
def test_enough_history_needs_both_the_runs_and_the_days(runs, days, enough):
    series = [(T0 + timedelta(days=days) * i / (runs - 1), 100.0 + i) for i in range(runs)]
    assert span_days(series) == pytest.approx(days)
    assert enough_history(series) is enough


def test_span_of_nothing_is_zero_and_the_limits_are_the_callers():
    assert span_days([]) == 0.0 and not enough_history([])
    series = [(T0, 1.0), (T0 + timedelta(days=1), 2.0)]
    assert enough_history(series, min_runs=2, min_days=1.0) and not enough_history(series, min_runs=3, min_days=1.0)
    assert not enough_history(series, min_runs=2, min_days=1.5)


def test_two_runs_28_seconds_apart_draw_no_trend_and_no_alert_and_say_why():
    # The case seen: 10 s, then 376 s 28 s later, an RTO of 600 s: "+12968 s/day" and an alert before.
    points = _points([timedelta(0), timedelta(seconds=28)], [10.0, 376.0])
    drift = database_drift("demo1", points, 600.0, T0 + timedelta(seconds=28), kind=SeriesKind.LATEST)
    assert (drift.trend, drift.crossing, drift.alerts, drift.model_error_percent) == (None, None, [], None)
    assert (drift.series_kind, drift.min_runs, drift.min_days) == (SeriesKind.LATEST, 5, 3.0)
    assert drift.notes == ["no trend and no alert from history: 2 measured runs over 0.0 days; a trend needs at least "
                           "5 runs over at least 3 days (rto.trend_min_runs, rto.trend_min_days)"]
    assert assess("demo1", [(p.at, p.recovery_seconds) for p in points], 600.0, T0) == []


def test_a_missed_rto_is_a_measurement_and_needs_no_history():
    drift = database_drift("demo1", _points([timedelta(0)], [900.0]), 600.0, T0)
    assert [a.kind for a in drift.alerts] == ["rto-missed"] and drift.trend is None


def test_with_enough_history_the_trend_and_its_alert_are_drawn_and_the_limits_are_said():
    days = [timedelta(days=d) for d in range(5)]
    drift = database_drift("demo1", _points(days, [100.0, 200.0, 300.0, 400.0, 500.0]), 1000.0,
                           T0 + timedelta(days=4), notes=["said before"])
    assert drift.trend is not None and drift.trend.slope_seconds_per_day == pytest.approx(100.0)
    assert [a.kind for a in drift.alerts] == ["rto-trend"] and drift.notes == ["said before"]
    # The same five runs, with a stricter setting: none of it.
    strict = database_drift("demo1", _points(days, [100.0, 200.0, 300.0, 400.0, 500.0]), 1000.0,
                            T0 + timedelta(days=4), min_runs=6, min_days=3.0)
    assert (strict.trend, strict.alerts, strict.min_runs) == (None, [], 6)
    assert strict.notes[-1].startswith("no trend and no alert from history: 5 measured runs over 4.0 days")


def test_model_error_and_attribution_need_enough_history_too():
    off = [SeriesPoint(run_id=f"r{i}", at=T0 + timedelta(hours=i), recovery_seconds=10.0 + i, predicted_seconds=40.0,
                       transfer_bytes=100 + 50 * i, transfer_bytes_per_second=10.0) for i in range(6)]
    drift = database_drift("demo1", off, 1000.0, T0 + timedelta(hours=6))  # six runs within six hours
    assert (drift.model_error_percent, drift.attribution, drift.alerts) == (None, None, [])
    spread = [p.model_copy(update={"at": T0 + timedelta(days=i)}) for i, p in enumerate(off)]
    drift = database_drift("demo1", spread, 1000.0, T0 + timedelta(days=6))
    assert drift.model_error_percent is not None and "model-error" in [a.kind for a in drift.alerts]
    assert drift.attribution is not None
