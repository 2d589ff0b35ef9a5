"""report.html and index.html in a real browser: headless Chromium, offline, must actually draw every chart.

Unit tests prove the chart data is in the page; only a browser proves plotly.js ran on it. The screenshots
are kept in test-artifacts/ (git-ignored) for a person to look at.
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

from tests.unit.factories import typed_report
from verification.reports.html_report import render_html, write_index

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
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:  # exited meanwhile, or not ours to read
            continue
        if f"--user-data-dir={profile}".encode() in cmdline:
            found.append(int(proc.name))
    return found


def assert_drew(home: Path, page: Path, screenshot: Path) -> None:
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


def test_report_charts_draw_offline_in_chromium(tmp_path, browser_home):
    run_dir = tmp_path / "reports" / "20261122T010000Z-abc123"
    run_dir.mkdir(parents=True)
    page = run_dir / "report.html"
    page.write_text(render_html(typed_report(json.loads(SAMPLE.read_text()))))
    ARTIFACTS.mkdir(exist_ok=True)
    assert_drew(browser_home, page, ARTIFACTS / "report-screenshot.png")


def test_index_chart_draws_in_chromium(tmp_path, browser_home):
    report = json.loads(SAMPLE.read_text())
    for day in (20, 21, 22):
        run_id = f"202611{day}T010000Z-abc{day}"
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "report.json").write_text(json.dumps(
            {**report, "run_id": run_id, "started_at": f"2026-11-{day}T01:00:00+00:00"}))
    ARTIFACTS.mkdir(exist_ok=True)
    assert_drew(browser_home, write_index(tmp_path), ARTIFACTS / "index-screenshot.png")
