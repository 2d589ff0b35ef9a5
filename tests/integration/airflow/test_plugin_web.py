"""The page the plugin adds to the Airflow UI: the runs from the store, paged, and their reports, open only
to whom Airflow's auth manager lets read the DAG restore_verification.

Two real Airflows: the API application built in this process (Airflow's create_app, its simple auth
manager, a token from its own login) for what the page shows, and a real `airflow api-server` in its own
AIRFLOW_HOME for who may see it, from HTTP clients and from headless Chromium logging in through
Airflow's login page. The screenshots are kept in test-artifacts/ (git-ignored) for a person to look at.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from fastapi import HTTPException
from fastapi.testclient import TestClient

from tests.integration.airflow.conftest import ROOT
from tests.integration.devtools import CHROMIUM, Chromium, running
from tests.unit.reports.test_json_report import make_run
from verification.config import load_settings
from verification.orchestration import DAG_ID
from verification.reports import write_reports
from verification.reports.assets import plotly_asset
from verification.reports.json_report import build_report
from verification.results import ResultStore

ARTIFACTS = ROOT / "test-artifacts"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EVIDENCE = "LOG: redo starts"  # the evidence file the tests serve


def record_run(report_dir: Path, results_url: str) -> str:
    """A finished run as the pipeline leaves it: its reports and an evidence file written, its rows in the store."""
    run = make_run()
    report = build_report(run)
    run_dir = report_dir / run.run_id
    write_reports(report, run_dir)
    (run_dir / "evidence" / "demo1").mkdir(parents=True, exist_ok=True)  # recorded again: the run starts anew
    (run_dir / "evidence" / "demo1" / "server.log").write_text(EVIDENCE)
    store = ResultStore(results_url)
    try:
        store.start_run(run, run_dir)
        for entry in report.databases:
            store.record_database(run.run_id, entry)
        store.finish_run(run.run_id, report.finished_at, str(report.verdict))
    finally:
        store.close()
    return run.run_id


# --- What the page shows: Airflow's API application in this process, as its admin ---------------------------


@pytest.fixture(scope="module")
def airflow_client(airflow_db: Path) -> Iterator[TestClient]:
    """Airflow's own API application (the conftest's AIRFLOW_HOME: the simple auth manager, its admin), the
    plugin mounted by Airflow as the api-server mounts it; logged in through Airflow's login endpoint."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

    client = TestClient(create_app("core"))
    password = SimpleAuthManager.get_passwords()["admin"]  # written by the auth manager's init, as for a person
    login = client.post("/auth/token", json={"username": "admin", "password": password})
    assert login.status_code == 201, login.text
    client.headers["Authorization"] = f"Bearer {login.json()['access_token']}"
    yield client
    client.close()
    purge_cached_app()


