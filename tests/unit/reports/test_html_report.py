"""report.html: content from the 1.3 sample, older and failed reports, plotly.js from the folder, charts present.

index.html and its pages are tests/unit/reports/test_index_pages.py."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from tests.conftest import TESTS
from tests.unit.factories import typed_database, typed_report
from verification.reports.assets import plotly_asset
from verification.reports.charts import (
    CHART_KINDS,
    NONE,
    chain_figure,
    history_figure,
    phases_figure,
    seconds_text,
    throughput_figure,
)
from verification.reports.html_report import render_html

SAMPLE = TESTS / "fixtures" / "reports" / "report-1.3.json"
NEW_PHASE_FIELDS = ("predicted_seconds", "bound", "error_percent", "prediction")
NEW_DATABASE_FIELDS = ("prediction", "objectives", "drift")
PAGE_ORDER = ["objectives", "phases", "chain", "history", "throughput"]  # per database, top to bottom


@pytest.fixture
def report() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text())


def as_1_2(report: dict[str, Any]) -> dict[str, Any]:
    """The sample as a 1.2 writer made it: no prediction, objectives or drift anywhere."""
    old = copy.deepcopy(report)
    old["schema_version"] = "1.2"
    for d in old["databases"]:
        for name in NEW_DATABASE_FIELDS:
            del d[name]
        for phase in d["phases"]:
            for name in NEW_PHASE_FIELDS:
                del phase[name]
    return old


def never_online(report: dict[str, Any]) -> dict[str, Any]:
    """demo2 failed in transfer: nothing after it ran, nothing was measured but provisioning."""
    failed = copy.deepcopy(report)
    d = failed["databases"][1]
    d.update(verdict="error", reasons=["pgbackrest restore: exit 82: unable to open file backup.manifest"],
             recovery_seconds=None, checks=[], evidence={})
    d["restore_point"]["achieved"] = None
    for phase in d["phases"]:
        if phase["name"] != "provision" and phase["status"] == "measured":
            phase.update(status="not_reached", seconds=None, bytes=None, error_percent=None,
                         details={"why": "an earlier step did not complete"})
    d["objectives"]["rto"].update(measured_seconds=None, margin_seconds=None, met=False)
    d["drift"]["series"][-1]["recovery_seconds"] = None
    return failed


class Sources(HTMLParser):
    """Every URL the page would load by itself (not links a reader clicks)."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for attr in ("src", "srcset", "data"):
            if found.get(attr):
                self.loads.append(f"{tag} {attr}={found[attr]}")
        if tag == "link" and found.get("href"):
            self.loads.append(f"link href={found['href']}")


MB = 1024 * 1024


def assert_offline(html: str, depth: int = 1) -> None:
    """The page loads one file, the report folder's plotly.js by a relative path, and nothing else."""
    asset = plotly_asset()
    assert asset.data.decode()[:2000] not in html, "plotly.js must not be inline"
    parser = Sources()
    parser.feed(html)
    assert parser.loads == [f"script src={'../' * depth}assets/{asset.name}"], parser.loads
    assert not re.search(r"<link[^>]+href=[\"']?https?:", html)
    assert "@import" not in html and "@font-face" not in html
    assert "cdn.plot.ly/plotly" not in html
    assert "script-src 'self' 'unsafe-inline' 'unsafe-eval'" in html  # 'self': the folder's plotly.js may load


def charts(html: str) -> list[str]:
    return re.findall(r'<div class="rp-chart" data-chart="(\w+)">', html)


def test_sample_shows_verdicts_reasons_and_every_chart(report):
    html = render_html(typed_report(report))
    assert "<title>restoreproof run 20261122T010000Z-abc123: failed</title>" in html
    assert "pg_amcheck: 2 corrupt blocks in public.t" in html
    assert "chain complete: 2 backups, 3 WAL segments" in html
    assert charts(html) == PAGE_ORDER * 2
    assert all(f'id="rp-{kind}-{index}"' in html for kind in CHART_KINDS for index in (1, 2))
    assert_offline(html)


