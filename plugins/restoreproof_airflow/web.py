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

import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from restoreproof_airflow.hooks import RestoreproofHook
from verification.errors import StoreUnavailableError
from verification.orchestration import DAG_ID
from verification.reports.html_report import env
from verification.reports.index_pages import render_store_page
from verification.results import ResultStore
from verification.results.summaries import RunPage

PAGE_SIZE = 50
DOT_SEGMENT = "a path with a '..' segment is not part of any report"
# Every answer carries these. A report folder holds what the restored server and the tools printed
# (evidence): text an attacker can shape (a table name, a log line). Served from Airflow's own origin, such a
# file must never be taken for a page (nosniff) nor run anything if it were (a sandboxed document, no script).
NOSNIFF = "nosniff"
FILE_POLICY = "sandbox; default-src 'none'"
# Our own pages (the runs page, report.html, the refusal): report.html's charts are plotly.js from the
# report folder's assets and an inline script with each chart's data (plotly escapes what it embeds); the
# pages load nothing from elsewhere, send nothing anywhere, and are framed only by Airflow's UI (same origin).
PAGE_POLICY = ("default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
               "img-src 'self' data:; font-src 'self' data:; base-uri 'none'; form-action 'none'; "
               "frame-ancestors 'self'")
PAGE_HEADERS = {"Content-Security-Policy": PAGE_POLICY}
T = TypeVar("T")


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
    app.middleware("http")(with_security_headers)
    # Starlette types a handler as taking any Exception; this one is registered for its HTTPException only.
    app.add_exception_handler(StarletteHTTPException, refused)  # type: ignore[arg-type]
    return app


async def with_security_headers(request: Request,
                                call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """nosniff on every answer; the sandbox policy on every answer that is not one of our pages (they
    set PAGE_POLICY themselves): a file of a report folder, an asset, an error."""
    response = await call_next(request)
    response.headers["X-Content-Type-Options"] = NOSNIFF
    response.headers.setdefault("Content-Security-Policy", FILE_POLICY)
    return response


class PageStore:
    """The results store the page reads: one per API-server process and store, opened on the first request
    that needs it. Opened per request, each request brought the store's schema up to date (Alembic) and,
    with the store down, waited out results_retry's tries (30 s by default) on one of the API server's
    threads. The page tries once: a store that does not answer is a 503 naming it (password masked), at once;
    the next request tries again."""

    def __init__(self) -> None:
        self._stores: dict[str, ResultStore] = {}
        self._lock = threading.Lock()

    def read(self, call: Callable[[ResultStore], T], what: str) -> T:
        try:
            store = self._store()
            return store.retrying(lambda: call(store), what)
        except StoreUnavailableError as exc:
            raise HTTPException(503, str(exc)) from None

    def _store(self) -> ResultStore:
        with RestoreproofHook() as hook:
            settings = hook.settings
        url = settings.results_database_url
        with self._lock:  # one opening per store, whichever thread of the server asks first
            if url not in self._stores:
                self._stores[url] = ResultStore(url, settings.results_retry.model_copy(update={"attempts": 1}))
            return self._stores[url]


store = PageStore()


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
    return HTMLResponse(html, status_code=exc.status_code, headers={**(exc.headers or {}), **PAGE_HEADERS})


@routes.get("/", response_class=HTMLResponse)
def runs(page: Annotated[int, Query(ge=1, description="1: the newest runs")] = 1) -> HTMLResponse:
    found = store.read(lambda opened: opened.run_page(page, PAGE_SIZE), "reading a page of runs")
    if page > found.pages:
        raise HTTPException(404, f"there is no page {page}: {found.total} runs make {found.pages} pages")
    return HTMLResponse(render_runs(found), headers=PAGE_HEADERS)


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
    folders = store.read(ResultStore.report_folders, "listing the report folders")
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
    run = store.read(lambda opened: opened.run(run_id), "reading a run")
    if run is None or not run.report_dir:
        raise HTTPException(404, f"no report for run {run_id}")
    folder = Path(run.report_dir).resolve()
    path = (folder / name).resolve()
    if folder not in path.parents or not path.is_file():
        raise HTTPException(404, f"{name} is not part of run {run_id}'s report")
    # report.html is our page; every other file of the folder is served sandboxed (with_security_headers).
    return FileResponse(path, headers=PAGE_HEADERS if path == folder / "report.html" else None)