def test_lists_runs_and_serves_their_reports_only(airflow_env, airflow_client):
    settings = load_settings()
    run_id = record_run(settings.report_dir, settings.results_database_url)
    (airflow_env / "secret.txt").write_text("not a report")
    client = airflow_client

    assert client.get("/restoreproof/", headers={"Authorization": ""}).status_code == 401  # the same app, no login
    page = client.get("/restoreproof/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f'<a href="reports/{run_id}/report.html"><code>{run_id}</code></a>' in page.text
    assert '<span class="badge failed">failed</span>' in page.text
    assert "1 run in the results store, newest first: page 1 of 1." in page.text
    assert '<span class="badge passed">demo1: passed</span>' in page.text  # the databases, from the store
    html = client.get(f"/restoreproof/reports/{run_id}")  # the old link: to report.html, where its relative links resolve
    assert html.status_code == 200 and "<title>restoreproof run" in html.text
    assert str(html.url).endswith(f"/restoreproof/reports/{run_id}/report.html")
    # The plotly.js report.html loads as ../assets/<name>, from the report folder, by the same guard.
    asset = plotly_asset()
    assert f'<script src="../assets/{asset.name}">' in html.text
    served = client.get(f"/restoreproof/reports/{run_id}/../assets/{asset.name}")  # as the browser resolves it
    assert served.status_code == 200 and served.content == asset.data
    assert served.headers["content-type"].startswith("text/javascript")
    assert client.get("/restoreproof/reports/assets/plotly-0.0.0.min.js").status_code == 404
    assert client.get(f"/restoreproof/reports/{run_id}/report.json").json()["run_id"] == run_id
    evidence = client.get(f"/restoreproof/reports/{run_id}/evidence/demo1/server.log")
    assert evidence.text == EVIDENCE
    # Evidence holds what servers and tools printed: never sniffed into a page, never able to run a script.
    for answer in (evidence, served, client.get("/restoreproof/reports/no-such-run")):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["content-security-policy"] == "sandbox; default-src 'none'"
    (settings.report_dir / run_id / "evidence" / "demo1" / "page.html").write_text("<script>alert(1)</script>")
    shaped = client.get(f"/restoreproof/reports/{run_id}/evidence/demo1/page.html")
    assert shaped.headers["content-security-policy"].startswith("sandbox;")
    for ours in (page, html):  # our pages: scripts from this origin only, framed only by Airflow's UI
        policy = ours.headers["content-security-policy"]
        assert "script-src 'self' 'unsafe-inline'" in policy and "frame-ancestors 'self'" in policy
        assert "sandbox" not in policy and ours.headers["x-content-type-options"] == "nosniff"
    assert client.get("/restoreproof/reports/no-such-run").status_code == 404
    # The guards themselves, called with what a crafted URL decodes to:
    from restoreproof_airflow.web import _report_file, report_asset

    with pytest.raises(HTTPException) as refused:
        _report_file(run_id, "../../secret.txt")
    assert refused.value.status_code == 404 and "not part of run" in refused.value.detail
    (settings.report_dir / "assets" / "link.js").symlink_to(airflow_env / "secret.txt")
    for name in ("../../secret.txt", "..", "link.js", "nul\0.js"):
        with pytest.raises(HTTPException) as refused:
            report_asset(name)
        assert refused.value.status_code == 404 and "is not in any report folder's assets" in refused.value.detail


def test_a_store_that_does_not_answer_is_a_503_at_once_naming_it_without_its_password(
        airflow_env, airflow_client, monkeypatch):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("RESTOREPROOF_RESULTS_URL",
                       f"postgresql+psycopg://rp:hunter2-not-shown@127.0.0.1:{port}/results")
    started = time.monotonic()
    for path in ("/restoreproof/", "/restoreproof/reports/some-run/report.html",
                 "/restoreproof/reports/assets/plotly.min.js"):
        answer = airflow_client.get(path)
        assert answer.status_code == 503, (path, answer.text)
        said = answer.json()["detail"]
        assert f"127.0.0.1:{port}/results" in said and "did not answer" in said
        assert "hunter2-not-shown" not in answer.text
    assert time.monotonic() - started < 10  # tried once, not results_retry's 30 s per request
    monkeypatch.delenv("RESTOREPROOF_RESULTS_URL")
    assert airflow_client.get("/restoreproof/").status_code == 200  # the next request tries again


def test_ten_thousand_runs_are_paged_newest_first(airflow_env, airflow_client):
    from restoreproof_airflow.web import PAGE_SIZE
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
    client = airflow_client
    links = re.compile(r'<a href="reports/(r\d+)/report.html">')
    first = client.get("/restoreproof/").text
    assert "10000 runs in the results store, newest first: page 1 of 200." in first
    assert links.findall(first) == [f"r{n:05d}" for n in range(9999, 9999 - PAGE_SIZE, -1)]
    assert '<a href="?page=2">older</a>' in first and ">newer<" not in first
    last = client.get("/restoreproof/?page=200").text
    assert links.findall(last) == [f"r{n:05d}" for n in range(49, -1, -1)]
    assert '<a href="?page=199">newer</a>' in last and ">older<" not in last
    assert client.get("/restoreproof/?page=201").status_code == 404
    assert client.get("/restoreproof/?page=0").status_code == 422
    # A page of 10,000 runs costs what a page of a few does: one page's queries (the whole request, through
    # Airflow's app and its auth; generous for a shared machine: measured 13 to 15 ms).
    took = []
    for number in (1, 100, 200):
        started = time.perf_counter()
        assert client.get(f"/restoreproof/?page={number}").status_code == 200
        took.append(time.perf_counter() - started)
    assert max(took) < 2, took


def test_loading_the_plugin_imports_nothing_of_the_api_server():
    """Airflow loads the plugin in every task's process: the page's application, and the API server's security
    it needs, are built only when the API server serves it (importing them cost a task about a second and a
    warning line in its log)."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys; import restoreproof_plugin; "
         "print(sorted(m for m in sys.modules if m.startswith('airflow.api_fastapi')))"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "plugins"), str(ROOT)])},
        capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip().splitlines()[-1] == "[]"


# --- Who may see it: a real `airflow api-server`, two users -------------------------------------------------

ADMIN, VIEWER = "admin", "viewer"
TEAM_DAG = "analytics_daily"  # the viewer's team's DAG: a viewer who reads DAGs, only not ours


@dataclass
class ApiServer:
    url: str
    home: Path
    passwords: dict[str, str]
    report_dir: Path
    results_url: str
    log: Path

    def token(self, user: str) -> str:
        answer = requests.post(f"{self.url}/auth/token", json={"username": user, "password": self.passwords[user]},
                               timeout=30)
        assert answer.status_code == 201, answer.text
        token: str = answer.json()["access_token"]
        return token


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def airflow(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "airflow", *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"airflow {' '.join(args)}: {done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """`airflow api-server` on a free 127.0.0.1 port, its own AIRFLOW_HOME, the simple auth manager with two
    users: `admin` (role admin) and `viewer` (role viewer, in the team `analytics`).

    Every role of the simple auth manager may read every DAG (viewer and up); the one way it refuses a logged-in
    user a DAG is Airflow's multi-team mode: a DAG of another team's bundle. So our DAGs' bundle belongs to the
    team `recovery` and the viewer's team has a bundle of its own with one DAG, which the viewer may read."""
    home = tmp_path_factory.mktemp("api-server")
    team_dags = home / "analytics-dags"
    team_dags.mkdir()
    (team_dags / f"{TEAM_DAG}.py").write_text(
        "from datetime import datetime\nfrom airflow.sdk import DAG\n\n"
        f"with DAG({TEAM_DAG!r}, schedule=None, start_date=datetime(2026, 1, 1)):\n    pass\n")
    passwords = {ADMIN: secrets.token_urlsafe(12), VIEWER: secrets.token_urlsafe(12)}
    (home / "passwords.json").write_text(json.dumps(passwords))
    bundles = [{"name": "dags-folder", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {}, "team_name": "recovery"},
               {"name": "analytics", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(team_dags)}, "team_name": "analytics"}]
    server = ApiServer(url=f"http://127.0.0.1:{free_port()}", home=home, passwords=passwords,
                       report_dir=home / "reports", results_url=f"sqlite:///{home}/results.db",
                       log=home / "api-server.log")
    env = {**os.environ,
           "AIRFLOW_HOME": str(home / "airflow"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
           "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
           "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager."
                                          "SimpleAuthManager",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin,{VIEWER}:viewer:analytics",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
           "AIRFLOW__CORE__MULTI_TEAM": "True",
           "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
           "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "RESTOREPROOF_RESULTS_URL": server.results_url,
           "RESTOREPROOF_REPORT_DIR": str(server.report_dir),
           "XDG_STATE_HOME": str(home / "state")}
    airflow(env, "db", "migrate")
    for team in ("recovery", "analytics"):
        airflow(env, "teams", "create", team)
    airflow(env, "dags", "reserialize")  # the bundles' DAGs into the database, each with its bundle's team
    port = server.url.rsplit(":", 1)[1]
    with server.log.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "airflow", "api-server", "-H", "127.0.0.1", "-p", port,
                                    "-w", "1"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, f"api-server exited {process.returncode}: {server.log.read_text()[-3000:]}"
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(f"{server.url}/api/v2/monitor/health", timeout=5).status_code == 200:
                    break
            assert time.monotonic() < deadline, f"api-server not up in 180 s: {server.log.read_text()[-3000:]}"
            time.sleep(0.5)
        yield server
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with contextlib.suppress(ProcessLookupError):  # its uvicorn workers, in its process group
            os.killpg(process.pid, signal.SIGKILL)


def raw_get(server: ApiServer, path: str, token: str | None) -> tuple[int, str]:
    """GET with the path sent byte for byte as given: no client folds its `..` away."""
    connection = http.client.HTTPConnection(server.url.removeprefix("http://"), timeout=30)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        answer = connection.getresponse()
        return answer.status, answer.read().decode(errors="replace")
    finally:
        connection.close()


def test_the_page_and_every_file_answer_only_to_who_may_read_the_dag(api_server):
    run_id = record_run(api_server.report_dir, api_server.results_url)
    (api_server.home / "secret.txt").write_text("not a report")
    asset = plotly_asset()
    files = {"/restoreproof/": f'<a href="reports/{run_id}/report.html">',
             "/restoreproof/?page=1": f'<a href="reports/{run_id}/report.html">',
             f"/restoreproof/reports/{run_id}/report.html": "<title>restoreproof run",
             f"/restoreproof/reports/{run_id}/report.json": f'"run_id": "{run_id}"',
             f"/restoreproof/reports/{run_id}/evidence/demo1/server.log": EVIDENCE,
             f"/restoreproof/reports/assets/{asset.name}": asset.data[:200].decode()}
    admin, viewer = api_server.token(ADMIN), api_server.token(VIEWER)
    forged = admin[:-8] + ("A" * 8 if not admin.endswith("A" * 8) else "B" * 8)
    dag = f"/api/v2/dags/{DAG_ID}"

    def get(path: str, *, bearer: str | None = None, cookie: str | None = None, html: bool = False
            ) -> requests.Response:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        if html:  # as a browser asks
            headers["Accept"] = "text/html,application/xhtml+xml,*/*;q=0.8"
        return requests.get(api_server.url + path, timeout=30, allow_redirects=False, headers=headers,
                            cookies={"_token": cookie} if cookie else {})

    # Airflow's own API says who may read the DAG: the viewer reads its team's DAG, not ours; the admin reads it.
    assert get(dag).status_code == 401
    assert get(dag, bearer=viewer).status_code == 403 and get(f"/api/v2/dags/{TEAM_DAG}", bearer=viewer).ok
    assert get(dag, bearer=admin).status_code == 200
    for path, content in files.items():
        # No login: 401; the viewer, by bearer token or by the UI's cookie: 403; a forged token: as Airflow's API.
        assert (get(path).status_code, get(path).json()) == (401, {"detail": "Not authenticated"}), path
        for denied in (get(path, bearer=viewer), get(path, cookie=viewer)):
            assert (denied.status_code, denied.json()) == (403, {"detail": "Forbidden"}), path
        assert get(path, bearer=forged).status_code == get(dag, bearer=forged).status_code == 403
        # A browser is told the same in a page saying why, with a way to Airflow's login when not logged in.
        page = get(path, html=True)
        assert page.status_code == 401 and "restoreproof: not logged in" in page.text, path
        assert 'href="/auth/login?next=' in page.text and content not in page.text
        page = get(path, cookie=viewer, html=True)
        assert page.status_code == 403 and f"read the DAG {DAG_ID}" in page.text and content not in page.text
        for allowed in (get(path, bearer=admin), get(path, cookie=admin)):
            assert allowed.status_code == 200 and content in allowed.text, path
    redirect = get(f"/restoreproof/reports/{run_id}", bearer=admin)  # the short link, to report.html
    assert (redirect.status_code, redirect.headers["location"]) == (307, f"{run_id}/report.html")
    assert get(f"/restoreproof/reports/{run_id}").status_code == 401
    # No way around the dependencies: FastAPI's own pages of the app are not there for anyone.
    for path in ("/restoreproof/docs", "/restoreproof/redoc", "/restoreproof/openapi.json"):
        assert {get(path).status_code, get(path, bearer=admin).status_code} == {404}, path
    # `..`, as sent or encoded: 404 for everyone, before and whatever the caller may see, and nothing read.
    for path in (f"/restoreproof/reports/{run_id}/../../secret.txt",
                 f"/restoreproof/reports/{run_id}/%2e%2e/%2e%2e/secret.txt",
                 f"/restoreproof/reports/{run_id}/..%2f..%2fsecret.txt",
                 "/restoreproof/reports/assets/..%2f..%2fsecret.txt",
                 "/restoreproof/reports/../reports/assets/x.js"):
        for token in (None, viewer, admin):
            status, body = raw_get(api_server, path, token)
            assert status == 404 and "not a report" not in body, (path, token and token[:12], status, body)


needs_chromium = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                        reason=f"{CHROMIUM} is not installed (Debian package chromium)")


