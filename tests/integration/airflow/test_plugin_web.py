"""The page the plugin adds to the Airflow UI: recent runs from the store, and their reports."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.unit.reports.test_json_report import make_run
from verification.config import load_settings
from verification.reports import write_reports
from verification.reports.json_report import build_report
from verification.results import ResultStore


def test_lists_runs_and_serves_their_reports_only(airflow_env):
    from restoreproof_airflow.web import app

    settings = load_settings()
    run = make_run()
    report = build_report(run)
    run_dir = settings.report_dir / run.run_id
    write_reports(report, run_dir)
    (airflow_env / "secret.txt").write_text("not a report")
    store = ResultStore(settings.results_database_url)
    store.start_run(run, run_dir)
    for entry in report.databases:
        store.record_database(run.run_id, entry)
    store.finish_run(run.run_id, report.finished_at, str(report.verdict))
    store.close()

    client = TestClient(app)
    page = client.get("/")
    assert page.status_code == 200
    assert f"<a href='reports/{run.run_id}'>{run.run_id}</a>" in page.text and "class='failed'>failed" in page.text
    html = client.get(f"/reports/{run.run_id}")
    assert html.status_code == 200 and "<title>restoreproof run" in html.text
    assert client.get(f"/reports/{run.run_id}/report.json").json()["run_id"] == run.run_id
    (run_dir / "evidence" / "demo1").mkdir(parents=True)
    (run_dir / "evidence" / "demo1" / "server.log").write_text("LOG: redo starts")
    assert client.get(f"/reports/{run.run_id}/evidence/demo1/server.log").text == "LOG: redo starts"
    assert client.get("/reports/no-such-run").status_code == 404
    # The guard itself, called with what a crafted URL decodes to:
    import pytest
    from fastapi import HTTPException
    from restoreproof_airflow.web import _report_file

    with pytest.raises(HTTPException) as refused:
        _report_file(run.run_id, "../../secret.txt")
    assert refused.value.status_code == 404 and "not part of run" in refused.value.detail

