"""A page inside the Airflow 3 UI: the restoreproof runs, newest first and paged from the results store,
each opening its HTML report; and the report folders' files those reports load."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from restoreproof_airflow.hooks import RestoreproofHook
from verification.results.summaries import RunPage, RunSummary

app = FastAPI(title="restoreproof", description="Restore verification runs and their reports")

PAGE_SIZE = 50
STYLE = ("body{font:14px system-ui;margin:1.5rem}td,th{padding:.25rem .6rem;border-bottom:1px solid #ddd;"
         "text-align:left;vertical-align:top}.num{text-align:right}.passed{color:#116329}.failed{color:#b3261e}"
         ".error{color:#8a4b00}.meta{color:#5b6475}nav a{margin-right:.8rem}")


@app.get("/", response_class=HTMLResponse)
def runs(page: Annotated[int, Query(ge=1, description="1: the newest runs")] = 1) -> str:
    with RestoreproofHook() as hook:
        found = hook.get_conn().run_page(page, PAGE_SIZE)
    if page > found.pages:
        raise HTTPException(404, f"there is no page {page}: {found.total} runs make {found.pages} pages")
    return render_runs(found)


def render_runs(found: RunPage) -> str:
    """One page of runs: a row per run, and links to the newer and older pages."""
    lines = "".join(_row(run) for run in found.runs)
    return (f"<!doctype html><meta charset=utf-8><title>restoreproof runs</title><style>{STYLE}</style>"
            f"<h1>restoreproof runs</h1><p class='meta'>{found.total} run{'s' if found.total != 1 else ''} in the "
            f"results store, newest first: page {found.number} of {found.pages}.</p>{_nav(found)}"
            "<table><tr><th>Run</th><th>Engine</th><th>Verdict</th><th>Started</th><th class='num'>Passed</th>"
            "<th class='num'>Failed</th><th class='num'>Error</th><th class='num'>Not verified</th><th>Source</th>"
            f"</tr>{lines}</table>{_nav(found)}")


def _row(run: RunSummary) -> str:
    # report.html itself, not its folder: the page's relative links (evidence, ../assets) resolve from it.
    return (f"<tr><td><a href='reports/{quote(run.run_id, safe='')}/report.html'>{escape(run.run_id)}</a></td>"
            f"<td>{escape(run.engine)}</td><td class='{escape(run.verdict)}'>{escape(run.verdict)}</td>"
            f"<td>{run.started_at:%Y-%m-%d %H:%M}</td><td class='num'>{run.count('passed')}</td>"
            f"<td class='num'>{run.count('failed')}</td><td class='num'>{run.count('error')}</td>"
            f"<td class='num'>{run.not_verified}</td><td>{escape(run.source)}</td></tr>")


def _nav(found: RunPage) -> str:
    if found.pages == 1:
        return ""
    links = []
    if found.number > 1:
        links += ["<a href='?page=1'>newest</a>", f"<a href='?page={found.number - 1}'>newer</a>"]
    if found.number < found.pages:
        links += [f"<a href='?page={found.number + 1}'>older</a>", f"<a href='?page={found.pages}'>oldest</a>"]
    return f"<nav>{''.join(links)}</nav>"


@app.get("/reports/assets/{name}")
def report_asset(name: str) -> FileResponse:
    """A file of a report folder's assets/ (its plotly.js), which report.html loads as ../assets/<name>:
    from report.html's URL below, that is here. The first report folder that has it serves it."""
    with RestoreproofHook() as hook:
        folders = hook.get_conn().report_folders()
    for folder in folders:
        try:
            assets = (Path(folder) / "assets").resolve()
            path = (assets / name).resolve()
        except (OSError, ValueError):  # a name no file can have (a NUL byte)
            break
        if path.parent == assets and path.is_file():
            return FileResponse(path, media_type="text/javascript" if name.endswith(".js") else None)
    raise HTTPException(404, f"{name} is not in any report folder's assets")


@app.get("/reports/{run_id}")
def report(run_id: str) -> RedirectResponse:
    # To report.html by its own URL, where the relative links it holds resolve.
    return RedirectResponse(f"{quote(run_id, safe='')}/report.html")


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