def log_in(browser: Chromium, server: ApiServer, user: str) -> None:
    """Through Airflow's login page, as a person, from wherever the browser was sent to it."""
    browser.wait("location.pathname.startsWith('/auth/login')", "Airflow's login page")
    browser.type_into("input[name=username]", user)
    browser.type_into("input[name=password]", server.passwords[user])
    browser.click("document.querySelector('button[type=submit]')", "the login button")
    browser.wait("!location.pathname.startsWith('/auth')", f"{user} logged in")


def open_from_the_menu(browser: Chromium) -> None:
    """Browse -> Restore verification, as the plugin registers it in Airflow's navigation."""
    browser.click("[...document.querySelectorAll('nav button, button')].find(b => b.textContent.trim() === 'Browse')"
                  " || null", "the Browse menu")
    browser.click("[...document.querySelectorAll('[role=menuitem]')].find(m => m.textContent.trim() === "
                  "'Restore verification') || null", "the menu entry Restore verification")
    browser.wait("location.pathname.startsWith('/plugin/restoreproof')", "the plugin's view in the UI")


FRAME = "document.querySelector('iframe')"
FRAME_DOCUMENT = f"({FRAME} && {FRAME}.contentDocument)"


def assert_png(data: bytes, least_kb: int = 20) -> None:
    assert data.startswith(PNG_MAGIC) and len(data) > least_kb * 1024, f"the screenshot is only {len(data)} bytes"


