"""The top of report.html from a real `restoreproof verify` of the demo repository: the proof line, the
targets' origin, and a signature command that, run as the page says, finds the folder intact."""

from __future__ import annotations

import html
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.integration.conftest import leftovers
from tests.integration.devtools import CHROMIUM, Chromium
from tests.integration.test_html_chromium import ARTIFACTS, DRAWN, screenshot
from verification.reports.summary import PUBLIC_KEY_PLACEHOLDER

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "verification.cli"]


def top(page: str) -> str:
    section = page.split('<section class="summary" id="summary">', 1)[1].split("</section>", 1)[0]
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", section).split()))


def test_a_real_run_says_its_proof_targets_and_how_to_check_its_signature(demo, tmp_path):
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    for name in ("RESTOREPROOF_CONFIG", "RESTOREPROOF_EVIDENCE__SIGNING_KEY", "RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE",
                 "RESTOREPROOF_STATE_DIR"):
        env.pop(name, None)
    reports = tmp_path / "reports"
    run = subprocess.run([*CLI, "verify", str(demo.repository), "--report-dir", str(reports)], capture_output=True,
                         text=True, timeout=900, env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    page = next(reports.glob("*/report.html"))
    summary = top(page.read_text())
    for database in ("demo1", "demo2"):
        proof = re.search(rf"{database} passed restored to \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d UTC \([^)]+\); "
                          r"checks run: ([^.]*?) target", summary)
        assert proof is not None, summary
        ran = proof.group(1)
        assert all(name in ran for name in ("pg_amcheck", "pg_checksums", "pgbackrest_verify", "data suite")), ran
        assert f"default (rto.default_seconds); set rto.databases.{database}" in summary
        assert f"default (rpo.default_seconds); set rpo.databases.{database}" in summary
    assert "target 14400 s (4.0 h)" in summary
    assert "Evidence: signed." in summary
    command = re.search(r"restoreproof evidence verify \S+ --public-key \S+", summary)
    assert command is not None, summary
    argv = shlex.split(command.group(0))
    assert argv[3] == str(page.parent.resolve()) and argv[-1] == PUBLIC_KEY_PLACEHOLDER
    # On the signing host, as the page says, the check runs without --public-key: the configured key.
    checked = subprocess.run([*CLI, *argv[1:4]], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert checked.returncode == 0, checked.stderr
    assert "intact" in checked.stdout  # a result: on stdout
    if os.access(CHROMIUM, os.X_OK):
        ARTIFACTS.mkdir(exist_ok=True)
        with Chromium(tmp_path / "chromium", width=1280, height=1100) as browser:
            browser.navigate(page.as_uri())
            browser.wait(DRAWN.format(count=page.read_text().count('<div class="rp-chart"')), "every chart drawn")
            assert browser.js("document.documentElement.scrollWidth") <= 1280
            screenshot(browser, ARTIFACTS / "report-cli-1280.png")
            for number in (1, 2):
                screenshot(browser, ARTIFACTS / f"report-cli-1280-history-{number}.png", of=f"#rp-history-{number}")
    assert leftovers(page.parent.name) == []
