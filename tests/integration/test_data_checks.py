"""Great Expectations data checks against real restored PostgreSQL clusters (issue 12's proof)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.integration.conftest import leftovers
from tests.integration.test_html_chromium import ARTIFACTS, CHROMIUM, PNG_MAGIC, chromium
from verification.cli import app
from verification.config import DataSuite, ExpectationSpec, load_settings
from verification.demo.source import _SourceCluster
from verification.images import ensure_image
from verification.pipeline import run_verification
from verification.reports.json_report import report_data
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id

pytestmark = pytest.mark.integration


def checks_of(db: dict) -> dict:  # type: ignore[type-arg]
    return {c["name"]: c for c in db["checks"]}


def test_a_suite_that_passes_and_an_expectation_that_fails(demo, settings, tmp_path):
    settings.checks.expectations = {"demo1": [
        DataSuite(table="public.pgbench_branches", expect=[
            ExpectationSpec(type="expect_table_row_count_to_be_between", kwargs={"min_value": 1000})]),
        DataSuite(table="public.events", database="postgres", expect=[
            ExpectationSpec(type="expect_column_values_to_not_be_null", kwargs={"column": "note"}),
            ExpectationSpec(type="expect_column_values_to_be_unique", kwargs={"column": "id"})]),
        DataSuite(query="select aid, abalance from pgbench_accounts where aid <= 10", name="first-accounts",
                  expect=[ExpectationSpec(type="expect_table_row_count_to_equal", kwargs={"value": 10})]),
    ]}
    result = run_verification(settings, demo.repository, databases=["demo1"])
    [db] = report_data(result.report)["databases"]
    checks = checks_of(db)
    assert db["verdict"] == "failed"
    failed = checks["data:public.pgbench_branches"]
    assert failed["status"] == "failed" and failed["kind"] == "data"
    finding = ("database postgres, table public.pgbench_branches: "
               "expect_table_row_count_to_be_between(min_value=1000) failed, observed 7")
    assert failed["findings"] == [finding]
    assert any(finding in reason for reason in db["reasons"]), db["reasons"]
    assert checks["data:public.events"]["status"] == "passed"
    assert checks["data:first-accounts"]["status"] == "passed"
    assert "observed expect_table_row_count_to_equal: 10" in checks["data:first-accounts"]["summary"]
    # The integrity checks still ran after the data checks, and passed: the failure is the data's.
    assert checks["pg_amcheck"]["status"] == "passed"
    evidence = result.run_dir / "evidence"
    validation = json.loads((evidence / failed["evidence"]).read_text())
    assert validation["success"] is False
    assert (evidence / db["evidence"]["data-docs/index.html"]).read_text().count("<html") >= 1
    assert 'href="evidence/demo1/data-docs/index.html"' in result.html_path.read_text()
    assert leftovers(result.run.run_id) == []
    # The Data Docs page opens in headless Chromium; its screenshot is kept with the test artifacts.
    docs = evidence / db["evidence"]["data-docs/index.html"]
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is not installed: the Data Docs were built but not opened")
    home = tmp_path / "chromium"
    (home / "home").mkdir(parents=True)
    ARTIFACTS.mkdir(exist_ok=True)
    # The index lists the validations with scripts GX loads from CDNs (not reachable offline); the
    # page of each validation is static HTML: the failing suite's shows its expectation, observed.
    dom = chromium(home, "--dump-dom", docs.as_uri()).stdout.decode()
    assert "Validation Results" in dom and "user-0" in dom
    [page] = (docs.parent / "validations" / "user-0").rglob("*.html")
    shot = ARTIFACTS / "data-docs-screenshot.png"
    shot.unlink(missing_ok=True)
    chromium(home, f"--screenshot={shot}", page.as_uri())
    assert shot.read_bytes().startswith(PNG_MAGIC) and shot.stat().st_size > 10 * 1024
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", chromium(home, "--dump-dom", page.as_uri()).stdout.decode()))
    assert "Must have greater than or equal to 1000 rows" in text and "Observed Value" in text, text[:2000]


def test_the_demo_s_suites_fail_as_before_and_read_each_metric_of_a_table_once(demo, settings):
    """On a real restored demo cluster: a failing uniqueness and a failing row count still fail with the
    finding text they always had, while the table's baseline (its key unique and not null) passes in
    the same validation; and the demo's own suite on pgbench_accounts shares the baseline's metrics:
    one count(*), one uniqueness window and one null count of that table, not one per suite."""
    import sqlalchemy

    scale = int(demo.manifest["stanzas"]["demo1"]["pgbench_scale"])
    settings.checks.expectations = {"demo1": [
        DataSuite(table="public.pgbench_tellers", expect=[
            ExpectationSpec(type="expect_column_values_to_be_unique", kwargs={"column": "bid"}),
            ExpectationSpec(type="expect_table_row_count_to_equal", kwargs={"value": 10 * scale + 1})]),
        DataSuite(table="public.pgbench_accounts", expect=[
            ExpectationSpec(type="expect_table_row_count_to_equal", kwargs={"value": 100_000 * scale}),
            ExpectationSpec(type="expect_column_values_to_be_unique", kwargs={"column": "aid"})])]}
    sent: list[str] = []

    def note(conn: object, cursor: object, statement: str, *_: object) -> None:
        sent.append(" ".join(statement.split()))

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", note)
    try:
        result = run_verification(settings, demo.repository, databases=["demo1"])
    finally:
        sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", note)
    [db] = report_data(result.report)["databases"]
    checks = checks_of(db)
    assert db["verdict"] == "failed"
    tellers = checks["data:public.pgbench_tellers"]
    findings = [
        "database postgres, table public.pgbench_tellers: expect_column_values_to_be_unique(column='bid') failed, "
        f"observed '{10 * scale} unexpected (100% of rows), e.g. [1, 1, 1, 1, 1]'",
        f"database postgres, table public.pgbench_tellers: expect_table_row_count_to_equal(value={10 * scale + 1}) "
        f"failed, observed {10 * scale}"]
    assert (tellers["status"], tellers["summary"], tellers["findings"]) == (
        "failed", "2 of 2 expectations failed on database postgres, table public.pgbench_tellers", findings)
    assert all(any(finding in reason for reason in db["reasons"]) for finding in findings), db["reasons"]
    assert checks["data:public.pgbench_accounts"]["status"] == "passed"
    baseline = checks["data_baseline"]
    assert baseline["status"] == "passed", baseline["findings"]
    assert baseline["details"]["tables"]["postgres.public.pgbench_tellers"]["rows"] == 10 * scale
    assert baseline["details"]["tables"]["postgres.public.pgbench_accounts"]["rows"] == 100_000 * scale
    assert checks["pg_amcheck"]["status"] == "passed"
    # The tellers' validation holds the suite's results and the baseline's, each saying its own.
    validation = json.loads((result.run_dir / "evidence" / tellers["evidence"]).read_text())
    said = sorted((r["expectation_config"]["meta"]["restoreproof_batch"].split("-")[0],
                   r["expectation_config"]["type"], r["success"]) for r in validation["results"])
    assert said == [("table", "expect_column_values_to_be_unique", True),
                    ("table", "expect_column_values_to_not_be_null", True),
                    ("table", "expect_table_row_count_to_be_between", True),
                    ("user", "expect_column_values_to_be_unique", False),
                    ("user", "expect_table_row_count_to_equal", False)]
    accounts = [s for s in sent if "FROM public.pgbench_accounts" in s]
    assert len([s for s in accounts if s.startswith('SELECT count(*) AS "table.row_count"')]) == 1, accounts
    assert len([s for s in accounts if "count(*) OVER (PARTITION BY aid)" in s and "unexpected_count" in s]) == 1
    assert len([s for s in accounts if '"column_values.nonnull.unexpected_count"' in s]) == 1, accounts
    assert leftovers(result.run.run_id) == []


def test_a_suite_that_is_not_valid_stops_the_run_before_any_restore(demo, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    suites = tmp_path / "suites" / "demo1"
    suites.mkdir(parents=True)
    (suites / "public.events.json").write_text('{"name": "events", "expectations": [{"type": '
                                               '"expect_column_values_to_not_be_null", "kwargs": {}}]}')
    config = tmp_path / "restoreproof.yaml"
    config.write_text(yaml.safe_dump({"report_dir": str(tmp_path / "reports"),
                                      "checks": {"suites_dir": str(tmp_path / "suites")}}))
    before = set(leftovers())
    result = CliRunner().invoke(app, ["verify", str(demo.repository), "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert f"suite file {suites / 'public.events.json'}, expectations[0]" in result.output
    assert "expect_column_values_to_not_be_null: invalid kwargs: column field required" in result.output
    assert set(leftovers()) == before  # nothing was started
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").rglob("report.json"))


@pytest.fixture
def shop(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real cluster 'shop' backed up into a repository, left running to be changed between backups."""
    repo = tmp_path / "repo"
    repo.mkdir()
    settings = load_settings()
    image = ensure_image(settings.docker.postgres_image, settings.docker.build_context)
    client = docker_client()
    cluster = _SourceCluster(client, image, "shop", repo, new_run_id())
    try:
        cluster.setup()
        cluster.load(1)
        yield cluster, repo
    finally:
        cluster.remove()
        client.close()


