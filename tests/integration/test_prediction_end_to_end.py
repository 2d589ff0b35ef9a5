"""Predicted beside measured, end to end: cold probes, then calibration from the store, and every
output a run writes (JUnit, metrics, the signed evidence bundle, the index across runs)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import leftovers
from verification.evidence.backup_hashes import parse_sha256sums
from verification.pipeline import run_verification
from verification.reports.json_report import report_data, validate_report

pytestmark = pytest.mark.integration


def phase(db: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(p for p in db["phases"] if p["name"] == name)


def test_cold_then_calibrated_with_every_output(demo, settings):
    results = [run_verification(settings, demo.repository, databases=["demo1"]) for _ in range(4)]
    first, last = (report_data(r.report)["databases"][0] for r in (results[0], results[-1]))
    for result in results:
        validate_report(report_data(result.report))
        assert report_data(result.report)["verdict"] == "passed"
        assert leftovers(result.run.run_id) == []

    # Run 1: no history; the rates are this run's probes, and the report says so.
    assert first["prediction"]["mode"] == "cold" and first["prediction"]["runs"] == 0
    assert {p["name"] for p in first["prediction"]["probes"]} >= {"source read", "target write", "container start",
                                                                  "decompression"}
    transfer = phase(first, "transfer")
    assert transfer["bound"] in ("source read", "target write", "decompression")
    assert {r["provenance"] for r in transfer["prediction"]["rates"].values()} == {"probe"}
    assert phase(first, "provision")["prediction"]["constant_provenance"] == "probe"

    # Run 4: three measured runs behind every recovery phase; no probes needed.
    assert last["prediction"]["mode"] == "calibrated" and last["prediction"]["runs"] == 3
    assert last["prediction"]["probes"] == []
    transfer = phase(last, "transfer")
    (rate,) = transfer["prediction"]["rates"].values()
    assert rate["provenance"] == "calibrated" and rate["runs"] == 3
    assert transfer["predicted_seconds"] > 0 and transfer["error_percent"] is not None
    assert phase(last, "redo")["prediction"]["rates"]["redo rate"]["provenance"] == "calibrated"
    assert last["objectives"]["rto"]["met"] is True
    assert last["objectives"]["rto"]["measured_seconds"] == last["recovery_seconds"]
    assert last["objectives"]["rpo"]["worst_log_gap_seconds"] > 0
    assert [p["run_id"] for p in last["drift"]["series"]] == [r.run.run_id for r in results]
    # Four runs minutes apart are no rate of growth: no trend (rto.trend_min_runs, rto.trend_min_days), said.
    assert (last["drift"]["trend"], last["drift"]["min_runs"], last["drift"]["min_days"]) == (None, 5, 3.0)
    assert last["drift"]["notes"][-1].startswith("no trend and no alert from history: 4 measured runs over 0.0 days")

    run_dir = results[-1].run_dir
    # JUnit: one case per database, read back by a JUnit parser.
    (suite,) = list(JUnitXml.fromfile(str(run_dir / "junit.xml")))
    cases = list(suite)
    assert [c.name for c in cases] == ["demo1"] and cases[0].is_passed
    # Metrics: Prometheus text, read back by Prometheus' own parser.
    families = {f.name: f for f in text_string_to_metric_families((run_dir / "metrics.prom").read_text())}
    recovery = families["restoreproof_recovery_seconds"].samples[0]
    assert recovery.labels["database"] == "demo1" and recovery.value == pytest.approx(last["recovery_seconds"])
    assert "restoreproof_restore_phase_predicted_seconds" in families

    # Evidence: the backup files' hashes are the files' real hashes.
    sums = parse_sha256sums((run_dir / "evidence" / last["evidence"]["backup-files.sha256"]).read_text())
    assert len(sums) > 100 and any(p.startswith("archive/demo1/") for p in sums)
    for path in list(sums)[:: max(1, len(sums) // 20)]:
        assert sums[path] == hashlib.sha256((demo.repository / path).read_bytes()).hexdigest()
    assert "pgbackrest" in (run_dir / "evidence" / last["evidence"]["versions.json"]).read_text()

    # The signed bundle verifies; one changed byte is found and named.
    command = [sys.executable, "-m", "verification.cli", "evidence", "verify", str(run_dir)]
    env = {"XDG_STATE_HOME": str(settings.state_dir.parent), "PATH": "/usr/bin:/bin"}
    intact = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert intact.returncode == 0, intact.stdout + intact.stderr
    log = run_dir / "evidence" / last["evidence"]["server.log"]
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0x01
    log.write_bytes(bytes(data))
    altered = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert altered.returncode == 1
    assert f"evidence/{last['evidence']['server.log']}" in altered.stdout + altered.stderr

    # The index lists every run, newest first.
    index = (Path(settings.report_dir) / "index.html").read_text()
    positions = [index.index(f'href="{r.run.run_id}/report.html"') for r in reversed(results)]
    assert positions == sorted(positions)