def test_the_report_is_under_a_megabyte_and_loads_the_folders_plotly(report, tmp_path):
    from verification.reports import write_reports

    asset = plotly_asset()
    outputs = write_reports(typed_report(report), tmp_path / "reports" / "20261122T010000Z-abc123")
    page = outputs.html_path.read_bytes()
    assert len(page) < 1 * MB and len(asset.data) > 3 * MB  # the 4.8 MB it was: plotly.js is most of it
    assert page.count(b"<script src=") == 1
    assert f'<script src="../assets/{asset.name}"></script>'.encode() in page
    shared = tmp_path / "reports" / "assets" / asset.name
    assert shared.read_bytes() == asset.data
    assert (outputs.html_path.parent / f"../assets/{asset.name}").resolve() == shared.resolve()
    assert re.fullmatch(r"plotly-\d+\.\d+\.\d+\.min\.js", asset.name)


def test_a_report_whose_plotly_did_not_load_says_so_and_which_file_it_needs(report):
    html = render_html(typed_report(report))
    asset = plotly_asset()
    notice = re.search(r'<p id="rp-no-plotly" class="alerts" hidden>(.*?)</p>', html, re.S)
    assert notice is not None, "the notice is in the page, hidden until plotly.js is found missing"
    text = " ".join(notice.group(1).split())
    assert f"plotly.js did not load from <code>../assets/{asset.name}</code>" in text
    assert f"SHA-256 <code>{asset.sha256}</code>" in text and "tar czf run.tar.gz -C REPORT_DIR RUN_ID assets" in text
    # Shown by the page itself, before any chart's script runs (each needs window.Plotly).
    script = 'if (!window.Plotly) document.getElementById("rp-no-plotly").hidden = false;'
    assert html.index(script) < html.index('<div class="rp-chart"')
    assert f"charts drawn by plotly.js {asset.version}, loaded from <code>../assets/{asset.name}</code>" in html


def test_sample_verdict_table_states_rto_and_rpo_with_units(report):
    html = render_html(typed_report(report))
    verdicts = html.split("<h2>Verdicts</h2>", 1)[1].split("</table>", 1)[0]
    for column in ("RTO target", "Measured recovery", "Predicted recovery", "Margin", "RPO: worst log gap, target"):
        assert column in verdicts
    # demo1: 4 h target; demo2: 10 s target, 5.32 s measured, 4.68 s to spare
    for figure in ("14400 s (4.0 h)", "4.82 s", "4.58 s", "14395 s (4.0 h)", "10.00 s", "5.32 s", "4.68 s",
                   '<span class="nowrap">900 s (15 min): <span class="passed">met</span></span>',
                   '<span class="meta nowrap">target 86400 s (24.0 h)</span>',
                   '<span class="meta nowrap">120 s (2 min) behind the newest backup</span>'):
        assert figure in verdicts, figure
    assert verdicts.count('<span class="passed">met</span>') == 4  # RTO and RPO, both databases


def test_sample_alerts_are_listed_at_the_top(report):
    html = render_html(typed_report(report))
    top = html.split("<h2>Verdicts</h2>", 1)[0]
    assert '<section class="alerts">' in top
    assert '<span class="badge error">model-error</span> <strong>demo2</strong>' in top
    assert "recovery exceeds its RTO of 10 s in about 37 days (2026-12-29)" in top
    assert "At this trend recovery reaches the RTO about 2026-12-29 01:00:00 UTC, in 37.0 days." in html


def test_sample_prediction_can_be_redone_from_the_page(report):
    html = render_html(typed_report(report))
    assert "Prediction: <strong>partly calibrated</strong>: some phases from 12 earlier runs" in html
    assert ("max(24.0 MB / 310.0 MB/s source read, 110.0 MB / 58.2 MB/s target write, "
            "110.0 MB / 140.0 MB/s decompression) + 0.16 s") in html
    assert '<strong>target write</strong> 58.2 MB/s <span class="prov calibrated">calibrated</span> 12 runs' in html
    assert '<strong>source read</strong> 310.0 MB/s <span class="prov probe">probe</span>' in html
    assert '<strong>decompression</strong> 140.0 MB/s <span class="prov default">default</span>' in html
    # the phase table: measured, predicted, error and bound side by side
    assert re.search(r"<td>transfer</td><td class=\"measured\">measured</td>\s*<td class=\"num\">2.600</td>\s*"
                     r"<td class=\"num\">2.050</td>\s*<td class=\"num\">-21.2 %</td>\s*<td>target write</td>", html)
    assert "zeroing</td><td class=\"absent\">absent" in html
    assert "<td>source read</td><td class=\"num\">64.0 MB</td><td class=\"num\">0.21 s</td>" in html  # the probe


