"""report.html and index.html in a real browser: headless Chromium, offline, must actually draw every chart.

Unit tests prove the chart data is in the page; only a browser proves plotly.js ran on it: here the report
folder's one copy (REPORT_DIR/assets/), loaded by the page from file:// under its Content-Security-Policy.
The screenshots are kept in test-artifacts/ (git-ignored) for a person to look at.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.devtools import Chromium, running
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


# ---- the page as an auditor reads it, at the widths of a laptop and of a desktop --------------------------------

WIDTHS = (1280, 1920)
# Lines of text an element's content takes where the browser laid it out: the distinct tops of its boxes.
LINES = """(e => { const r = document.createRange(); r.selectNodeContents(e);
  return new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top))).size; })"""
DRAWN = "window.Plotly && document.querySelectorAll('.rp-chart .main-svg').length >= {count}"


def auditor_report(monkeypatch: pytest.MonkeyPatch, reports: Path) -> Path:
    """demo1 passed against the default RTO; demo2 failed before its restore; the folder signed."""
    from tests.unit.reports.test_html_report import never_online
    from verification.config import load_settings

    data = never_online(json.loads(SAMPLE.read_text()))
    for database, rto in zip(data["databases"], ("default", "configured"), strict=True):
        database["objectives"]["rto"]["target_source"] = rto
        database["objectives"]["rpo"]["target_source"] = "configured"
    # demo1: two runs 30 s apart, too few for a trend; their axis must not be drawn in milliseconds.
    drift = data["databases"][0]["drift"]
    last = drift["series"][-1]
    earlier = {**drift["series"][-2], "at": (datetime.fromisoformat(last["at"]) - timedelta(seconds=30)).isoformat()}
    drift.update(series=[earlier, last], trend=None, crossing=None, min_runs=5, min_days=3.0)
    monkeypatch.setenv("RESTOREPROOF_STATE_DIR", str(reports.parent / "state"))
    for name in ("RESTOREPROOF_CONFIG", "RESTOREPROOF_EVIDENCE__SIGNING_KEY", "RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    return write_reports(typed_report(data), reports / "20261122T010000Z-abc123", load_settings(),
                         index=False).html_path


def screenshot(browser: Chromium, path: Path, *, full: bool = False, of: str | None = None) -> None:
    """The first screen, the whole page (full) or one element (`of`, a CSS selector); kept in test-artifacts/
    for a person to look at."""
    params: dict[str, object] = {"format": "png"}
    if full or of:
        box = (f"(r => [r.x + scrollX, r.y + scrollY, r.width, r.height])"
               f"(document.querySelector({json.dumps(of)}).getBoundingClientRect())" if of else
               "[0, 0, document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        x, y, width, height = browser.js(box)
        params |= {"captureBeyondViewport": True,
                   "clip": {"x": x, "y": y, "width": width, "height": height, "scale": 1}}
    data = base64.b64decode(browser.send("Page.captureScreenshot", **params)["data"])
    assert data.startswith(PNG_MAGIC)
    path.write_bytes(data)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_report_reads_at_laptop_and_desktop_widths(tmp_path, browser_home, monkeypatch, width):
    page = auditor_report(monkeypatch, tmp_path / "reports")
    charts = page.read_text().count('<div class="rp-chart"')
    ARTIFACTS.mkdir(exist_ok=True)
    with Chromium(browser_home, width=width, height=1100) as browser:
        browser.navigate(page.as_uri())
        browser.wait(DRAWN.format(count=charts), "every chart drawn")
        summary = " ".join(browser.js("document.querySelector('#summary').innerText").split())
        assert "demo1 passed restored to 2026-11-22 01:05:00 UTC (last completed transaction replayed); " \
               "checks run: pg_amcheck" in summary
        assert "demo2 error not restored: pgbackrest restore: exit 82: unable to open file backup.manifest" in summary
        assert "default (rto.default_seconds); set rto.databases.demo1" in summary
        assert "configured (rpo.databases.demo2)" in summary
        assert "Evidence: signed." in summary and "restoreproof evidence verify " in summary
        history = " ".join(browser.js("document.querySelector('#db-1 ~ h3 ~ p').parentElement.innerText").split())
        assert "Too few runs for a trend (2 of 5 measured runs; 0.0 of 3 days)" in history
        ticks = browser.js("[...document.querySelectorAll('#rp-history-1 .xtick text')].map(t => t.textContent)")
        assert ticks and not [t for t in ticks if re.search(r":\d\d\.\d|\.\d{3}", t)], ticks
        # Nothing wider than the window, and every short cell of the verdict table on one line.
        assert browser.js("document.documentElement.scrollWidth") <= width
        cells = browser.js(f"[...document.querySelectorAll('table.verdicts .nowrap')].map({LINES})")
        assert cells and all(lines == 1 for lines in cells), cells
        # The RPO: the gap and its verdict on one line, the target on the next; never a word a line.
        rpo = browser.js(f"[...document.querySelectorAll('table.verdicts tr')].slice(1).map(r => {LINES}(r.cells[8]))")
        assert rpo == [2, 2], rpo
        headers = browser.js(f"[...document.querySelectorAll('table.verdicts th')].map({LINES})")
        assert max(headers) <= 2, headers
        # The summary's objective cells stay a readable column, not a strip of single words.
        widths = browser.js("[...document.querySelectorAll('#summary td.objective-cell')].map(c => c.offsetWidth)")
        assert min(widths) >= 220, widths
        screenshot(browser, ARTIFACTS / f"report-{width}.png")
        screenshot(browser, ARTIFACTS / f"report-{width}-full.png", full=True)
        for number in (1, 2):
            screenshot(browser, ARTIFACTS / f"report-{width}-history-{number}.png",
                       of=f'#rp-history-{number}')


def many_databases_index(tmp_path: Path, count: int) -> Path:
    report = RunReport.model_validate_json(SAMPLE.read_text())
    reports = tmp_path / "reports"
    store = ResultStore(f"sqlite:///{tmp_path}/results.db")
    entry = report.databases[0]
    try:
        for day in (18, 19, 20, 21, 22):
            run_id = f"202611{day}T010000Z-abc{day}"
            started = report.started_at.replace(day=day)
            store.start_run(RunResult(run_id=run_id, engine="postgres", source="/b", started_at=started),
                            reports / run_id)
            for number in range(count):
                seconds = 30 + 20 * number + day  # apart, so each line is its own
                rto = entry.objectives.rto.model_copy(update={"measured_seconds": seconds}) if entry.objectives else None
                objectives = entry.objectives.model_copy(update={"rto": rto}) if entry.objectives and rto else None
                store.record_database(run_id, entry.model_copy(update={
                    "database": f"orders_{number:02d}", "recovery_seconds": seconds, "objectives": objectives}))
            store.finish_run(run_id, started, str(report.verdict))
            (reports / run_id).mkdir(parents=True)
        return write_index(reports, store)
    finally:
        store.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_index_chart_of_45_databases_keeps_its_plot(tmp_path, browser_home, width):
    index = many_databases_index(tmp_path, 45)
    ARTIFACTS.mkdir(exist_ok=True)
    with Chromium(browser_home, width=width, height=1000) as browser:
        browser.navigate(index.as_uri())
        browser.wait(DRAWN.format(count=1), "the chart drawn")
        plot = browser.js("(r => [r.width, r.height])(document.querySelector('.rp-chart .nsewdrag').getBoundingClientRect())")
        chart = browser.js("document.querySelector('.rp-chart').getBoundingClientRect().width")
        assert plot[1] >= 250, f"the plot is a strip: {plot}"
        assert plot[0] >= 0.6 * chart, f"the legend takes the plot's width: {plot} of {chart}"
        entries = browser.js("document.querySelectorAll('.rp-chart .legend .traces').length")
        assert entries >= 10  # a column of names beside the plot, scrolled past what fits
        screenshot(browser, ARTIFACTS / f"index-45-{width}.png")
