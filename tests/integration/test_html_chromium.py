"""report.html and index.html in a real browser: headless Chromium, offline, must actually draw every chart.

Unit tests prove the chart data is in the page; only a browser proves plotly.js ran on it: here the report
folder's one copy (REPORT_DIR/assets/), loaded by the page from file:// under its Content-Security-Policy.
The screenshots are kept in test-artifacts/ (git-ignored) for a person to look at.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.devtools import running
from tests.unit.factories import typed_report
from verification.model import RunResult
from verification.report_model import RunReport
from verification.reports import write_reports
from verification.reports.assets import plotly_asset
from verification.reports.index_pages import write_index
from verification.results import ResultStore

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
SAMPLE = ROOT / "tests" / "fixtures" / "reports" / "report-1.3.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TIMEOUT = 120

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason=f"{CHROMIUM} is not installed (Debian package chromium)")


@pytest.fixture(scope="session", autouse=True)
def _require_docker() -> None:
    """Overrides the folder's Docker check: a browser test needs no Docker engine."""


@pytest.fixture
def browser_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "chromium"
    (home / "home").mkdir(parents=True)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def chromium(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run headless Chromium in its own process group, with a private profile; leave no process behind."""
    profile = home / "profile"
    command = [CHROMIUM, "--headless=new", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={profile}", "--window-size=1400,3000", "--virtual-time-budget=10000", *args]
    env = {**os.environ, "HOME": str(home / "home")}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"chromium did not finish in {TIMEOUT} s: {' '.join(command)}")
    finally:
        # Helpers (zygote, crashpad handler) may outlive the browser; they share its process group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert leftovers(profile) == [], "chromium processes outlived the test"
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def leftovers(profile: Path) -> list[int]:
    """Processes still running with this test's private profile on their command line."""
    return running(profile)


def assert_drew(home: Path, page: Path, screenshot: Path) -> str:
    html = page.read_text()
    kinds = re.findall(r'<div class="rp-chart" data-chart="(\w+)">', html)
    assert kinds, "the page has no chart containers"

    shot = chromium(home, f"--screenshot={screenshot}", page.as_uri())
    assert screenshot.exists(), shot.stderr.decode(errors="replace")[-2000:]
    data = screenshot.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 20 * 1024, f"the screenshot is only {len(data)} bytes: a blank page?"

    dom = chromium(home, "--dump-dom", page.as_uri()).stdout.decode()
    containers = dom.split('class="rp-chart"')[1:]
    assert len(containers) == len(kinds)
    # Each container up to the next one must hold plotly's drawn SVG: the data alone draws nothing.
    for kind, container in zip(kinds, containers, strict=True):
        assert 'class="main-svg"' in container, f"the {kind} chart did not draw"
    assert dom.count('class="main-svg"') >= len(kinds)
    return dom


def test_report_charts_draw_offline_in_chromium(tmp_path, browser_home):
    reports = tmp_path / "reports"
    outputs = write_reports(typed_report(json.loads(SAMPLE.read_text())), reports / "20261122T010000Z-abc123")
    page = outputs.html_path
    assert page.stat().st_size < 1024 * 1024
    assert (reports / "assets" / plotly_asset().name).is_file()  # the one file the page loads, beside its folder
    ARTIFACTS.mkdir(exist_ok=True)
    dom = assert_drew(browser_home, page, ARTIFACTS / "report-screenshot.png")
    assert 'id="rp-no-plotly" class="alerts" hidden=""' in dom  # plotly.js loaded: the notice stays hidden


def test_a_report_copied_without_the_assets_says_why_it_has_no_charts(tmp_path, browser_home):
    reports = tmp_path / "reports"
    outputs = write_reports(typed_report(json.loads(SAMPLE.read_text())), reports / "20261122T010000Z-abc123")
    alone = tmp_path / "copy" / "20261122T010000Z-abc123"
    alone.parent.mkdir()
    alone.mkdir()
    (alone / "report.html").write_bytes(outputs.html_path.read_bytes())  # the run folder alone, e-mailed or copied
    dom = chromium(browser_home, "--dump-dom", (alone / "report.html").as_uri()).stdout.decode()
    notice = re.search(r'<p id="rp-no-plotly" class="alerts"( hidden="")?>(.*?)</p>', dom, re.S)
    assert notice is not None and notice.group(1) is None, "the notice must be shown"
    assert f"plotly.js did not load from <code>../assets/{plotly_asset().name}</code>" in " ".join(
        notice.group(2).split())
    assert 'class="main-svg"' not in dom  # nothing drawn, and the page says why
    assert "pg_amcheck: 2 corrupt blocks in public.t" in dom  # the rest of the report is all there


def test_subresource_integrity_would_keep_plotly_from_loading_over_file_urls(tmp_path, browser_home):
    """Why the page's <script> carries no integrity="sha384-...": Chromium enforces Subresource Integrity
    only on a CORS-enabled fetch, and a page opened from file:// (an opaque origin) can make none, so it
    refuses the script whatever its hash ("the resource requires the request to be CORS enabled to check
    the integrity"). The asset's SHA-256 is in the page, and the signed manifest holds it instead. Should
    a Chromium ever load it, this fails: then the attribute can be added."""
    import base64
    import hashlib

    reports = tmp_path / "reports"
    outputs = write_reports(typed_report(json.loads(SAMPLE.read_text())), reports / "20261122T010000Z-abc123")
    html = outputs.html_path.read_text()
    tag = f'<script src="../assets/{plotly_asset().name}"></script>'
    assert tag in html and "integrity=" not in html
    asset = (reports / "assets" / plotly_asset().name).read_bytes()
    digest = base64.b64encode(hashlib.sha384(asset).digest()).decode()  # the right hash of the file written
    outputs.html_path.write_text(html.replace(tag, tag.replace("></script>", f' integrity="sha384-{digest}">'
                                                                              "</script>")))
    dom = chromium(browser_home, "--dump-dom", outputs.html_path.as_uri()).stdout.decode()
    assert re.search(r'<p id="rp-no-plotly" class="alerts">', dom), "plotly.js loaded with integrity over file://"
    assert 'class="main-svg"' not in dom


def test_index_chart_draws_in_chromium(tmp_path, browser_home):
    report = RunReport.model_validate_json(SAMPLE.read_text())
    reports = tmp_path / "reports"
    store = ResultStore(f"sqlite:///{tmp_path}/results.db")
    for day in (20, 21, 22):
        run_id = f"202611{day}T010000Z-abc{day}"
        started = report.started_at.replace(day=day)
        store.start_run(RunResult(run_id=run_id, engine="postgres", source="/b", started_at=started),
                        reports / run_id)
        for entry in report.databases:
            store.record_database(run_id, entry)
        store.finish_run(run_id, started, str(report.verdict))
        (reports / run_id).mkdir(parents=True)
    try:
        index = write_index(reports, store)
    finally:
        store.close()
    ARTIFACTS.mkdir(exist_ok=True)
    assert_drew(browser_home, index, ARTIFACTS / "index-screenshot.png")
