"""report.json against its schema, report.html content, and the store round trip."""

import json
from datetime import timedelta

import jsonschema
import pydantic
import pytest

from tests.conftest import TESTS
from tests.unit.factories import T0, broken_plan, complete_plan, online_outcome, passed_check
from verification.model import DatabaseResult, RestorePoint, RunResult, UnreadableFile, UnreadableKind
from verification.report_model import RunReport
from verification.reports import write_reports
from verification.reports.json_report import (
    build_report,
    dumps,
    generated_schema,
    report_data,
    report_schema,
    validate_report,
)
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
    report = report_data(build_report(make_run()))
    assert validate_report(report) == build_report(make_run())
    assert report["schema_version"] == "1.14"
    assert report["unreadable"] == [] and report["not_verified"] == [] and report["warnings"] == []
    assert report["incomplete_uploads"] == []
    assert report["verdict"] == "failed" and report["summary"] == {"passed": 1, "failed": 1, "error": 0}
    first, second = report["databases"]
    assert first["verdict"] == "passed" and first["reasons"]
    assert first["chain"]["backups"][0]["type"] == "full"
    zeroing = next(p for p in first["phases"] if p["name"] == "zeroing")
    assert zeroing == {"name": "zeroing", "status": "absent", "seconds": None, "bytes": None, "started_at": None,
                       "details": {"why": "none on PostgreSQL"}, "predicted_seconds": None, "bound": None,
                       "error_percent": None, "prediction": None}
    assert second["chain"]["problems"][0]["files"] == ["000000010000000000000003"]


def test_schema_rejects_a_verdict_without_reasons_and_a_timed_absent_phase():
    report = report_data(build_report(make_run()))
    report["databases"][0]["reasons"] = []
    with pytest.raises(jsonschema.ValidationError):
        validate_report(report)
    with pytest.raises(pydantic.ValidationError, match="at least 1 item"):
        RunReport.model_validate(report)
    report = report_data(build_report(make_run()))
    next(p for p in report["databases"][0]["phases"] if p["name"] == "zeroing")["seconds"] = 0.0
    with pytest.raises(jsonschema.ValidationError):
        validate_report(report)
    with pytest.raises(pydantic.ValidationError, match="phase zeroing is absent but timed"):
        RunReport.model_validate(report)


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
    report = build_report(run)
    store.start_run(run, tmp_path / "run")
    for entry in report.databases:
        store.record_database(run.run_id, entry)
    store.finish_run(run.run_id, report.finished_at, str(report.verdict))
    (row,) = store.recent_runs()
    assert (row.run_id, row.verdict, row.engine) == ("20261122T010000Z-abcdef", "failed", "postgres")
    assert store.last_passed() == {"demo1": T0}
    assert store.last_verified() == {"demo1": T0, "demo2": T0}
    ((run_id, started, entry),) = store.report_entries(database="demo1")
    assert (run_id, started) == ("20261122T010000Z-abcdef", T0)
    assert entry == build_report(run).databases[0]  # as the typed report wrote it, field for field
    assert entry.recovery_seconds == pytest.approx(3.0)
    assert store.run_with_reports(run.run_id)[1] == build_report(run).databases
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
    validate_report(report_data(report))
    assert report.verdict == "failed"
    assert [u.kind for u in report.unreadable] == ["needs-server", "corrupt"]
    html_path = write_reports(report, tmp_path / "run").html_path
    assert "logs/y.trn: end of backup set at offset 0x3e00" in html_path.read_text()


def test_checked_in_schema_is_the_one_the_models_generate():
    # `restoreproof schema -o verification/reports/report.schema.json` writes it anew.
    assert report_schema() == generated_schema(), "report.schema.json is stale: run `restoreproof schema -o ...`"
    assert report_schema()["properties"]["schema_version"]["enum"] == ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6",
                                                                      "1.7", "1.8", "1.9", "1.10", "1.11", "1.12", "1.13",
                                                                      "1.14"]


def test_reports_of_every_earlier_version_still_read():
    sample = json.loads((TESTS / "fixtures" / "reports" / "report-1.3.json").read_text())
    assert validate_report(sample).schema_version == "1.3"
    # 1.0: no unread files, no predictions, objectives, drift, chain rules or defects.
    oldest = report_data(build_report(make_run()))
    oldest["schema_version"] = "1.0"
    for key in ("unreadable", "not_verified", "warnings"):
        del oldest[key]
    for database in oldest["databases"]:
        for key in ("rules", "defects"):
            del database["chain"][key]
        for phase in database["phases"]:
            for key in ("predicted_seconds", "bound", "error_percent", "prediction", "started_at"):
                del phase[key]
    typed = validate_report(oldest)
    assert typed.schema_version == "1.0" and typed.unreadable == [] and typed.databases[0].chain.rules == []
    assert typed.warnings == []


