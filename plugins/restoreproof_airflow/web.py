"""A page inside the Airflow 3 UI: the restoreproof runs, newest first and paged from the results store,
each opening its HTML report; and the report folders' files those reports load.

Reports say which databases exist, where their backups live and whether they can be restored, so the page
and every file under it answer only to whom Airflow's own auth manager (the one configured for the
deployment: simple, FAB, Keycloak...) lets read the DAG `restore_verification` (verification.orchestration
.DAG_ID), with the user taken as Airflow's API takes it: a bearer token, else the UI's session cookie. No
login: 401; a user who may not read that DAG: 403. restoreproof keeps no list of users of its own.

Airflow imports this module wherever it loads plugins, in every task's process too; Airflow's API server
security (its app, models, auth manager) is imported only when the API server first serves the page
(`app` builds the application then): in a task it cost about a second and a warning line in every log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from restoreproof_airflow.hooks import RestoreproofHook
from verification.orchestration import DAG_ID
from verification.reports.html_report import env
from verification.reports.index_pages import render_store_page
from verification.results.summaries import RunPage

PAGE_SIZE = 50
DOT_SEGMENT = "a path with a '..' segment is not part of any report"


def refuse_dot_segments(request: Request) -> None:
    """A path with a `..` segment (as sent, or %2e%2e: the server decodes it) is refused before anything
    else, for anyone. Answering it before the caller is known tells nothing: the answer depends on the
    URL's shape alone, never on which runs or files exist. (The routes below check again, by resolving.)"""
    if ".." in str(request.scope["path"]).split("/"):
        raise HTTPException(404, DOT_SEGMENT)


routes = APIRouter()


def create_app() -> FastAPI:
    """The page's application: every route behind both dependencies. FastAPI's automatic /docs and
    /openapi.json would be served without them, so there are none."""
    from airflow.api_fastapi.core_api.security import requires_access_dag

    app = FastAPI(title="restoreproof", description="Restore verification runs and their reports",
                  docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[Depends(refuse_dot_segments),
                                Depends(requires_access_dag("GET", param_dag_id=DAG_ID))])
    app.include_router(routes)
    # Starlette types a handler as taking any Exception; this one is registered for its HTTPException only.
    app.add_exception_handler(StarletteHTTPException, refused)  # type: ignore[arg-type]
    return app


class BuiltOnFirstRequest:
    """The ASGI application Airflow mounts at /restoreproof: create_app()'s, made when the first request
    comes (in the API server), not when a task's process loads the plugin."""

    def __init__(self) -> None:
        self.app: FastAPI | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app is None:  # no await before the assignment: one event loop makes one app
            self.app = create_app()
        await self.app(scope, receive, send)


app = BuiltOnFirstRequest()


async def refused(request: Request, exc: StarletteHTTPException) -> Response:
    """Airflow's refusal as its API gives it ({"detail": ...}, the same status), except to a browser (it asks
    for HTML) refused for who it is: there a page saying why, inside the Airflow UI where the page is opened."""
    if exc.status_code not in (401, 403) or "text/html" not in request.headers.get("accept", ""):
        return await http_exception_handler(request, exc)
    if exc.status_code == 401:
        heading, reason = "not logged in", "The reports are for Airflow's users: log in to Airflow to see them."
        from airflow.api_fastapi.app import get_auth_manager

        login: str | None = get_auth_manager().get_url_login(next_url=str(request.url))
    else:
        heading, login = "not for this user", None
        reason = (f"Airflow's auth manager does not let this user read the DAG {DAG_ID}, whose runs' reports "
                  "these are. Whoever manages Airflow's users can give that permission.")
    html = env.get_template("refused.html.j2").render(heading=heading, reason=reason, login=login, plotly=None)
    return HTMLResponse(html, status_code=exc.status_code, headers=exc.headers)


@routes.get("/", response_class=HTMLResponse)
def runs(page: Annotated[int, Query(ge=1, description="1: the newest runs")] = 1) -> str:
    with RestoreproofHook() as hook:
        found = hook.get_conn().run_page(page, PAGE_SIZE)
    if page > found.pages:
        raise HTTPException(404, f"there is no page {page}: {found.total} runs make {found.pages} pages")
    return render_runs(found)


def render_runs(found: RunPage) -> str:
    """One page of runs: a row per run, opening its report.html itself, not its folder: the report's
    relative links (evidence, ../assets) resolve from it."""
    links = {run.run_id: f"reports/{quote(run.run_id, safe='')}/report.html" if run.report_dir else None
             for run in found.runs}
    return render_store_page(found, links, lambda number: f"?page={number}")


@routes.get("/reports/assets/{name}")
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


@routes.get("/reports/{run_id}")
def report(run_id: str) -> RedirectResponse:
    # To report.html by its own URL, where the relative links it holds resolve.
    return RedirectResponse(f"{quote(run_id, safe='')}/report.html")


@routes.get("/reports/{run_id}/{name:path}")
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
