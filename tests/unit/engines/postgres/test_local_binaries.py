"""The local target's programs per PostgreSQL major, held to the backup's major and layouts, on this
host's real PostgreSQL 15 and pgBackRest (Debian bookworm's, installed by `make setup`)."""

from __future__ import annotations

import gzip
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.unit.engines.postgres.test_repository_format import MANIFESTS
from verification.config import PostgresSettings
from verification.engines.postgres.local_binaries import bin_dir_for, bin_dirs_for
from verification.engines.postgres.manifest import ManifestRead, layout_of, load_info
from verification.engines.postgres.repository_format import reader_needs
from verification.model import BackupSet, BackupType, Chain, ChainStatus, RestorePlan

HOST_15 = Path("/usr/lib/postgresql/15/bin")
pytestmark = pytest.mark.skipif(not (HOST_15 / "postgres").is_file(), reason="make setup installs PostgreSQL 15")


def plan_of(major: str, database: str = "db", block_incremental: bool = False) -> RestorePlan:
    now = datetime.now(UTC)
    backup = BackupSet(database=database, label="L", type=BackupType.FULL, start=now, finish=now)
    plan = RestorePlan("postgres", database, Chain(ChainStatus.COMPLETE, [backup], [], []), target_backup=backup,
                       written_by={"PostgreSQL": major, "pgBackRest": "2.60.0"})
    if block_incremental:
        text = gzip.decompress((MANIFESTS / "2.60.0-block" / "incr.manifest.gz").read_bytes())
        read = replace(ManifestRead("L", "backup/s/L/backup.manifest", "backup/s/L/backup.manifest"),
                       layout=layout_of(load_info(text)))
        plan.needs = reader_needs([read], {})
    return plan


def test_a_backup_gets_the_folder_of_its_own_major_by_default() -> None:
    assert bin_dir_for(PostgresSettings(), plan_of("15")) == HOST_15


def test_a_major_this_host_has_no_folder_for_is_refused_naming_what_to_install() -> None:
    said = bin_dir_for(PostgresSettings(), plan_of("17"))
    assert said == ("db: the backup needs PostgreSQL 17 (written by pgBackRest 2.60.0); the local target's "
                    "/usr/lib/postgresql/17/bin (the default) has no postgres, pg_ctl, pg_checksums, psql, pg_amcheck; "
                    "install postgresql-17 or set postgres.bin_dirs: {17: <its bin folder>}")


def test_a_folder_holding_another_major_is_refused_by_its_own_words() -> None:
    said = bin_dir_for(PostgresSettings(bin_dirs={"17": HOST_15}), plan_of("17"))
    assert isinstance(said, str)
    assert said.startswith("db: the backup needs PostgreSQL 17 (written by pgBackRest 2.60.0); the local target's "
                           "/usr/lib/postgresql/15/bin (postgres.bin_dirs[17]) holds PostgreSQL 15.")
    single = bin_dir_for(PostgresSettings(bin_dir=HOST_15), plan_of("13"))
    assert isinstance(single, str) and "(postgres.bin_dir) has no" not in single
    assert "/usr/lib/postgresql/15/bin (postgres.bin_dir) holds PostgreSQL 15." in single


def test_13_is_not_asked_for_pg_amcheck_which_it_does_not_have(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    for program in ("postgres", "pg_ctl", "pg_checksums", "psql"):
        (folder / program).symlink_to(HOST_15 / program)
    said = bin_dir_for(PostgresSettings(bin_dirs={"13": folder}), plan_of("13"))
    assert isinstance(said, str) and "has no" not in said and "holds PostgreSQL 15." in said


def test_the_hosts_pgbackrest_older_than_the_layout_is_refused_naming_both() -> None:
    said = bin_dir_for(PostgresSettings(), plan_of("15", block_incremental=True))
    assert isinstance(said, str)
    assert said.startswith("db: the backup needs PostgreSQL 15 (written by pgBackRest 2.60.0); reading it needs "
                           "pgBackRest 2.48 or newer: block incremental: [backup] backup-block-incr in ")
    assert said.endswith("; the local target's pgbackrest (/usr/bin/pgbackrest) has pgBackRest 2.45; set PATH to a "
                         "pgBackRest 2.48 or newer")


def test_each_database_is_chosen_or_refused_alone() -> None:
    chosen, refused = bin_dirs_for(PostgresSettings(), [plan_of("15", "a"), plan_of("17", "b")])
    assert chosen == {"a": HOST_15} and list(refused) == ["b"]


def folder_of(tmp_path: Path, programs: dict[str, Path]) -> Path:
    """A bin folder of real programs (symlinks), named as PostgreSQL's are."""
    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    for name, program in programs.items():
        (folder / name).symlink_to(program)
    return folder


def test_14_and_later_need_pg_amcheck_in_the_folder(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, {p: HOST_15 / p for p in ("postgres", "pg_ctl", "pg_checksums", "psql")})
    said = bin_dir_for(PostgresSettings(bin_dirs={"14": folder}), plan_of("14"))
    assert isinstance(said, str) and f"the local target's {folder} (postgres.bin_dirs[14]) has no pg_amcheck; " in said


def test_a_postgres_that_says_no_version_is_refused_saying_so(tmp_path: Path) -> None:
    programs = {p: HOST_15 / p for p in ("pg_ctl", "pg_checksums", "psql", "pg_amcheck")}
    folder = folder_of(tmp_path, programs | {"postgres": Path("/bin/true")})
    said = bin_dir_for(PostgresSettings(bin_dirs={"15": folder}), plan_of("15"))
    assert said == (f"db: the backup needs PostgreSQL 15 (written by pgBackRest 2.60.0); the local target's {folder} "
                    "(postgres.bin_dirs[15]) holds no PostgreSQL that says its version; install postgresql-15 or set "
                    "postgres.bin_dirs: {15: <its bin folder>}")
    failing = folder_of(tmp_path / "f", programs | {"postgres": Path("/bin/false")})
    assert "holds no PostgreSQL that says its version" in str(bin_dir_for(
        PostgresSettings(bin_dirs={"15": failing}), plan_of("15")))


def test_no_pgbackrest_on_path_is_refused_when_the_backup_needs_a_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    said = bin_dir_for(PostgresSettings(), plan_of("15", block_incremental=True))
    assert isinstance(said, str)
    assert said.endswith("; the local target's pgbackrest (not on PATH) does not say which pgBackRest it has "
                         "(`pgbackrest version` did not answer); set PATH to a pgBackRest 2.48 or newer"), said
    assert bin_dir_for(PostgresSettings(), plan_of("15")) == HOST_15  # a plain backup needs no version


def test_a_database_not_to_be_restored_gets_no_folder_and_the_next_still_does() -> None:
    broken = plan_of("17", "broken")
    broken.chain = Chain(ChainStatus.BROKEN, [], [], [])
    unplanned = plan_of("17", "unplanned")
    unplanned.target_backup = None
    unwritten = plan_of("17", "unwritten")
    unwritten.written_by = {}
    chosen, refused = bin_dirs_for(PostgresSettings(), [broken, unplanned, unwritten, plan_of("15", "a"),
                                                        plan_of("17", "b")])
    assert chosen == {"a": HOST_15}
    assert refused == {"b": bin_dir_for(PostgresSettings(), plan_of("17", "b"))}
    assert refused["b"].startswith("b: the backup needs PostgreSQL 17")
