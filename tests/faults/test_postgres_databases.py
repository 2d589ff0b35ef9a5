"""Every database of a restored cluster is checked, or named as not checked with why.

Real clusters (tests/faults/unchecked_databases.py), one stanza each in one repository: databases that
refuse connections (datallowconn = false), a template made by a user, an invalid database; some with a
damaged heap page, made before the backup so the restored data holds it. `pg_amcheck --all` alone passes
such a database by without a word.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.faults.unchecked_databases import Cluster, Damage, make_stanza
from tests.integration.conftest import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def healthy(cluster: Cluster) -> None:
    """Five databases, three refusing connections: template0, a closed one, a closed template."""
    for name in ("archive", "tmpl_orders"):
        cluster.sql("postgres", f"create database {name}")
    cluster.table("postgres", "live")
    cluster.table("archive", "cold")
    cluster.table("tmpl_orders", "orders")
    cluster.close("archive")
    cluster.close("tmpl_orders", template=True)


def closed_damaged(cluster: Cluster) -> Damage:
    """The issue's case: no data checksums (initdb's default), a damaged page in a closed database."""
    cluster.no_checksums()
    cluster.sql("postgres", "create database archive")
    cluster.table("postgres", "live")
    cluster.table("archive", "cold")
    damage = cluster.damage("archive", "cold")
    cluster.close("archive")
    return damage


def template_damaged(cluster: Cluster) -> Damage:
    """A user's template (datistemplate) that refuses connections, with data checksums (backed up without
    pgBackRest's page checksum validation), damaged."""
    cluster.sql("postgres", "create database tmpl_orders")
    cluster.table("tmpl_orders", "orders")
    damage = cluster.damage("tmpl_orders", "orders")
    cluster.close("tmpl_orders", template=True)
    return damage


def invalid(cluster: Cluster) -> None:
    """A database an interrupted DROP DATABASE left invalid: nothing can connect to it."""
    cluster.sql("postgres", "create database halfdropped")
    cluster.table("halfdropped", "t", rows=10)
    cluster.invalid("halfdropped")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    repo = tmp_path_factory.mktemp("databases") / "repo"
    repo.mkdir()
    stanzas = {"healthy": (healthy,), "closed": (closed_damaged,), "invalid": (invalid,),
               "template": (template_damaged, "--no-checksum-page")}
    # Two at a time: each cluster waits on its container as much as it computes.
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {stanza: pool.submit(make_stanza, repo, stanza, *how) for stanza, how in stanzas.items()}
        made = {stanza: future.result() for stanza, future in futures.items()}
    yield repo, made


def checks(db: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in db["checks"]}


def test_a_healthy_cluster_with_closed_databases_and_templates_passes_naming_all_of_them(repo, restoreproof):
    path, _ = repo
    run = restoreproof("verify", path, "-d", "healthy")
    db = run.database("healthy")
    assert db["verdict"] == "passed", db["reasons"]
    assert run.exit_code == 0
    amcheck = checks(db)["pg_amcheck"]
    assert amcheck["summary"].endswith(" in 5 of 5 databases: no corruption"), amcheck["summary"]
    assert any(r.startswith("pg_amcheck: ") and "5 of 5 databases" in r for r in db["reasons"]), db["reasons"]
    details = amcheck["details"]
    assert sorted(details["databases_checked"]) == ["archive", "postgres", "template0", "template1", "tmpl_orders"]
    assert details["databases_not_checked"] == {}
    assert sorted(details["connections_allowed_by_restoreproof"]) == ["archive", "template0", "tmpl_orders"]
    # The data checks read the closed database too; the templates are named as left out, with why.
    baseline = checks(db)["data_baseline"]
    assert baseline["status"] == "passed", baseline
    assert "archive.public.cold" in baseline["details"]["tables"]
    assert baseline["details"]["databases_checked"] == ["archive", "postgres"]
    assert sorted(baseline["details"]["databases_not_checked"]) == ["template0", "template1", "tmpl_orders"]
    assert all("template database" in why for why in baseline["details"]["databases_not_checked"].values())
    phase = next(p for p in db["phases"] if p["name"] == "data_checks")
    assert phase["details"]["databases_checked"] == ["archive", "postgres"]
    assert run.report is not None and leftovers(run.report["run_id"]) == []


def test_a_damaged_page_in_a_database_that_refuses_connections_fails_naming_it(repo, restoreproof):
    path, made = repo
    damage = made["closed"]
    run = restoreproof("verify", path, "-d", "closed")
    db = run.database("closed")
    assert db["verdict"] == "failed", db["reasons"]
    assert run.exit_code == 1
    text = "\n".join(db["reasons"])
    assert 'heap table "archive.public.cold"' in text, text
    amcheck = checks(db)["pg_amcheck"]
    assert amcheck["status"] == "failed"
    assert "archive" in amcheck["details"]["databases_checked"]
    assert checks(db)["pg_checksums"]["status"] == "skipped"  # no checksums: pg_amcheck alone could tell
    assert damage.file.startswith("base/")


def test_a_damaged_page_in_a_closed_template_fails_naming_it(repo, restoreproof):
    path, made = repo
    damage = made["template"]
    run = restoreproof("verify", path, "-d", "template")
    db = run.database("template")
    assert db["verdict"] == "failed", db["reasons"]
    text = "\n".join(db["reasons"])
    assert 'heap table "tmpl_orders.public.orders"' in text, text
    assert damage.file in text  # pg_amcheck's "invalid page in block 1 of relation base/…" and pg_checksums
    assert checks(db)["pg_checksums"]["status"] == "failed"


def test_an_invalid_database_is_named_as_not_checked_and_the_run_is_an_error(repo, restoreproof):
    path, _ = repo
    run = restoreproof("verify", path, "-d", "invalid")
    db = run.database("invalid")
    assert db["verdict"] == "error", db["reasons"]
    assert run.exit_code == 2
    amcheck = checks(db)["pg_amcheck"]
    assert amcheck["status"] == "error"
    assert amcheck["summary"] == "pg_amcheck checked 3 of 4 databases; not checked: halfdropped"
    assert db["reasons"][0].startswith("pg_amcheck error: pg_amcheck checked 3 of 4 databases; not checked: "
                                       "halfdropped: database halfdropped not checked: invalid "
                                       "(pg_database.datconnlimit = -2"), db["reasons"]
    assert 'drop it on the source (DROP DATABASE "halfdropped")' in db["reasons"][0]
    assert amcheck["details"]["databases_not_checked"].keys() == {"halfdropped"}
