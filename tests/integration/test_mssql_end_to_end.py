"""SQL Server end to end: real backups restored in a real SQL Server container.

Runs wherever the image can be had (`docker pull mcr.microsoft.com/mssql/server:2022-latest`, or
any image configured in mssql.images); on this project's machines no registry is reachable, so
these tests skip and say so. See README, "SQL Server".
"""

from __future__ import annotations

from datetime import UTC, datetime

import docker.errors
import pytest

from tests.integration.conftest import leftovers
from verification.pipeline import run_verification
from verification.reports.json_report import report_data

pytestmark = [pytest.mark.integration, pytest.mark.mssql]


@pytest.fixture(scope="module")
def sql_server_image() -> str:
    from verification.config import load_settings
    from verification.targets.docker import docker_client

    image = load_settings().mssql.images[max(load_settings().mssql.images)]
    client = docker_client()
    try:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            try:
                client.images.pull(image)
            except docker.errors.APIError as exc:
                pytest.skip(f"SQL Server image {image} cannot be had here ({exc.explanation or exc})")
    finally:
        client.close()
    return image


def test_latest_chain_restores_and_checkdb_passes(sql_server_image, mssql_corpus, settings):
    result = run_verification(settings, mssql_corpus / "RestoreTimeClean", engine_name="mssql")
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "passed", db["reasons"]
    phases = {p["name"]: p for p in db["phases"]}
    assert phases["transfer"]["bytes"] > 0 and phases["log_restore"]["seconds"] is not None
    # The pages were verified offline before the restore, and that check is kept beside CHECKDB's.
    assert {c["name"]: c["status"] for c in db["checks"]} == {"page_verification": "passed", "dbcc_checkdb": "passed"}
    assert leftovers(result.run.run_id) == []


def test_striped_set_and_point_in_time(sql_server_image, mssql_corpus, settings):
    at = datetime(2020, 5, 12, 13, 31, 0, tzinfo=UTC)
    result = run_verification(settings, mssql_corpus / "sql2008-backups/StopAt", engine_name="mssql", at=at)
    (db,) = report_data(result.report)["databases"]
    assert db["verdict"] == "passed", db["reasons"]
    assert db["chain"]["backups"][-1]["path"].endswith("StopAt_21.trn")
    stripe = run_verification(settings, mssql_corpus / "history/sql2016-stripe", engine_name="mssql")
    assert [d["verdict"] for d in report_data(stripe.report)["databases"]] == ["passed"]
    (pages,) = [c for c in report_data(stripe.report)["databases"][0]["checks"] if c["name"] == "page_verification"]
    assert pages["status"] == "passed" and len(pages["details"]["per_file"]) == 2  # both stripes read
