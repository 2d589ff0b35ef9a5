"""The backup's own settings cannot weaken the checks (issue 28, class 2), on real clusters.

Each stanza is a real cluster (initdb -k, real pgBackRest 2.45) whose backup carries settings of its own
in the places a production cluster keeps them: postgresql.conf, an include_dir file, postgresql.auto.conf
(ALTER SYSTEM), and the catalog (ALTER ROLE / ALTER DATABASE ... SET). Two hold a data page damaged on
disk; the verifications of those run with pg_checksums off, so that pg_amcheck, reading through the
server, is the only check that can see the damage, and sees it only if the backup's zero_damaged_pages
and ignore_checksum_failure did not reach it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.faults.settings_clusters import Cluster, make_repository
from tests.integration.conftest import leftovers

pytestmark = [pytest.mark.integration, pytest.mark.faults]

SECRET = "Hidden-Conn-Pass-7"

CLUSTERS = [
    # Damage hidden by the files: an include_dir file zeroes damaged pages and ignores checksum failures.
    Cluster("files", damage=True, files={
        "postgresql.conf": ["include_dir = 'conf.d'"],
        "conf.d/10-salvage.conf": ["zero_damaged_pages = on", "ignore_checksum_failure = true",
                                   "client_min_messages = error"]}),
    # Damage hidden by the catalog and ALTER SYSTEM: pg_db_role_setting outranks the command line.
    Cluster("catalog", damage=True, sql=[
        "alter system set ignore_checksum_failure = on",
        "alter role postgres set zero_damaged_pages = on",
        "alter role postgres set client_min_messages = error"]),
    # Healthy, with settings that would blind the log reader, move recovery off the plan, hang a write or
    # send WAL elsewhere, beside harmless odd ones that must stay as they are.
    Cluster("blind", files={"postgresql.conf": [
        "log_min_messages = panic", "log_error_verbosity = terse", "log_line_prefix = '%t [%c] '",
        "log_destination = 'csvlog'", "logging_collector = on", "client_min_messages = error",
        "recovery_target_name = 'nowhere'", "recovery_target_action = 'shutdown'",
        "recovery_min_apply_delay = '1h'", "synchronous_standby_names = '*'",
        "default_transaction_read_only = on",
        f"primary_conninfo = 'host=nowhere user=replicator password={SECRET}'",
        "archive_cleanup_command = 'rm -f /repo/archive/%r'",
        "work_mem = '8MB'", "timezone = 'Asia/Tokyo'", "datestyle = 'sql, dmy'",
        "lc_messages = 'C.UTF-8'", "log_timezone = 'Etc/UTC'"]},
        sql=["alter database postgres set search_path = public, app",
             "alter database template1 set statement_timeout = '1ms'"]),
]


@pytest.fixture(scope="module")
def settings_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("settings") / "backups"
    make_repository(repo, CLUSTERS)
    return repo


def spec(stanza: str) -> Cluster:
    return next(c for c in CLUSTERS if c.stanza == stanza)


def overridden(db: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {o["name"] + " @ " + o["source"]: o for o in db.get("overridden_settings", [])}


def by_name(db: dict[str, Any], name: str) -> list[dict[str, str]]:
    return [o for o in db.get("overridden_settings", []) if o["name"] == name]


def no_checksums(monkeypatch: pytest.MonkeyPatch) -> None:
    # pg_amcheck, through the server, is then the one check that can see the damaged page.
    monkeypatch.setenv("RESTOREPROOF_POSTGRES__CHECKSUMS_CHECK", "false")


def test_damage_hidden_by_an_included_file_fails_naming_the_relation(settings_repo, restoreproof, monkeypatch):
    no_checksums(monkeypatch)
    run = restoreproof("verify", settings_repo, "-d", "files")
    db = run.database("files")
    assert db["verdict"] == "failed", db["reasons"]
    assert run.exit_code == 1
    assert any(spec("files").relation in r and "invalid page in block 1" in r for r in db["reasons"]), db["reasons"]
    (zero,) = by_name(db, "zero_damaged_pages")
    assert zero == {"name": "zero_damaged_pages", "backup_value": "on", "forced_value": "off",
                    "source": "conf.d/10-salvage.conf:1", "why": zero["why"]} and "damaged" in zero["why"]
    (ignore,) = by_name(db, "ignore_checksum_failure")
    assert (ignore["backup_value"], ignore["forced_value"], ignore["source"]) == (
        "true", "off", "conf.d/10-salvage.conf:2")


def test_damage_hidden_by_the_catalog_and_alter_system_fails_naming_the_relation(settings_repo, restoreproof,
                                                                                 monkeypatch):
    no_checksums(monkeypatch)
    run = restoreproof("verify", settings_repo, "-d", "catalog")
    db = run.database("catalog")
    assert db["verdict"] == "failed", db["reasons"]
    assert any(spec("catalog").relation in r and "invalid page in block 1" in r for r in db["reasons"]), db["reasons"]
    found = overridden(db)
    assert found['zero_damaged_pages @ ALTER ROLE "postgres" SET (pg_db_role_setting)']["backup_value"] == "on"
    assert found['client_min_messages @ ALTER ROLE "postgres" SET (pg_db_role_setting)']["backup_value"] == "error"
    (auto,) = by_name(db, "ignore_checksum_failure")
    assert auto["source"].startswith("postgresql.auto.conf:") and auto["backup_value"] == "on"


def test_settings_that_would_blind_the_log_or_move_recovery_are_overridden_and_the_backup_passes(
        settings_repo, restoreproof, isolated):
    run = restoreproof("verify", settings_repo, "-d", "blind")
    db = run.database("blind")
    assert db["verdict"] == "passed", db["reasons"]
    assert run.exit_code == 0
    assert db["restore_point"]["target"] == "latest"
    assert any(r.startswith("server log: redo done at") for r in db["reasons"]), db["reasons"]
    names = {o["name"]: o for o in db["overridden_settings"]}
    for name, backup in [("log_min_messages", "panic"), ("log_error_verbosity", "terse"),
                         ("log_line_prefix", "%t [%c] "), ("log_destination", "csvlog"), ("logging_collector", "on"),
                         ("client_min_messages", "error"), ("recovery_target_name", "nowhere"),
                         ("recovery_target_action", "shutdown"), ("recovery_min_apply_delay", "1h"),
                         ("synchronous_standby_names", "*"), ("default_transaction_read_only", "on"),
                         ("archive_cleanup_command", "rm -f /repo/archive/%r")]:
        assert names[name]["backup_value"] == backup, names[name]
        assert names[name]["source"].startswith("postgresql.conf:"), names[name]
    # A connection string is never shown, in the report or anywhere else restoreproof writes.
    assert names["primary_conninfo"]["backup_value"] == "(set, not shown)"
    timeout = overridden(db)['statement_timeout @ ALTER DATABASE "template1" SET (pg_db_role_setting)']
    assert (timeout["backup_value"], timeout["forced_value"]) == ("1ms", "0")
    assert SECRET not in json.dumps(run.report)
    written = [p for p in (isolated / "reports").rglob("*") if p.is_file()]
    assert written and not any(SECRET.encode() in p.read_bytes() for p in written)
    # The cluster's meaning is left as it is: harmless odd settings are not touched, English is English.
    assert not {"work_mem", "timezone", "datestyle", "search_path", "lc_messages", "log_timezone"} & set(names)
    assert run.report is not None and leftovers(run.report["run_id"]) == []
