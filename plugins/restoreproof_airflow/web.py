"""A page inside the Airflow 3 UI: recent restoreproof runs, each opening its HTML report."""

from __future__ import annotations

from html import escape
from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

from restoreproof_airflow.hooks import RestoreproofHook

app = FastAPI(title="restoreproof", description="Restore verification runs and their reports")


@app.get("/", response_class=HTMLResponse)
def runs() -> str:
    with RestoreproofHook() as hook:
        rows = hook.get_conn().recent_runs(50)
    lines = "".join(
        f"<tr><td><a href='reports/{escape(r.run_id)}'>{escape(r.run_id)}</a></td><td>{escape(r.engine)}</td>"
        f"<td class='{escape(r.verdict)}'>{escape(r.verdict)}</td><td>{r.started_at:%Y-%m-%d %H:%M}</td>"
        f"<td>{escape(r.source)}</td></tr>" for r in rows)
    style = ("body{font:14px system-ui;margin:1.5rem}td,th{padding:.25rem .6rem;border-bottom:1px solid #ddd;"
             "text-align:left}.passed{color:#116329}.failed{color:#b3261e}.error{color:#8a4b00}")
    return (f"<!doctype html><meta charset=utf-8><title>restoreproof runs</title><style>{style}</style>"
            "<h1>restoreproof runs</h1><table><tr><th>Run</th><th>Engine</th><th>Verdict</th><th>Started</th>"
            f"<th>Source</th></tr>{lines}</table>")


@app.get("/reports/{run_id}")
def report(run_id: str) -> FileResponse:
    return _report_file(run_id, "report.html")


@app.get("/reports/{run_id}/{name:path}")
def report_file(run_id: str, name: str) -> FileResponse:
    # {name:path}: the report links its evidence as evidence/<database>/<file>.
    return _report_file(run_id, name)


def _report_file(run_id: str, name: str) -> FileResponse:
    with RestoreproofHook() as hook:
        run = hook.get_conn().run(run_id)
    if run is None or not run.report_dir:
        raise HTTPException(404, f"no report for run {run_id}")
    folder = Path(run.report_dir).resolve()
    path = (folder / name).resolve()
    if folder not in path.parents or not path.is_file():
        raise HTTPException(404, f"{name} is not part of run {run_id}'s report")
    return FileResponse(path)