def _publish(cluster: _SourceCluster, repo: Path) -> None:
    """Archive up to the last write and let the targets read the repository (as finish(), still running)."""
    cluster.sh("pgbackrest --stanza=shop check")
    cluster.sh("chmod a+rX /repo /repo/backup /repo/archive && chmod -R a+rX /repo/backup/shop /repo/archive/shop",
               user="root")


def test_rows_deleted_between_two_backups_fail_the_baseline_and_stale_data_fails_freshness(shop, tmp_path, monkeypatch):
    cluster, repo = shop
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cluster.backup("full")
    _publish(cluster, repo)
    settings = load_settings(report_dir=tmp_path / "reports")
    runs = [run_verification(settings, repo)]
    first = report_data(runs[0].report)["databases"][0]
    baseline = checks_of(first)["data_baseline"]
    assert first["verdict"] == "passed", first["reasons"]
    assert baseline["details"]["compared"] is False
    assert baseline["details"]["tables"]["postgres.public.pgbench_accounts"]["rows"] == 100_000

    cluster.psql("delete from pgbench_accounts where aid > 50000")  # half the rows: beyond the 10% tolerance
    time.sleep(2.5)
    cluster.psql("create table audit (id int primary key)")  # a write with no timestamp, after the newest event
    cluster.backup("incr")
    _publish(cluster, repo)
    runs.append(run_verification(settings, repo))
    second = report_data(runs[-1].report)["databases"][0]
    baseline = checks_of(second)["data_baseline"]
    assert second["verdict"] == "failed"
    assert baseline["status"] == "failed"
    assert baseline["findings"] == ["postgres.public.pgbench_accounts: 50000 rows, 100000 in the last passed "
                                    "verification: more than 10% fewer"]
    assert "postgres.public.audit: new since the last passed verification" in baseline["details"]["notes"]
    assert checks_of(second)["data_freshness"]["status"] == "passed"  # the default RPO (24 h) allows it

    # The newest event was written 2.5 s before the restore point: an RPO of 1 s fails on it.
    strict = load_settings(report_dir=tmp_path / "reports", rpo={"default_seconds": 1})
    runs.append(run_verification(strict, repo))
    third = report_data(runs[-1].report)["databases"][0]
    freshness = checks_of(third)["data_freshness"]
    assert freshness["status"] == "failed"
    [finding] = freshness["findings"]
    assert finding.startswith("the newest row of every table with a timestamp is older than the RPO allows "
                              "(1 s before the restore point ")
    assert "postgres.public.events.at (" in finding
    assert freshness["details"]["data_rpo_seconds"] >= 2.5
    # Still compared with the first (the last passed) verification, not with the failed second one.
    assert checks_of(third)["data_baseline"]["findings"] == baseline["findings"]
    assert [leftovers(run.run.run_id) for run in runs] == [[], [], []]
