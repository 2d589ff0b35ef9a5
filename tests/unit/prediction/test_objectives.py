"""RTO and RPO arithmetic, and drift: trend crossing day, model error, attribution."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from verification.model import BackupHistory, PhaseStatus, PhaseTiming, SecuredPoint, Verdict
from verification.prediction.drift import database_drift, model_error
from verification.prediction.objectives import rpo, rto
from verification.report_model import SeriesPoint

T0 = datetime(2026, 11, 1, 1, 0, tzinfo=UTC)


def point(day: int, seconds: float | None, predicted: float | None = None, size: int = 100, rate: float = 10.0
          ) -> SeriesPoint:
    return SeriesPoint(run_id=f"r{day}", at=T0 + timedelta(days=day), verdict=Verdict.PASSED,
                       recovery_seconds=seconds, predicted_seconds=predicted, transfer_bytes=size,
                       transfer_bytes_per_second=rate)


def _d(value: BaseModel) -> dict[str, Any]:
    """The typed value as report.json holds it, to compare with the figures as written."""
    return value.model_dump(mode="json")


def test_growing_series_crosses_its_rto_on_the_predicted_day() -> None:
    # 100 s + 20 s/day: reaches 1000 s on day 45; seen from day 20 that is 25 days ahead.
    points = [point(day, 100 + 20 * day) for day in range(21)]
    now = T0 + timedelta(days=20)
    drift = _d(database_drift("db1", points, 1000.0, now, horizon_days=30))
    assert drift["trend"]["slope_seconds_per_day"] == pytest.approx(20.0)
    assert drift["crossing"]["days"] == pytest.approx(25.0, abs=0.05)
    assert drift["crossing"]["at"].startswith((T0 + timedelta(days=45)).date().isoformat())
    kinds = [a["kind"] for a in drift["alerts"]]
    assert "rto-trend" in kinds
    message = next(a["message"] for a in drift["alerts"] if a["kind"] == "rto-trend")
    assert "in about 25 days" in message and "2026-12-16" in message
    # Beyond the horizon: the crossing is reported, but no alert.
    far = _d(database_drift("db1", points, 1000.0, now, horizon_days=10))
    assert far["crossing"]["days"] == pytest.approx(25.0, abs=0.05)
    assert "rto-trend" not in [a["kind"] for a in far["alerts"]]


def test_missed_rto_is_an_alert_and_flat_series_never_crosses() -> None:
    drift = _d(database_drift("db1", [point(d, 50.0) for d in range(5)] + [point(5, 1200.0)], 1000.0,
                           T0 + timedelta(days=5)))
    assert drift["alerts"][0]["kind"] == "rto-missed" and "1200 s" in drift["alerts"][0]["message"]
    flat = _d(database_drift("db1", [point(d, 50.0) for d in range(5)], 1000.0, T0 + timedelta(days=5)))
    assert flat["crossing"] is None and flat["alerts"] == []


def test_model_error_beyond_tolerance_asks_for_recalibration() -> None:
    good = [point(d, 10.0, 10.5) for d in range(6)]
    assert model_error(good) == pytest.approx(5.0)
    assert _d(database_drift("db1", good, 100.0, T0 + timedelta(days=6)))["alerts"] == []
    # The last five predictions are 40% off: the median error exceeds 25%.
    drifting = good + [point(6 + d, 10.0, 14.0) for d in range(5)]
    drift = _d(database_drift("db1", drifting, 100.0, T0 + timedelta(days=11), tolerance_percent=25))
    assert drift["model_error_percent"] == pytest.approx(40.0)
    alert = next(a for a in drift["alerts"] if a["kind"] == "model-error")
    assert "40%" in alert["message"] and "recalibration needed" in alert["message"]


def test_growth_is_attributed_to_size_or_throughput() -> None:
    bigger = [point(d, 10.0 + d, size=100 + 10 * d, rate=10.0) for d in range(9)]
    assert _d(database_drift("db1", bigger, 1000.0, T0 + timedelta(days=9)))["attribution"] == "size"
    slower = [point(d, 10.0 + d, size=100, rate=10.0 - d) for d in range(9)]
    assert _d(database_drift("db1", slower, 1000.0, T0 + timedelta(days=9)))["attribution"] == "throughput"


def history(*minutes: int) -> BackupHistory:
    return BackupHistory([SecuredPoint(f"p{m}", T0 + timedelta(minutes=m)) for m in minutes], "test")


def test_rpo_is_the_distance_to_the_newest_backup_and_the_worst_gap() -> None:
    # Log backups at 0, 15, 30, 75 (a 45-minute gap), 90 minutes; restored to minute 80.
    result = _d(rpo(3600.0, history(0, 15, 30, 75, 90), T0 + timedelta(minutes=80), T0 + timedelta(minutes=100)))
    assert result["behind_newest_seconds"] == 600.0
    assert result["worst_log_gap_seconds"] == 2700.0
    assert result["worst_log_gap"]["from"] == "p30" and result["worst_log_gap"]["to"] == "p75"
    assert result["newest_backup_age_seconds"] == 600.0
    assert result["met"] is True and result["stale"] is False
    # A 30-minute target is missed by the 45-minute gap.
    assert _d(rpo(1800.0, history(0, 15, 30, 75, 90), T0 + timedelta(minutes=80), T0))["met"] is False


def test_rpo_restore_point_after_newest_backup_loses_nothing() -> None:
    result = _d(rpo(3600.0, history(0, 10), T0 + timedelta(minutes=12), T0 + timedelta(minutes=12)))
    assert result["behind_newest_seconds"] == 0.0


def test_rpo_without_history_is_unknown_not_met() -> None:
    result = _d(rpo(3600.0, None, None, T0))
    assert result["met"] is None and result["worst_log_gap_seconds"] is None


def test_rto_counts_checks_only_when_asked() -> None:
    phases = [PhaseTiming("transfer", PhaseStatus.MEASURED, seconds=50.0),
              PhaseTiming("integrity_check", PhaseStatus.MEASURED, seconds=30.0)]
    plain = _d(rto(60.0, 50.0, phases, 45.0, count_checks=False))
    assert (plain["measured_seconds"], plain["margin_seconds"], plain["met"]) == (50.0, 10.0, True)
    assert plain["checks_seconds"] == 30.0
    counted = _d(rto(60.0, 50.0, phases, 45.0, count_checks=True))
    assert (counted["measured_seconds"], counted["margin_seconds"], counted["met"]) == (80.0, -20.0, False)
    never_online = _d(rto(60.0, None, phases, 45.0, count_checks=False))
    assert never_online["met"] is None and never_online["margin_seconds"] is None


def test_objectives_are_met_only_on_evidence() -> None:
    # Regular log backups that stopped three days ago: a failure now loses three days.
    stale = _d(rpo(3600.0, history(0, 15, 30), T0 + timedelta(minutes=30), T0 + timedelta(days=3)))
    assert stale["stale"] is True and stale["met"] is False
    # No restore point reached: nothing to judge.
    assert _d(rpo(3600.0, history(0, 15, 30), None, T0 + timedelta(minutes=31)))["met"] is None
    phases = [PhaseTiming("transfer", PhaseStatus.MEASURED, seconds=50.0),
              PhaseTiming.not_reached("integrity_check", "an earlier step did not complete")]
    # Counting checks that never ran would count them as 0 s.
    counted = _d(rto(60.0, 50.0, phases, 45.0, count_checks=True))
    assert counted["measured_seconds"] is None and counted["met"] is None
    # A restore that did not pass recovered nothing usable, however fast.
    failed = _d(rto(60.0, 50.0, phases[:1], 45.0, count_checks=False, verified=False))
    assert failed["measured_seconds"] == 50.0 and failed["met"] is None
    assert _d(rto(60.0, 50.0, phases[:1], 45.0, False, target_source="default"))["target_source"] == "default"