@needs_chromium
def test_a_person_logs_in_opens_the_page_from_the_menu_and_a_report(api_server, tmp_path):
    run_id = record_run(api_server.report_dir, api_server.results_url)
    with Chromium(tmp_path / "admin") as browser:
        # Opened without a login, the page says so and links to Airflow's login, which comes back to it.
        browser.navigate(f"{api_server.url}/restoreproof/")
        assert browser.wait("document.querySelector('h1')?.textContent", "the refusal") == "restoreproof: not logged in"
        assert_png(browser.screenshot(ARTIFACTS / "airflow-restoreproof-not-logged-in.png"), 10)
        browser.click("[...document.querySelectorAll('a')].find(a => a.textContent === 'Log in') || null", "Log in")
        log_in(browser, api_server, ADMIN)
        browser.wait(f"location.pathname === '/restoreproof/' && document.body.innerText.includes({run_id!r})",
                     "back at the page, logged in")
        # In the UI: Browse -> Restore verification, the page inside Airflow's own, and a report from it.
        browser.navigate(f"{api_server.url}/")
        open_from_the_menu(browser)
        page = browser.wait(f"{FRAME_DOCUMENT} && {FRAME_DOCUMENT}.querySelector('h1')?.textContent === "
                            f"'restoreproof runs' && {FRAME_DOCUMENT}.body.innerText", "the runs page in the UI")
        assert run_id in page and "1 run in the results store" in page
        assert browser.js(f"{FRAME}.src") == f"{api_server.url}/restoreproof/"
        assert_png(browser.screenshot(ARTIFACTS / "airflow-restoreproof-page.png"))

        browser.click(f"{FRAME_DOCUMENT}.querySelector('a[href=\"reports/{run_id}/report.html\"]')",
                      "the run's link")
        charts = browser.wait(
            f"""(() => {{ const d = {FRAME_DOCUMENT};
                if (!d || !d.title.startsWith('restoreproof run')) return null;
                const boxes = [...d.querySelectorAll('.rp-chart')];
                return boxes.length && boxes.every(b => b.querySelector('.main-svg')) ? boxes.length : null; }})()""",
            "the report, every chart drawn by the plotly.js served under /restoreproof/")
        assert charts >= 1
        assert browser.js(f"{FRAME_DOCUMENT}.location.pathname") == f"/restoreproof/reports/{run_id}/report.html"
        assert browser.js(f"{FRAME_DOCUMENT}.getElementById('rp-no-plotly').hidden") is True
        assert_png(browser.screenshot(ARTIFACTS / "airflow-restoreproof-report.png"))

    with Chromium(tmp_path / "viewer") as browser:
        browser.navigate(f"{api_server.url}/")  # the UI sends whoever has no session to its login page
        log_in(browser, api_server, VIEWER)
        open_from_the_menu(browser)  # the simple auth manager shows every menu entry; the page itself refuses
        refused = browser.wait(f"{FRAME_DOCUMENT} && {FRAME_DOCUMENT}.querySelector('h1') && "
                               f"{FRAME_DOCUMENT}.body.innerText", "the page's answer to the viewer")
        assert refused.startswith("restoreproof: not for this user") and f"read the DAG {DAG_ID}" in refused
        assert run_id not in refused
        assert_png(browser.screenshot(ARTIFACTS / "airflow-restoreproof-forbidden.png"), 10)
    for person in ("admin", "viewer"):
        assert running(tmp_path / person / "profile") == [], "chromium processes outlived the test"