def test_a_1_2_report_renders_without_the_new_sections(report):
    html = render_html(typed_report(as_1_2(report)))
    assert charts(html) == ["phases", "chain"] * 2
    assert "This report has no recovery objectives (schema 1.2). Measured recovery: 4.82 s." in html
    assert "This report has no prediction (schema 1.2)." in html
    assert "This report carries no history (schema 1.2)" in html
    assert '<section class="alerts">' not in html
    assert "pg_amcheck: 2 corrupt blocks in public.t" in html
    assert_offline(html)


def test_a_database_that_never_came_online_renders(report):
    html = render_html(typed_report(never_online(report)))
    demo2 = html.split('<h2 id="db-2">', 1)[1]
    assert "pgbackrest restore: exit 82: unable to open file backup.manifest" in demo2
    assert ('<span class="failed">not restored, so no recovery time</span> (the reasons above); predicted recovery '
            '4.58 s: <strong class="failed">MISSED</strong>') in demo2
    assert demo2.count("pgbackrest restore: exit 82") == 1  # said once, in the reasons
    assert f"RTO {NONE}" not in demo2 and f"The restore point {NONE}" not in demo2
    assert '<strong class="failed">MISSED</strong>' in demo2
    assert '<td>redo</td><td class="not_reached">not_reached</td>' in demo2
    assert charts(demo2) == PAGE_ORDER


def test_a_database_with_nothing_measured_or_predicted_still_renders(report):
    failed = as_1_2(never_online(report))
    d = failed["databases"][1]
    d["phases"], d["chain"] = [], {"status": "broken", "backups": [], "problems": [
        {"code": "no-backup", "message": "no backup in the repository"}]}
    demo2 = render_html(typed_report(failed)).split('<h2 id="db-2">', 1)[1]
    assert "No phase was measured or predicted." in demo2
    assert "<code>no-backup</code> no backup in the repository" in demo2
    assert charts(demo2) == []


def test_unfinished_multipart_uploads_are_listed_with_their_id_and_start(report):
    assert "Unfinished multipart uploads" not in render_html(typed_report(report))  # a folder: no section
    report["source"] = "s3://backups/sql"
    report["incomplete_uploads"] = [
        {"path": "SRV1/shop/FULL/SRV1_shop_FULL_20261124_010000.bak", "upload_id": "2~abc<def",
         "initiated": "2026-11-24T01:00:03Z"},
        {"path": "SRV1/shop/LOG/x.trn", "upload_id": "2~zzz", "initiated": None}]
    html = render_html(typed_report(report))
    section = html.split('<h2 id="incomplete-uploads">Unfinished multipart uploads</h2>', 1)[1].split("</table>")[0]
    assert ("<tr><td><code>SRV1/shop/FULL/SRV1_shop_FULL_20261124_010000.bak</code></td><td><code>2~abc&lt;def</code>"
            "</td><td>2026-11-24") in section
    assert "<td><code>SRV1/shop/LOG/x.trn</code></td><td><code>2~zzz</code></td><td>unknown</td>" in section
    assert "source <code>s3://backups/sql</code>" in html


def test_user_text_is_escaped_in_tables_and_in_chart_data(report):
    report["databases"][0]["reasons"] = ["<script>alert(1)</script>"]
    report["databases"][0]["chain"]["backups"][0]["label"] = "</script><b>x"
    html = render_html(typed_report(report))
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "</script><b>x" not in html


def test_phases_chart_leaves_absent_phases_out_and_notes_not_reached(report):
    fig = phases_figure(typed_database(never_online(report)["databases"][1]))
    names = list(fig.data[0].y)
    assert "zeroing" not in names and "data_checks" not in names and names[0] == "provision"
    measured, predicted = fig.data
    assert measured.x[0] == pytest.approx(1.12) and measured.x[names.index("redo")] is None
    assert predicted.x[names.index("redo")] == pytest.approx(0.8)
    assert [a.y for a in fig.layout.annotations if a.text == "<i>not reached</i>"] == names[1:]


def test_chain_chart_marks_the_restore_point_and_references(report):
    fig = chain_figure(typed_database(report["databases"][0]))
    kinds = [trace.name for trace in fig.data]
    assert kinds == ["full", "diff", "WAL"]
    assert [str(shape.x0) for shape in fig.layout.shapes if shape.type == "line"] == [
        "2026-11-22 01:05:00", "2026-11-22 01:07:00"]
    arrows = [a for a in fig.layout.annotations if a.showarrow]
    assert len(arrows) == 1 and (arrows[0].ay, arrows[0].y) == (1, 0)  # the diff needs the full