def test_a_field_nobody_defined_is_refused_not_dropped():
    report = report_data(build_report(make_run()))
    report["databases"][0]["chain"]["problems"] = [{"code": "x", "message": "y", "severity": "high"}]
    with pytest.raises(jsonschema.ValidationError, match="'severity' was unexpected"):
        validate_report(report)
    with pytest.raises(pydantic.ValidationError, match=r"databases\.0\.chain\.problems\.0\.severity"):
        RunReport.model_validate(report)
    report = report_data(build_report(make_run()))
    report["databases"][0]["recovery_second"] = 3.0
    with pytest.raises(pydantic.ValidationError, match=r"databases\.0\.recovery_second"):
        RunReport.model_validate(report)


def test_sections_without_a_value_are_left_out_of_the_json():
    entry = build_report(make_run()).databases[0]
    assert entry.objectives is None and entry.drift is None and entry.annotation_error is None
    written = entry.model_dump(mode="json")
    assert not {"objectives", "drift", "annotation_error"} & set(written)
    assert written["prediction"] is None  # always written: null says "no prediction was made"
    entry.annotation_error = "ValueError: boom"
    assert entry.model_dump(mode="json")["annotation_error"] == "ValueError: boom"


def test_json_is_written_as_every_earlier_version_wrote_it():
    report = build_report(make_run())
    text = dumps(report)
    assert text == json.dumps(json.loads(text), indent=2) + "\n"
    assert '"started_at": "2026-11-22T01:00:00+00:00"' in text  # Python's offset, not pydantic's "Z"


def test_what_an_older_report_did_not_say_reads_as_unknown_not_as_a_claim():
    sample = json.loads((TESTS / "fixtures" / "reports" / "report-1.3.json").read_text())
    objectives = sample["databases"][0]["objectives"]
    for key in ("target_source", "stale", "points", "basis"):
        objectives["rpo"].pop(key, None)
    for key in ("target_source", "counts_checks"):
        objectives["rto"].pop(key, None)
    typed = validate_report(sample).databases[0].objectives
    assert typed is not None
    assert (typed.rpo.target_source, typed.rpo.stale, typed.rpo.points, typed.rpo.basis) == (None, None, None, None)
    assert (typed.rto.target_source, typed.rto.counts_checks) == (None, None)


def test_a_pgbackrest_backup_s_encryption_is_in_the_report_and_its_schema(captured_repo):
    from verification.engines.postgres.chain import plan
    from verification.engines.postgres.repository import discover
    from verification.sources import LocalSource

    source = LocalSource(captured_repo)
    (stanza,) = discover(source, 16 * 1024 * 1024)
    run = make_run()
    run.databases[0].plan = plan(source, stanza, None, 16 * 1024 * 1024)
    report = report_data(build_report(run))
    jsonschema.validate(report, report_schema())
    backups = report["databases"][0]["chain"]["backups"]
    assert len(backups) == 3 and all(b["encryption"] == {
        "state": "not_encrypted", "algorithm": None, "encryptor_type": None, "encryptor_thumbprint": None,
        "tde_thumbprint": None,
        "basis": "read offline from the repository: backup/demo1/backup.info and the backup's manifest are plain "
                 "text, not pgBackRest's encrypted format (repo1-cipher-type none)"} for b in backups)


def test_overridden_settings_are_reported_typed_and_left_out_when_none():
    from verification.model import OverriddenSetting

    run = make_run()
    run.databases[0].overridden_settings = [OverriddenSetting(
        "zero_damaged_pages", "on", "off", "conf.d/10-salvage.conf:1", "would hide damaged pages")]
    report = report_data(build_report(run))
    first, second = report["databases"]
    assert first["overridden_settings"] == [{"name": "zero_damaged_pages", "backup_value": "on", "forced_value": "off",
                                             "source": "conf.d/10-salvage.conf:1", "why": "would hide damaged pages"}]
    assert "overridden_settings" not in second  # earlier readers and golden reports see nothing new
    assert validate_report(report).databases[0].overridden_settings == run.databases[0].overridden_settings


def test_a_sql_server_set_s_position_and_writer_are_reported_and_left_out_where_unknown():
    from dataclasses import replace

    run = make_run()
    chain = run.databases[0].plan.chain
    pg = chain.backups[0]
    chain.backups.append(replace(pg, position=2, writer="SQL Server 13.0.4001 (SQL Server 2016)",
                                 layout_proven=True))
    chain.backups.append(replace(pg, position=1, writer="SQL Server 15.0.2000", layout_proven=False))
    run.unreadable.append(UnreadableFile("x.bak", UnreadableKind.UNSUPPORTED,
                                         "x.bak: SSET block at offset 0x1000: a layout restoreproof does not know"))
    report = report_data(build_report(run))
    jsonschema.validate(report, report_schema())
    backups = report["databases"][0]["chain"]["backups"]
    assert [(b.get("position"), b.get("writer"), b.get("layout_proven")) for b in backups] == [
        (None, None, None), (2, "SQL Server 13.0.4001 (SQL Server 2016)", True), (1, "SQL Server 15.0.2000", False)]
    assert "position" not in backups[0] and "layout_proven" not in backups[0]
    assert [u["kind"] for u in report["unreadable"]] == ["unsupported"] and report["verdict"] == "failed"
