"""Prometheus metrics from the sample report, read back with prometheus_client's own parser."""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import TESTS
from tests.unit.factories import typed_report
from verification.config import MetricsSettings
from verification.reports.metrics import METRICS, render_metrics, write_metrics

SAMPLE = TESTS / "fixtures" / "reports" / "report-1.3.json"
LAST_SUCCESS = {"demo2": datetime(2026, 11, 20, 1, 0, 48, tzinfo=UTC)}
FINISHED = datetime(2026, 11, 22, 1, 0, 48, tzinfo=UTC).timestamp()

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def report() -> dict[str, Any]:
    sample: dict[str, Any] = json.loads(SAMPLE.read_text())
    return sample


def samples(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def names(found: Samples) -> set[str]:
    return {name for name, _ in found}


def test_every_family_is_a_gauge_with_a_help_that_names_its_unit(report: dict[str, Any]) -> None:
    families = {f.name: f for f in text_string_to_metric_families(render_metrics(typed_report(report), LAST_SUCCESS))}

    assert set(families) == set(METRICS)
    for family in families.values():
        assert family.type == "gauge"
        assert family.documentation == METRICS[family.name][0]
        assert any(unit in family.documentation for unit in ("in seconds", "a count", "1 for the current")), family.name


def test_phase_metrics_cover_measured_phases_only(report: dict[str, Any]) -> None:
    found = samples(render_metrics(typed_report(report), LAST_SUCCESS))
    db = {"database": "demo2", "engine": "postgres"}

    assert value(found, "restoreproof_restore_phase_seconds", phase="transfer", **db) == 2.6
    assert value(found, "restoreproof_restore_phase_predicted_seconds", phase="transfer", **db) == 2.05
    phases = {dict(labels)["phase"] for name, labels in found if name == "restoreproof_restore_phase_seconds"}
    assert phases == {"provision", "transfer", "server_start", "redo", "recovery_end", "integrity_check"}
    # Absent phases have neither a measurement nor a prediction: no sample rather than a 0.
    for name in ("restoreproof_restore_phase_seconds", "restoreproof_restore_phase_predicted_seconds"):
        assert value(found, name, phase="zeroing", **db) is None


def test_database_metrics(report: dict[str, Any]) -> None:
    found = samples(render_metrics(typed_report(report), LAST_SUCCESS))
    demo1 = {"database": "demo1", "engine": "postgres"}
    demo2 = {"database": "demo2", "engine": "postgres"}

    assert value(found, "restoreproof_recovery_seconds", **demo1) == 4.82
    assert value(found, "restoreproof_recovery_predicted_seconds", **demo1) == 4.58
    assert value(found, "restoreproof_rto_target_seconds", **demo2) == 10.0
    assert value(found, "restoreproof_rto_margin_seconds", **demo2) == 4.68
    assert value(found, "restoreproof_rpo_target_seconds", **demo1) == 86400.0
    assert value(found, "restoreproof_rpo_achieved_seconds", **demo1) == 120.0
    assert value(found, "restoreproof_rpo_worst_log_gap_seconds", **demo1) == 900.0
    assert value(found, "restoreproof_drift_alerts", **demo1) == 0
    assert value(found, "restoreproof_drift_alerts", **demo2) == 2
    assert {v: value(found, "restoreproof_verdict", verdict=v, **demo2) for v in ("passed", "failed", "error")} == {
        "passed": 0, "failed": 1, "error": 0}
    assert value(found, "restoreproof_verdict", verdict="passed", **demo1) == 1


def test_last_success_comes_from_the_store_and_from_this_run(report: dict[str, Any]) -> None:
    found = samples(render_metrics(typed_report(report), LAST_SUCCESS))

    # demo2 failed now, so its last success is the stored one; demo1 passed in this very run.
    assert value(found, "restoreproof_last_success_timestamp_seconds", database="demo2", engine="postgres") == (
        LAST_SUCCESS["demo2"].timestamp())
    assert value(found, "restoreproof_last_success_timestamp_seconds", database="demo1", engine="postgres") == (
        FINISHED)


def test_run_metrics(report: dict[str, Any]) -> None:
    report["not_verified"] = [{"database": "sales", "reason": "no backup"}]
    found = samples(render_metrics(typed_report(report), LAST_SUCCESS))
    run = {"engine": "postgres"}

    assert value(found, "restoreproof_run_timestamp_seconds", **run) == FINISHED
    assert value(found, "restoreproof_run_duration_seconds", **run) == 48.0
    assert {v: value(found, "restoreproof_run_verdict", verdict=v, **run) for v in ("passed", "failed", "error")} == {
        "passed": 0, "failed": 1, "error": 0}
    assert {v: value(found, "restoreproof_databases", verdict=v, **run) for v in ("passed", "failed", "error")} == {
        "passed": 1, "failed": 1, "error": 0}
    assert value(found, "restoreproof_not_verified", **run) == 1


def test_unknown_values_are_left_out_never_zero(report: dict[str, Any]) -> None:
    report["finished_at"] = None
    demo2 = report["databases"][1]
    demo2["recovery_seconds"] = None
    demo2["prediction"] = None
    demo2["objectives"] = None  # not worked out (the annotation failed): no target, margin or prediction known
    demo2["drift"] = None
    found = samples(render_metrics(typed_report(report), {}))
    demo2_labels = frozenset({"database": "demo2", "engine": "postgres"}.items())

    # Every per-database value of demo2 without a phase or verdict label is unknown now.
    assert {name for name, labels in found if labels == demo2_labels} == set()
    assert "restoreproof_run_duration_seconds" not in names(found)
    assert "restoreproof_last_success_timestamp_seconds" not in names(found)
    # Without an end, the run is dated by its start.
    started = datetime(2026, 11, 22, 1, 0, tzinfo=UTC).timestamp()
    assert value(found, "restoreproof_run_timestamp_seconds", engine="postgres") == started
    # Still there: the parts that are known.
    assert value(found, "restoreproof_restore_phase_seconds", database="demo2", engine="postgres",
                 phase="transfer") == 2.6
    assert value(found, "restoreproof_recovery_seconds", database="demo1", engine="postgres") == 4.82


def test_write_metrics_replaces_the_textfile_atomically(report: dict[str, Any], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    (textfiles / "restoreproof.prom").write_text("# an older run\n")
    renames: list[tuple[str, str]] = []
    real_rename = os.rename

    def spy(src: str, dst: str) -> None:
        renames.append((str(src), str(dst)))
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", spy)
    run_dir = tmp_path / "reports" / report["run_id"]

    warnings = write_metrics(typed_report(report), run_dir, LAST_SUCCESS, MetricsSettings(textfile_dir=textfiles))

    assert warnings == []
    expected = render_metrics(typed_report(report), LAST_SUCCESS)
    assert (run_dir / "metrics.prom").read_text() == expected
    assert (textfiles / "restoreproof.prom").read_text() == expected
    # Written beside the target under another name, then renamed over it; nothing left behind, and the
    # temporary name does not end in .prom, so node_exporter never reads a half-written file.
    target = str(textfiles / "restoreproof.prom")
    [src] = [source for source, destination in renames if destination == target]
    assert Path(src).parent == textfiles and not src.endswith(".prom")
    assert sorted(p.name for p in textfiles.iterdir()) == ["restoreproof.prom"]


def test_write_metrics_without_extras_writes_the_run_folder_only(report: dict[str, Any], tmp_path: Path) -> None:
    assert write_metrics(typed_report(report), tmp_path / "run", {}, MetricsSettings()) == []
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["metrics.prom"]


def test_missing_textfile_dir_is_a_warning(report: dict[str, Any], tmp_path: Path) -> None:
    warnings = write_metrics(typed_report(report), tmp_path / "run", {}, MetricsSettings(textfile_dir=tmp_path / "missing"))

    [warning] = warnings
    assert "missing" in warning and "textfile" in warning
    assert (tmp_path / "run" / "metrics.prom").exists()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_unreachable_gateway_is_a_warning_without_credentials(report: dict[str, Any], tmp_path: Path) -> None:
    port = closed_port()
    settings = MetricsSettings(pushgateway_url=f"http://pushuser:s3cret@127.0.0.1:{port}")

    [warning] = write_metrics(typed_report(report), tmp_path / "run", {}, settings)

    assert f"127.0.0.1:{port}" in warning
    assert "s3cret" not in warning and "pushuser" not in warning
    assert (tmp_path / "run" / "metrics.prom").exists()