def test_history_chart_extends_the_trend_to_the_rto_crossing(report):
    fig = history_figure(typed_database(report["databases"][1]))
    trend = next(t for t in fig.data if t.name.startswith("trend"))
    assert [str(x) for x in trend.x] == ["2026-11-11 01:00:00", "2026-12-29 01:00:00"]
    assert trend.y[1] == pytest.approx(6.0 + 0.05 * 48)
    assert any(t.name == "RTO target 10.00 s" for t in fig.data)
    # demo1's RTO of 4 h would flatten seconds to a line: it is named, not drawn
    far = history_figure(typed_database(report["databases"][0]))
    assert not any(t.name.startswith("RTO") for t in far.data)
    assert "RTO target 14400 s (4.0 h)" in far.layout.annotations[0].text


def test_history_chart_keeps_a_run_that_never_came_online(report):
    fig = history_figure(typed_database(never_online(report)["databases"][1]))
    lost = next(t for t in fig.data if t.name == "never online")
    assert [str(x) for x in lost.x] == ["2026-11-22 01:00:00"] and list(lost.customdata) == ["20261122T010000Z-abc123"]


def test_throughput_chart_is_in_mb_per_second(report):
    fig = throughput_figure(typed_database(report["databases"][0]))
    assert fig.data[0].y[0] == pytest.approx(50.0)
    assert fig.layout.yaxis.title.text == "transfer (MB/s)"


@pytest.mark.parametrize(("seconds", "text"), [(4.816, "4.82 s"), (900, "900 s (15 min)"), (14400, "14400 s (4.0 h)"),
                                                (259200, "259200 s (3.0 d)"), (None, NONE), (True, NONE)])
def test_seconds_state_their_unit(seconds, text):
    assert seconds_text(seconds) == text


def test_a_misspelt_field_fails_the_page_instead_of_showing_nothing(report):
    from jinja2 import UndefinedError

    from verification.reports.html_report import env

    typed = typed_report(report)
    assert env.from_string("{{ r.verdict }}").render(r=typed) == "failed"
    with pytest.raises(UndefinedError, match="has no attribute 'verdikt'"):
        env.from_string("{{ r.verdikt }}").render(r=typed)
    with pytest.raises(UndefinedError, match="has no attribute 'target_second'"):
        env.from_string("{{ d.objectives.rto.target_second }}").render(d=typed.databases[0])


def staged_from_s3(report: dict[str, Any]) -> dict[str, Any]:
    """demo1 restored from a copy staged from object storage: its download measured and predicted first."""
    staged = copy.deepcopy(report)
    d = staged["databases"][0]
    d["phases"].insert(0, {
        "name": "download", "status": "measured", "seconds": 4.2, "bytes": 24_222_720, "started_at": None,
        "details": {"objects": 1028, "bytes": 24_222_720, "threads": 16, "source": "s3://backups/pg/repo1",
                    "requests": {"GetObject": 1028}, "staged_in": "/state/staging/rp-stage-x",
                    "checked": {"if_match_etag": 1028, "size": 1028, "checksum": {"CRC32": 1028},
                                "checksum_not_checked": {}}},
        "predicted_seconds": 3.9, "bound": "download rate", "error_percent": -7.1,
        "prediction": {"bytes_read": 24_222_720, "bytes_written": 24_222_720, "compressed": False, "parallel": 16,
                       "files": 1028, "inputs": "0.30 s + 24.2 MB / 6.7 MB/s calibrated = 3.90 s",
                       "rates": {"download rate": {"bytes_per_second": 7_025_000.0, "provenance": "calibrated",
                                                   "runs": 5, "detail": "Theil-Sen over 5 runs"}},
                       "constant_seconds": 0.3, "constant_provenance": "calibrated", "calibrated": True, "runs": 5}})
    return staged


def test_a_download_from_object_storage_is_shown_as_every_other_phase(report):
    typed = typed_report(staged_from_s3(report))
    html = render_html(typed)
    row = re.search(r"<tr><td>download</td>.*?</tr>", html, re.S)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    assert [c.strip() for c in cells] == ["download", "measured", "4.200", "3.900", "-7.1 %", "download rate", "23.1",
                                          "5.5", "s3://backups/pg/repo1"]
    assert "0.30 s + 24.2 MB / 6.7 MB/s calibrated = 3.90 s" in html
    fig = phases_figure(typed.databases[0])
    assert fig is not None and fig.data[0].y[0] == "download"
    measured, predicted = fig.data
    assert (measured.x[0], predicted.x[0]) == (pytest.approx(4.2), pytest.approx(3.9))


