"""report.json against its schema, report.html content, and the store round trip."""

import json
from datetime import timedelta

import jsonschema
import pytest

from tests.unit.factories import T0, broken_plan, complete_plan, online_outcome, passed_check
from verification.model import DatabaseResult, RestorePoint, RunResult, UnreadableFile, UnreadableKind
from verification.reports import write_reports
from verification.reports.json_report import build_report, validate_report
from verification.results import ResultStore
from verification.verdict import decide


def make_run() -> RunResult:
    run = RunResult(run_id="20261122T010000Z-abcdef", engine="postgres", source="/backups", started_at=T0,
                    finished_at=T0 + timedelta(seconds=30), target_kind="docker")
    good_plan, outcome = complete_plan(), online_outcome(passed_check())
    verdict, reasons = decide(good_plan, outcome)
    run.databases.append(DatabaseResult("demo1", verdict, reasons, good_plan, RestorePoint("latest", T0),
                                        outcome.phases, outcome.checks))
    bad_plan = broken_plan()
    bad_plan.database = "demo2"
    verdict, reasons = decide(bad_plan, None)
    run.databases.append(DatabaseResult("demo2", verdict, reasons, bad_plan, RestorePoint("latest")))
    return run


def test_report_matches_schema_and_carries_the_contract_fields():
    report = build_report(make_run())
    validate_report(report)
    assert report["schema_version"] == "1.4"
    assert report["unreadable"] == [] and report["not_verified"] == []
    assert report["verdict"] == "failed" and report["summary"] == {"passed": 1, "failed": 1, "error": 0}
    first, second = report["databases"]
    assert first["verdict"] == "passed" and first["reasons"]
    assert first["chain"]["backups"][0]["type"] == "full"
    zeroing = next(p for p in first["phases"] if p["name"] == "zeroing")
    assert zeroing == {"name": "zeroing", "status": "absent", "seconds": None, "bytes": None, "started_at": None,
                       "details": {"why": "none on PostgreSQL"}}
    assert second["chain"]["problems"][0]["files"] == ["000000010000000000000003"]


def test_schema_rejects_a_verdict_without_reasons_and_a_timed_absent_phase():
    report = build_report(make_run())
    report["databases"][0]["reasons"] = []
    with pytest.raises(jsonschema.ValidationError):
        validate_report(report)
    report = build_report(make_run())
    next(p for p in report["databases"][0]["phases"] if p["name"] == "zeroing")["seconds"] = 0.0
    with pytest.raises(jsonschema.ValidationError):
        validate_report(report)


def test_html_shows_verdicts_reasons_and_problems(tmp_path):
    outputs = write_reports(build_report(make_run()), tmp_path / "run")
    json_path, html_path = outputs.json_path, outputs.html_path
    html = html_path.read_text()
    assert json.loads(json_path.read_text())["run_id"] == "20261122T010000Z-abcdef"
    assert "<title>restoreproof run 20261122T010000Z-abcdef: failed</title>" in html
    assert "chain broken: missing 000000010000000000000003" in html
    assert 'class="badge passed">passed' in html
    assert "zeroing</td><td class=\"absent\">absent" in html


def test_store_round_trip(tmp_path):
    store = ResultStore(f"sqlite:///{tmp_path}/results.db")
    run = make_run()
    store.record(run, tmp_path / "run", build_report(run))
    (row,) = store.recent_runs()
    assert (row.run_id, row.verdict, row.engine) == ("20261122T010000Z-abcdef", "failed", "postgres")
    assert store.last_passed() == {"demo1": T0}
    assert store.last_verified() == {"demo1": T0, "demo2": T0}
    ((run_id, started, entry),) = store.report_entries(database="demo1")
    assert (run_id, started) == ("20261122T010000Z-abcdef", T0)
    assert entry == build_report(run)["databases"][0]
    assert entry["recovery_seconds"] == pytest.approx(3.0)
    store.close()


def test_a_corrupt_backup_file_fails_the_run_and_is_listed(tmp_path):
    run = make_run()
    run.databases = run.databases[:1]  # only the passing database
    assert run.verdict == "passed"
    run.unreadable = [UnreadableFile("logs/x.trn", UnreadableKind.NEEDS_SERVER, "x.trn: natively compressed backup")]
    assert run.verdict == "error"  # a backup file that went unread: not a pass, not (yet) a bad backup
    run.unreadable.append(UnreadableFile("logs/y.trn", UnreadableKind.CORRUPT,
                                         "logs/y.trn: end of backup set at offset 0x3e00: expected ..."))
    report = build_report(run)
    validate_report(report)
    assert report["verdict"] == "failed"
    assert [u["kind"] for u in report["unreadable"]] == ["needs-server", "corrupt"]
    html_path = write_reports(report, tmp_path / "run").html_path
    assert "logs/y.trn: end of backup set at offset 0x3e00" in html_path.read_text()
