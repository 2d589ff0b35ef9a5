"""The top of report.html for an auditor: verdict, proof, objectives with their origin, the signature and
the command that checks it; reasons said once; no trend from too few runs."""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import TESTS
from tests.unit.factories import typed_report
from tests.unit.reports.test_html_report import never_online
from verification.config import load_settings
from verification.evidence import generate_key_pair
from verification.reports import write_reports
from verification.reports.charts import NONE
from verification.reports.html_report import render_html
from verification.reports.summary import PUBLIC_KEY_PLACEHOLDER

SAMPLE = TESTS / "fixtures" / "reports" / "report-1.3.json"
RUN = "20261122T010000Z-abc123"


@pytest.fixture
def report() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text())


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path, monkeypatch):
    # Nothing may read the developer's configuration or write a key into their home.
    monkeypatch.setenv("RESTOREPROOF_STATE_DIR", str(tmp_path / "state"))
    for name in ("RESTOREPROOF_CONFIG", "RESTOREPROOF_EVIDENCE__SIGNING", "RESTOREPROOF_EVIDENCE__SIGNING_KEY",
                 "RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)


def top(html: str) -> str:
    return " ".join(html.split('<section class="summary" id="summary">', 1)[1].split("</section>", 1)[0].split())


def with_origins(report: dict[str, Any], rto: str, rpo: str) -> dict[str, Any]:
    changed = copy.deepcopy(report)
    for database in changed["databases"]:
        database["objectives"]["rto"]["target_source"] = rto
        database["objectives"]["rpo"]["target_source"] = rpo
    return changed


def test_the_top_gives_each_database_its_verdict_and_proof_in_one_line(report):
    summary = top(render_html(typed_report(report)))
    assert ('<span class="badge passed">passed</span> <span class="proof">restored to 2026-11-22 01:05:00 UTC '
            "(last completed transaction replayed); checks run: pg_amcheck</span>") in summary
    assert '<span class="badge failed">failed</span>' in summary


def test_a_default_target_is_said_to_be_one_with_the_setting_that_changes_it(report):
    summary = top(render_html(typed_report(with_origins(report, "default", "configured"))))
    assert "target <strong class=\"nowrap\">14400 s (4.0 h)</strong>" in summary
    assert ('<span class="origin default">default (rto.default_seconds); set rto.databases.demo1</span>'
            in summary)
    assert '<span class="origin">configured (rpo.databases.demo1)</span>' in summary


def test_a_report_without_the_origin_does_not_claim_one(report):
    summary = top(render_html(typed_report(report)))
    assert "origin not recorded in this report" in summary
    assert "default (" not in summary and "configured (" not in summary


def test_a_database_not_restored_says_so_with_its_first_reason(report):
    broken = never_online(report)
    broken["databases"][1]["reasons"].append("a second reason")
    html = render_html(typed_report(broken))
    summary = top(html)
    assert ('<span class="proof failed">not restored: pgbackrest restore: exit 82: unable to open file '
            "backup.manifest</span>") in summary
    assert "not restored: no recovery time" in summary
    assert f"RTO {NONE}" not in html and f"The restore point {NONE} is {NONE} behind" not in html
    verdicts = html.split("<h2>Verdicts</h2>", 1)[1].split("</table>", 1)[0]
    assert '<span class="failed">not restored</span>' in verdicts


def test_each_reason_is_said_once(report):
    html = render_html(typed_report(report))
    for database in report["databases"]:
        for reason in database["reasons"]:
            if reason.startswith("pg_amcheck: 2 corrupt"):
                continue  # also the check's own summary, in the checks table
            assert html.count(reason) == 1, reason
    assert "<details class=\"reasons\"><summary>Reasons (3)</summary>" in html  # passed: folded
    assert "<details class=\"reasons\" open><summary>Reasons (1)</summary>" in html  # failed: open


def test_a_page_rendered_alone_says_its_evidence_is_not_signed(report):
    assert "Evidence: not signed." in top(render_html(typed_report(report)))


def test_a_run_folder_page_names_its_signature_and_the_command_that_checks_it(tmp_path, report):
    run_dir = tmp_path / "reports" / RUN
    outputs = write_reports(typed_report(report), run_dir, load_settings(), index=False)
    summary = top(outputs.html_path.read_text())
    assert "<strong>Evidence: signed.</strong>" in summary
    sig_header = (run_dir / "manifest.sig").read_text().splitlines()[0]
    key_id = sig_header.split()[-1]
    assert f"(ed25519, key <code>{key_id}</code>)" in summary
    command = f"restoreproof evidence verify {shlex.quote(str(run_dir.resolve()))} --public-key {PUBLIC_KEY_PLACEHOLDER}"
    assert f'<code class="command">{command}</code>' in summary


def test_the_command_on_the_page_checks_the_folder(tmp_path, report, monkeypatch):
    """With a configured key the page names its public key file: the command, run as written, passes."""
    pair = generate_key_pair(tmp_path / "keys" / "signing.pem")
    monkeypatch.setenv("RESTOREPROOF_EVIDENCE__SIGNING_KEY_FILE", str(pair.private_path))
    run_dir = tmp_path / "reports" / RUN
    outputs = write_reports(typed_report(report), run_dir, load_settings(), index=False)
    summary = top(outputs.html_path.read_text())
    command = summary.split('<code class="command">', 1)[1].split("</code>", 1)[0]
    assert command == (f"restoreproof evidence verify {shlex.quote(str(run_dir.resolve()))} "
                       f"--public-key {shlex.quote(str(pair.public_path))}")
    argv = shlex.split(command)
    done = subprocess.run([sys.executable, "-m", "verification.cli", *argv[1:]], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "intact" in done.stdout + done.stderr


def test_no_trend_from_too_few_runs_says_k_of_n(report):
    few = copy.deepcopy(report)
    drift = few["databases"][0]["drift"]
    drift.update(trend=None, crossing=None, series=drift["series"][-3:], min_runs=5, min_days=3.0,
                 notes=["2 runs to an earlier point in time left out: latest and point-in-time runs are trended apart",
                        "no trend and no alert from history: 3 measured runs over 1.0 days; a trend needs ..."])
    html = render_html(typed_report(few))
    demo1 = html.split('<h2 id="db-1">', 1)[1].split('<h2 id="db-2">', 1)[0]
    assert ("Too few runs for a trend (3 of 5 measured runs; 1.0 of 3 days): no trend line and no alert drawn "
            "from history.") in demo1
    assert '"name":"trend' not in demo1  # no trend line in the history chart
    assert "The trend does not reach the RTO" not in demo1
    assert "2 runs to an earlier point in time left out" in demo1
    assert "no trend and no alert from history" not in demo1  # said once, as k of N


def test_the_note_too_few_runs_replaces_is_the_one_drift_writes():
    from verification.prediction.drift import too_little_history
    from verification.reports.summary import TOO_LITTLE_HISTORY

    assert too_little_history([], 5, 3.0).startswith(TOO_LITTLE_HISTORY)


def test_a_check_that_errored_beside_a_pass_is_not_listed_as_a_check_run_cleanly(report):
    """An optional check that errored leaves the verdict passed; the proof line must not list it among
    the checks run as if it had passed."""
    changed = copy.deepcopy(report)
    demo1 = changed["databases"][0]
    demo1["checks"].append({**demo1["checks"][0], "name": "pg_checksums", "status": "error", "required": False,
                            "summary": "pg_checksums exited 1", "findings": []})
    summary = top(render_html(typed_report(changed)))
    assert "checks run: pg_amcheck, pg_checksums (error)</span>" in summary
