"""The page the plugin adds to the Airflow UI: the runs from the store, paged, and their reports."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from tests.unit.reports.test_json_report import make_run
from verification.config import load_settings
from verification.reports import write_reports
from verification.reports.assets import plotly_asset
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
    assert f"<a href='reports/{run.run_id}/report.html'>{run.run_id}</a>" in page.text
    assert "class='failed'>failed" in page.text and "1 run in the results store, newest first: page 1 of 1" in page.text
    html = client.get(f"/reports/{run.run_id}")  # the old link: to report.html, where its relative links resolve
    assert html.status_code == 200 and "<title>restoreproof run" in html.text
    assert str(html.url).endswith(f"/reports/{run.run_id}/report.html")
    # The plotly.js report.html loads as ../assets/<name>, from the report folder, by the same guard.
    asset = plotly_asset()
    assert f'<script src="../assets/{asset.name}">' in html.text
    served = client.get(f"/reports/{run.run_id}/../assets/{asset.name}")  # as the browser resolves it
    assert served.status_code == 200 and served.content == asset.data
    assert served.headers["content-type"].startswith("text/javascript")
    assert client.get("/reports/assets/plotly-0.0.0.min.js").status_code == 404
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
    from restoreproof_airflow.web import report_asset

    (settings.report_dir / "assets" / "link.js").symlink_to(airflow_env / "secret.txt")
    for name in ("../../secret.txt", "..", "link.js", "nul\0.js"):
        with pytest.raises(HTTPException) as refused:
            report_asset(name)
        assert refused.value.status_code == 404 and "is not in any report folder's assets" in refused.value.detail


def test_ten_thousand_runs_are_paged_newest_first(airflow_env):
    from restoreproof_airflow.web import PAGE_SIZE, app
    from sqlalchemy import insert

    from verification.results.store import RunRow

    settings = load_settings()
    store = ResultStore(settings.results_database_url)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with store.engine.begin() as connection:
        connection.execute(insert(RunRow), [
            {"run_id": f"r{n:05d}", "engine": "postgres", "source": "/b", "verdict": "passed",
             "started_at": start + timedelta(hours=n), "finished_at": start + timedelta(hours=n, minutes=1),
             "report_dir": str(settings.report_dir / f"r{n:05d}"), "report_folder": str(settings.report_dir),
             "host": {}} for n in range(10_000)])
    store.close()
    client = TestClient(app)
    first = client.get("/").text
    assert "10000 runs in the results store, newest first: page 1 of 200" in first
    assert re.findall(r"reports/(r\d+)/report.html", first) == [f"r{n:05d}" for n in range(9999, 9999 - PAGE_SIZE, -1)]
    assert "href='?page=2'>older" in first and "newer" not in first
    last = client.get("/?page=200").text
    assert re.findall(r"reports/(r\d+)/report.html", last) == [f"r{n:05d}" for n in range(49, -1, -1)]
    assert "href='?page=199'>newer" in last and "older" not in last
    assert client.get("/?page=201").status_code == 404 and client.get("/?page=0").status_code == 422