def test_phases_that_ran_alongside_others_say_so_beside_their_own_seconds_and_the_wall_time(report):
    alongside = copy.deepcopy(report)
    d = alongside["databases"][0]
    d["wall_seconds"] = 9.5
    for phase in d["phases"]:
        if phase["name"] in ("redo", "repository_verify"):
            phase["details"]["alongside"] = ["repository_verify" if phase["name"] == "redo" else "redo"]
    own = sum(p["seconds"] for p in d["phases"] if isinstance(p["seconds"], int | float))
    demo1 = render_html(typed_report(alongside)).split('<h2 id="db-1">', 1)[1].split('<h2 id="db-2">', 1)[0]
    assert re.search(r"<td>redo</td>.*?alongside repository_verify</td></tr>", demo1, re.S)
    assert (f"Wall time of this database's verification: 9.500 s; its phases' own measured seconds add up "
            f"to {own:.3f} s: some ran alongside others") in demo1
    # A report written before 1.8 has no wall time: nothing is said of one.
    assert "Wall time of this database" not in render_html(typed_report(report))


PG_BASIS = ("read offline from the repository: backup/demo1/backup.info and the backup's manifest are in pgBackRest's "
            "encrypted format (aes-256-cbc, repo1-cipher-type) and decrypt, with the passphrase and the key "
            "backup.info keeps for the manifests; the backup's files are encrypted with the key its manifest keeps")


def chain_table(html: str) -> str:
    return html.split("<h3>Chain:", 1)[1].split("<h3>History</h3>", 1)[0]


def test_each_backup_s_encryption_is_a_column_and_how_it_is_known_is_said_under_the_chain(report):
    assert "Encryption" not in chain_table(render_html(typed_report(report)))  # no engine said: no column
    pg = {"state": "encrypted", "algorithm": "aes-256-cbc", "basis": PG_BASIS}
    for backup in report["databases"][0]["chain"]["backups"]:
        backup["encryption"] = pg
    sql = [{"state": "encrypted", "algorithm": "AES_256", "encryptor_type": "CERTIFICATE",
            "encryptor_thumbprint": "0xA1B2", "basis": "RESTORE HEADERONLY of F.bak: KeyAlgorithm AES_256"},
           {"state": "not_encrypted", "basis": "written by SQL Server 10.50, before backup encryption"}]
    for backup, encryption in zip(report["databases"][1]["chain"]["backups"], sql, strict=False):
        backup["encryption"] = encryption
    first, second = (chain_table(part) for part in render_html(typed_report(report)).split('<h2 id="db-2">', 1))
    assert "<th>Needs</th><th>Encryption</th></tr>" in first
    assert first.count("<td>encrypted (aes-256-cbc)</td>") == len(report["databases"][0]["chain"]["backups"])
    # Said once, though every backup has it.
    assert first.count(PG_BASIS.replace("'", "&#39;")) == 1
    assert '<p class="meta">Encryption, how it is known:</p>' in first
    assert "<td>encrypted (AES_256); certificate 0xA1B2</td>" in second
    assert "<td>not encrypted</td>" in second
    assert "<li>RESTORE HEADERONLY of F.bak: KeyAlgorithm AES_256</li>" in second


def test_the_backups_overridden_settings_are_listed_with_their_values_and_where_they_were_set(report):
    changed = copy.deepcopy(report)
    changed["databases"][0]["overridden_settings"] = [
        {"name": "zero_damaged_pages", "backup_value": "on", "forced_value": "off", "source": "conf.d/x.conf:3",
         "why": "would hide damaged pages from redo and the checks"}]
    demo1 = render_html(typed_report(changed)).split('<h2 id="db-1">', 1)[1].split('<h2 id="db-2">', 1)[0]
    assert ("<tr><td><code>zero_damaged_pages</code></td><td><code>on</code></td><td><code>off</code></td>"
            "<td>conf.d/x.conf:3</td><td class=\"meta\">would hide damaged pages from redo and the checks</td></tr>"
            ) in demo1
    assert "Settings of the backup overridden" not in render_html(typed_report(report))
