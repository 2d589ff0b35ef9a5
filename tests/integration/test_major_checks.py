"""Repositories written by other PostgreSQL majors than 15, verified in their own images, and what each
major's integrity checks say. PostgreSQL 13 (Debian bullseye's, with its pgBackRest 2.33) has no
pg_amcheck program and no heap check, so every database's every btree index is checked with the amcheck
extension's SQL functions, and the report says what was and was not checked; 18 (sid's, pgBackRest
2.60) runs pg_amcheck, whose output and pg_checksums' are read as 18 prints them.

The overall verdict is not asserted beyond "not failed": reading each pgBackRest version's `verify`
output is another part of issue 30. What is asserted is what each check says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.integration.conftest import leftovers
from verification.cli import app
from verification.demo.source import _SourceCluster
from verification.images import ensure_image
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def pg13_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return written_by(13, tmp_path_factory)


@pytest.fixture(scope="module")
def pg18_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return written_by(18, tmp_path_factory)


def written_by(major: int, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One full backup and its WAL: a table with two btree indexes in a second database, one closed."""
    repo = tmp_path_factory.mktemp(f"pg{major}") / "backups"
    repo.mkdir()
    run_id = new_run_id()
    cluster = _SourceCluster(docker_client(), ensure_image(f"restoreproof/postgres:{major}"), f"pg{major}", repo,
                             run_id)
    try:
        cluster.setup()
        cluster.psql("create database shop")
        cluster.psql("create database archive")
        cluster.sh('psql -X -q -v ON_ERROR_STOP=1 -h /tmp -d shop -c "$SQL"', env={"SQL": (
            "create table orders (id bigserial primary key, note text not null); "
            "create index orders_note on orders (note); "
            "insert into orders (note) select 'order ' || g from generate_series(1, 2000) g")})
        cluster.psql("alter database archive allow_connections false")
        cluster.backup("full")
        cluster.finish()
    finally:
        cluster.remove()
    assert leftovers(run_id) == []
    return repo


def verified(repo: Path, report_dir: Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["verify", str(repo), "--json", "--report-dir", str(report_dir)],
                                catch_exceptions=False)
    report = json.loads(result.stdout)
    assert leftovers(report["run_id"]) == []
    (database,) = report["databases"]
    return dict(database)


def test_a_pg13_backup_has_every_btree_index_of_every_database_checked_and_says_heap_pages_were_not(
        pg13_repo: Path, tmp_path: Path) -> None:
    database = verified(pg13_repo, tmp_path)
    assert database["verdict"] != "failed", database["reasons"]
    checks = {check["name"]: check for check in database["checks"]}
    assert "pg_amcheck" not in checks  # 13 has no such program: nothing ran it
    amcheck = checks["amcheck"]
    assert amcheck["status"] == "passed", amcheck
    details = amcheck["details"]
    assert details["databases_existing"] == ["archive", "postgres", "shop", "template0", "template1"]
    assert details["databases_checked"] == details["databases_existing"] and details["databases_not_checked"] == {}
    assert details["btree_indexes"] == details["btree_indexes_catalogued"] > 5 * 100
    # shop's own: orders' primary key, orders_note and the index of orders' TOAST table.
    assert details["per_database"]["shop"]["checked"] == details["per_database"]["postgres"]["checked"] + 3
    assert details["heap_pages_checked"] is False and details["postgres_major"] == 13
    assert amcheck["summary"].startswith(f"PostgreSQL 13: {details['btree_indexes']} btree indexes in 5 of 5 "
                                         "databases checked by amcheck's bt_index_check with heapallindexed")
    assert amcheck["summary"].endswith("heap pages not checked by amcheck (PostgreSQL 13 has no verify_heapam)")
    assert "PostgreSQL 13 has no verify_heapam" in details["not_checked"]
    assert checks["pg_checksums"]["status"] == "passed", checks["pg_checksums"]
    run_dir = next(tmp_path.rglob("report.json")).parent
    evidence = (run_dir / "evidence" / amcheck["evidence"]).read_text()
    assert [line for line in evidence.splitlines() if line.startswith("== database ")] == [
        f"== database {name}: exit 0" for name in details["databases_existing"]]
    (phase,) = [p for p in database["phases"] if p["name"] == "integrity_check"]
    assert phase["details"]["amcheck_functions_seconds"] > 0 and "pg_amcheck_seconds" not in phase["details"]


def test_a_pg18_backup_is_checked_by_pg_amcheck_and_pg_checksums_read_as_18_prints_them(
        pg18_repo: Path, tmp_path: Path) -> None:
    database = verified(pg18_repo, tmp_path)
    assert database["verdict"] != "failed", database["reasons"]
    checks = {check["name"]: check for check in database["checks"]}
    assert "amcheck" not in checks
    amcheck = checks["pg_amcheck"]
    assert amcheck["status"] == "passed", amcheck
    assert amcheck["summary"].endswith(" indexes in 5 of 5 databases: no corruption")
    assert amcheck["details"]["postgres_major"] == 18 and amcheck["details"]["checked"].startswith("verify_heapam ")
    assert checks["pg_checksums"]["status"] == "passed", checks["pg_checksums"]
    (phase,) = [p for p in database["phases"] if p["name"] == "integrity_check"]
    assert phase["details"]["pg_amcheck_seconds"] > 0
