"""The PostgreSQL restore flow against recorded outputs: one real verification of the demo (PostgreSQL
15.18, pgBackRest 2.45, restoreproof's own commands) replayed command by command.

tests/fixtures/postgres/flow holds what that run's tools printed (its evidence folder) and the
repository's info files and file names; pg_database.json and pg_amcheck.out are from a later run of
the same demo (pg_database read, template0 opened, then pg_amcheck over all 3 databases). A target that answers each command with the recorded
output lets the flow be checked without Docker: the commands sent, the phases measured, the proof
of the point reached, the checks and the verdict; then the same outputs with one fault each.
"""

from __future__ import annotations

import os
import shlex
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tests.conftest import FIXTURES, TESTS, fixture_text, write_manifest
from tests.unit.engines.postgres.conftest import EncryptedRepo
from verification.config import Settings
from verification.engines.base import DataAccess, Evidence, RestoreOutcome
from verification.engines.postgres.amcheck_sql import SCRIPT
from verification.engines.postgres.chain import plan
from verification.engines.postgres.cipher import PassphraseMissingError, WrongPassphraseError
from verification.engines.postgres.databases import TEMPLATE_LEFT_OUT
from verification.engines.postgres.engine import PostgresEngine
from verification.engines.postgres.repository import discover
from verification.errors import TargetError
from verification.model import (
    ChainStatus,
    CheckKind,
    CheckResult,
    CheckStatus,
    ChosenPoint,
    PhaseStatus,
    RestorePlan,
    Verdict,
    WalRange,
)
from verification.sources import LocalSource
from verification.targets.base import ExecResult
from verification.verdict import decide

FLOW = TESTS / "fixtures" / "postgres" / "flow"
MB16 = 16 * 1024 * 1024
INCR = "20261124-045834F_20261124-045847I"
# What pg_ctl 15 prints when the server it started stopped before accepting connections.
PG_CTL_FAILED = "waiting for server to start.... stopped waiting\npg_ctl: could not start server\nExamine the log output.\n"


def recorded(name: str) -> str:
    return (FLOW / name).read_text()


SETTINGS = TESTS / "fixtures" / "postgres" / "settings"


def as_flow(text: str) -> str:
    """A real capture of the settings (a catalog stanza restored under /tmp/w, scripts in
    tests/fixtures/postgres/settings/README.md) with its paths as this flow's target has them."""
    return (text.replace("/tmp/w/data", "/var/lib/restoreproof/data")
            .replace('"/tmp/w"', '"/var/lib/restoreproof/socket"').replace("/tmp/w/", "/var/lib/restoreproof/"))


def settings_capture(name: str) -> str:
    return as_flow((SETTINGS / name).read_text())


def restore_aborted(code: str, message: str) -> str:
    """The recorded restore's output ending as pgBackRest 2.45 ends one that threw `code`."""
    return recorded("pgbackrest-restore.log").replace(
        "INFO: restore command end: completed successfully (663ms)",
        f"ERROR: [{code}]: {message}\n2026-11-24 04:58:55.360 P00   INFO: restore command end: aborted with "
        f"exception [{code}]")


@pytest.fixture()
def demo_plan(tmp_path: Path) -> RestorePlan:
    """The demo repository as the run saw it: its info files, a manifest per backup, its WAL names."""
    backup, archive = tmp_path / "backup" / "demo1", tmp_path / "archive" / "demo1"
    backup.mkdir(parents=True)
    for name in ("backup.info", "backup.info.copy"):
        (backup / name).write_text(recorded("backup.info"))
    for label in recorded("backup-folders.txt").split():
        if label.startswith("2026"):
            (backup / label).mkdir()
            write_manifest(backup / label, label)
    archive.mkdir(parents=True)
    (archive / "archive.info").write_text(recorded("archive.info"))
    for name in recorded("archive-files.txt").split():
        (archive / name).parent.mkdir(parents=True, exist_ok=True)
        (archive / name).write_bytes(b"")
    source = LocalSource(tmp_path)
    (stanza,) = discover(source, MB16)
    return plan(source, stanza, None, MB16)


# The end-of-redo proof's reading of the flow's last segments (pg_controldata, pg_waldump), modelled on
# how the demo's archive ends (`pgbackrest check`: a restore point, then an XLOG SWITCH, the record the
# flow's server log says redo was done at; the system identifier its archive.info records): the flow's WAL
# was not kept. The parser and the rules are tested on real captures (tests/fixtures/postgres/wal-end/,
# test_wal_end.py).
FLOW_WAL_END_READ = """@@fetched 00000001000000000000000C 7711597932471058458
@@fetched 00000001000000000000000D 7711597932471058458
@@control
Database system identifier:           7711597932471058458
WAL block size:                       8192
Bytes per WAL segment:                16777216
Maximum data alignment:               8
@@exit 0
@@at
rmgr: XLOG        len (rec/tot):     24/    24, tx:          0, lsn: 0/0DCB9AB0, prev 0/0DCB9A48, desc: SWITCH
@@last
rmgr: XLOG        len (rec/tot):     24/    24, tx:          0, lsn: 0/0DCB9AB0, prev 0/0DCB9A48, desc: SWITCH
@@stderr
"""


class RecordedTarget:
    """Answers each command with what the real run's tools printed; records what it was sent."""

    kind, name, repo_path, work_dir = "recorded", "t", "/repo", "/var/lib/restoreproof"
    provision_seconds = 0.4
    exchange = None  # no folder shared with this process: data checks cannot reach it
    dies_at = ""  # the command at which the target goes away (raises), as a Docker engine that restarts

    def __init__(self, **replace: tuple[int, str]) -> None:
        self.sent: list[list[str]] = []
        self.env: list[dict[str, str]] = []
        self.files: dict[str, str] = {}
        self.answers: dict[str, tuple[int, str]] = {
            "pgbackrest restore": (0, recorded("pgbackrest-restore.log")),
            "pgbackrest version": (0, "pgBackRest 2.45\n"),  # the flow's pgBackRest (its verify output's)
            "pgbackrest verify": (0, recorded("pgbackrest-verify.out")),
            "pg_amcheck": (0, recorded("pg_amcheck.out")),
            # pg_database as listed, for every psql (the ALTER DATABASE of template0 ignores it).
            "psql": (0, recorded("pg_database.json")),
            "pg_checksums": (0, recorded("pg_checksums.out")),
            "pg_ctl start": (0, "waiting for server to start.... done\nserver started\n"),
            "pg_ctl stop": (0, "waiting for server to shut down.... done\nserver stopped\n"),
            "server.log": (0, recorded("server.log")),
            # PG_VERSION and postgresql.auto.conf as pgBackRest restore left them; the server's settings.
            "bash configure": (0, "15\n" + settings_capture("pgbackrest-auto-conf-alter-system.conf")),
            "psql backup-settings": (0, settings_capture("state.json")),
            "psql settings-in-effect": (0, settings_capture("effect.json")),
            "wal-end-read": (0, FLOW_WAL_END_READ),
            **replace,
        }

    def _key(self, argv: list[str]) -> str:
        if argv[0] == "bash" and argv[3:4] and argv[3].startswith("wal-end-"):
            return argv[3]  # the end-of-redo proof's reading of the archive's WAL (wal_read.py)
        if argv[0] == "pgbackrest":
            return f"pgbackrest {argv[-1]}"
        if argv[0] == "pg_ctl":
            return f"pg_ctl {argv[1]}"
        if argv[0] == "bash" and argv[3:4] == ["configure"]:
            return "bash configure"
        if argv[0] == "psql":
            sql = argv[-1]
            return ("psql backup-settings" if "pg_file_settings" in sql else
                    "psql settings-in-effect" if "pg_settings" in sql else "psql")
        return argv[0]

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        self.sent.append(argv)
        self.env.append(env or {})
        if self._key(argv) == self.dies_at:
            raise TargetError(f"the target went away running {self.dies_at}")
        code, output = self.answers.get(self._key(argv), (0, ""))  # mkdir, bash (wait for online)
        if self.exchange is not None:  # the server's socket is in the folder shared with this process
            output = output.replace('"/var/lib/restoreproof/socket"', f'"{self.exchange[0]}"')
        return ExecResult(argv, code, output, "", 0.1)

    def write_text(self, path: str, text: str) -> None:
        self.files[path] = text

    def read_text(self, path: str) -> str:
        assert path == f"{self.work_dir}/server.log"
        code, text = self.answers["server.log"]
        if code:
            raise OSError(text)
        return text

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def close(self) -> None:
        pass


def verify(demo_plan: RestorePlan, tmp_path: Path, target: RecordedTarget,
           settings: Callable[[Settings], None] | None = None) -> tuple[Any, Any]:
    chosen = Settings()
    if settings:
        settings(chosen)
    outcome = PostgresEngine(chosen).restore_and_check(demo_plan, target, Evidence(tmp_path / "evidence"))
    return outcome, decide(demo_plan, outcome)


def test_a_verify_of_a_staged_copy_is_said_to_cover_the_planned_chain_only(demo_plan: RestorePlan,
                                                                           tmp_path: Path) -> None:
    wal = demo_plan.chain.wal
    assert wal is not None and len(demo_plan.chain.backups) == 3
    staged = "11 objects staged from s3://backups/pg"
    outcome = PostgresEngine(Settings()).restore_and_check(demo_plan, RecordedTarget(), Evidence(tmp_path / "ev"),
                                                           RestoreOutcome(staged_copy=staged))
    (check,) = [c for c in outcome.checks if c.name == "pgbackrest_verify"]
    labels = ", ".join(b.label for b in demo_plan.chain.backups)
    assert check.summary == (f"3 backups and 1 WAL archive(s) valid; in the staged chain only (backup sets {labels}, "
                             f"WAL {wal.first} to {wal.last}: {staged}), not the whole repository: its other backups "
                             "and WAL were not staged, so not verified")
    assert decide(demo_plan, outcome)[1][-1] == f"pgbackrest_verify: {check.summary}"
    # Read in place (a folder, or S3 read by the target itself): the whole repository, said as before.
    outcome, (_, reasons) = verify(demo_plan, tmp_path, RecordedTarget())
    assert reasons[-1] == "pgbackrest_verify: 3 backups and 1 WAL archive(s) valid"


CIPHER_PASS = "Engine-Cipher-Pass-0c1d"


def with_passphrase(settings: Settings) -> None:
    settings.postgres.repo_cipher_pass = SecretStr(CIPHER_PASS)


def test_an_encrypted_plan_gives_the_key_to_pgbackrest_and_the_server_only(demo_plan: RestorePlan,
                                                                          tmp_path: Path) -> None:
    demo_plan.encryption = "aes-256-cbc"
    target = RecordedTarget()
    _, (verdict, _) = verify(demo_plan, tmp_path, target, with_passphrase)
    assert verdict is Verdict.PASSED
    keyed = sorted(target._key(argv) for argv, env in zip(target.sent, target.env, strict=True)
                   if env.get("PGBACKREST_REPO1_CIPHER_PASS") == CIPHER_PASS
                   and env.get("PGBACKREST_REPO1_CIPHER_TYPE") == "aes-256-cbc")
    # The server too: its restore_command (pgbackrest archive-get) reads the encrypted archive; and the
    # end-of-redo proof's archive-get of the last segments.
    assert keyed == ["pg_ctl start", "pgbackrest restore", "pgbackrest verify", "wal-end-read"]
    assert not any("PGBACKREST_REPO1_CIPHER_PASS" in env for argv, env in zip(target.sent, target.env, strict=True)
                   if target._key(argv) not in keyed)
    assert not any(CIPHER_PASS in arg for argv in target.sent for arg in argv)  # never on a command line


def test_a_plain_plan_gets_no_cipher_even_with_a_passphrase_set(demo_plan: RestorePlan, tmp_path: Path) -> None:
    target = RecordedTarget()
    _, (verdict, _) = verify(demo_plan, tmp_path, target, with_passphrase)
    assert verdict is Verdict.PASSED  # pgBackRest told of a cipher would not open the plain repository
    assert not any(key.startswith("PGBACKREST_REPO1_CIPHER") for env in target.env for key in env)


def test_an_encrypted_plan_restored_without_the_passphrase_is_refused_before_any_command(demo_plan: RestorePlan,
                                                                                       tmp_path: Path) -> None:
    demo_plan.encryption = "aes-256-cbc"
    target = RecordedTarget()
    with pytest.raises(PassphraseMissingError, match=r"^encrypted repository \(aes-256-cbc\): set "
                                                     r"postgres.repo_cipher_pass \(stanza demo1 is encrypted\)$"):
        verify(demo_plan, tmp_path, target)
    assert target.sent == []


def test_planning_tells_encryption_from_the_files(encrypted_repo: EncryptedRepo, captured_repo: Path) -> None:
    settings = Settings()
    with_passphrase(settings)
    plain = PostgresEngine(settings).plan(LocalSource(captured_repo), None)
    assert [p.encryption for p in plain.plans] == [None]
    assert plain.warnings == [f"postgres.repo_cipher_pass is set, but the repository {captured_repo} is not encrypted "
                              "(its info files are plain text): the passphrase is not used"]
    assert PostgresEngine(Settings()).plan(LocalSource(captured_repo), None).warnings == []
    settings.postgres.repo_cipher_pass = SecretStr(encrypted_repo.passphrase)
    encrypted = PostgresEngine(settings).plan(LocalSource(encrypted_repo.path), None)
    assert [p.encryption for p in encrypted.plans] == ["aes-256-cbc"] and encrypted.warnings == []
    assert [b.label for b in encrypted.plans[0].chain.backups] == encrypted_repo.backup_labels()
    with pytest.raises(PassphraseMissingError):  # not a stanza reported unreadable: the run stops
        PostgresEngine(Settings()).plan(LocalSource(encrypted_repo.path), None)
    settings.postgres.repo_cipher_pass = SecretStr("Wrong-Pass-For-This-Repo")
    with pytest.raises(WrongPassphraseError):
        PostgresEngine(settings).plan(LocalSource(encrypted_repo.path), None)


def test_the_recorded_run_passes_for_the_reasons_it_passed(demo_plan: RestorePlan, tmp_path: Path) -> None:
    target = RecordedTarget()
    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, target)
    assert verdict is Verdict.PASSED
    assert reasons[3:] == [
        "server log: redo done at 0/DCB9AB0 (in segment 00000001000000000000000D), the plan's last segment is "
        "00000001000000000000000D; all 2 planned segments 00000001000000000000000C to 00000001000000000000000D "
        "restored from the archive; no line ending recovery early",
        "WAL read with pg_waldump from 00000001000000000000000C, 00000001000000000000000D (pgbackrest archive-get): "
        "its last record is XLOG SWITCH at 0/DCB9AB0, and redo done at 0/DCB9AB0 is that record; the WAL ends with "
        "an XLOG SWITCH: the rest of the segment is padding and the archive holds no later segment on this timeline",
        "pg_amcheck: 330 tables and 491 indexes in 3 of 3 databases: no corruption",
        "pg_checksums: 16355 blocks in 966 files: 0 bad checksums",
        "pgbackrest_verify: 3 backups and 1 WAL archive(s) valid"]
    # The commands, in order, as restoreproof sends them; pgbackrest verify reads only the repository, so
    # it is sent as the transfer ends, alongside the recovery and the checks.
    sent = [" ".join(argv[:2]) if argv[0] != "pgbackrest" else f"pgbackrest {argv[-1]}" for argv in target.sent]
    assert [command for command in sent if command not in ("pgbackrest version", "pgbackrest verify")] == [
        "mkdir -p", "pgbackrest restore", "bash -c", "pg_ctl start", "bash -c", "psql -X", "psql -X", "psql -X",
        "bash -c", "psql -X", "psql -X", "pg_amcheck -h", "pg_ctl stop", "pg_checksums --check"]
    assert sent.count("pgbackrest verify") == 1 and sent.index("pgbackrest verify") > sent.index("pgbackrest restore")
    # pg_amcheck opens one connection per CPU the target is given (Docker's limit; here, this host's).
    (amcheck,) = [argv for argv in target.sent if argv[0] == "pg_amcheck"]
    assert f"--jobs={os.cpu_count() or 1}" in amcheck
    # Before it, pg_database is listed and template0, which refuses connections, made to allow them.
    listed, opened = [argv for argv in target.sent if argv[0] == "psql"][-2:]
    assert listed[-1].startswith("select coalesce(json_agg(") and listed[-3:-2] == ["template1"]
    assert opened[-1] == 'ALTER DATABASE "template0" ALLOW_CONNECTIONS true'
    # Its sessions leave the server's notices out (amcheck already installed is none of its findings).
    assert target.env[target.sent.index(amcheck)] == {"PGOPTIONS": "-c client_min_messages=warning"}
    (check,) = [c for c in outcome.checks if c.name == "pg_amcheck"]
    assert check.details["databases_checked"] == check.details["databases_existing"] == [
        "postgres", "template0", "template1"]
    assert check.details["connections_allowed_by_restoreproof"] == ["template0"]
    (restore,) = [argv for argv in target.sent if argv[0] == "pgbackrest" and argv[-1] == "restore"]
    assert f"--set={INCR}" in restore and "--archive-mode=off" in restore and "--stanza=demo1" in restore
    assert not any(arg.startswith("--type=") for arg in restore)  # latest: no recovery target
    phases = {p.name: p for p in outcome.phases}
    assert phases["transfer"].details["files"] == 984 and phases["transfer"].status is PhaseStatus.MEASURED
    assert phases["redo"].seconds == pytest.approx(0.13) and phases["redo"].details["segments_restored"] == 3
    assert phases["zeroing"].status is PhaseStatus.ABSENT and phases["data_checks"].status is PhaseStatus.ABSENT
    assert sorted((tmp_path / "evidence").iterdir()) == sorted(
        tmp_path / "evidence" / name for name in ("pgbackrest-restore.log", "server.log", "server-settings.txt",
                                                   "pg_amcheck.out", "pg_checksums.out", "pgbackrest-verify.out",
                                                   "pg_database.json", "wal-end-read.out"))
    # One command writes the authentication files and reads what the restore left: PG_VERSION and
    # pgBackRest's recovery settings.
    (configured,) = [argv for argv in target.sent if argv[:2] == ["bash", "-c"] and argv[3] == "configure"]
    assert "printf 'local all all trust\\n' > /var/lib/restoreproof/pg_hba.conf" in configured[2]
    assert "cat /var/lib/restoreproof/data/PG_VERSION /var/lib/restoreproof/data/postgresql.auto.conf" in configured[2]
    # Every setting on the server's command line, where no file of the backup can outrank it.
    (start,) = [argv for argv in target.sent if argv[:2] == ["pg_ctl", "start"]]
    options = shlex.split(start[start.index("-o") + 1])
    assert "hot_standby=off" in options and "log_timezone=UTC" in options and "zero_damaged_pages=off" in options
    assert "data_directory=/var/lib/restoreproof/data" in options
    assert ("restore_command=pgbackrest --lock-path=/var/lib/restoreproof/pgbackrest --log-path=/var/lib/restoreproof/"
            "pgbackrest --pg1-path=/var/lib/restoreproof/data --repo1-path=/repo --stanza=catalog archive-get %f \"%p\""
            ) in options
    # The catalog's per-role settings reset in a session whose client options outrank them; the check of
    # what is in effect in a plain one, as the checks' sessions are.
    psql = [(argv[-1], env) for argv, env in zip(target.sent, target.env, strict=True) if argv[0] == "psql"]
    assert [sql for sql, _ in psql[1:2]] == [
        'ALTER ROLE "postgres" RESET "zero_damaged_pages"; ALTER ROLE "postgres" RESET "client_min_messages"']
    assert "-c zero_damaged_pages=off" in psql[0][1]["PGOPTIONS"] and psql[1][1]["PGOPTIONS"] == psql[0][1]["PGOPTIONS"]
    assert psql[2][1] == {}
    assert [(o.name, o.backup_value, o.source) for o in outcome.overridden_settings] == [
        ("unix_socket_directories", "/tmp", "postgresql.conf:819"),
        ("ignore_checksum_failure", "on", "postgresql.auto.conf:3"),
        ("archive_command", "pgbackrest --stanza=catalog archive-push %p", "postgresql.conf:817"),
        ("zero_damaged_pages", "on", 'ALTER ROLE "postgres" SET (pg_db_role_setting)'),
        ("client_min_messages", "error", 'ALTER ROLE "postgres" SET (pg_db_role_setting)')]


@pytest.mark.parametrize(("fault", "replace", "verdict", "reason"), [
    ("restore refused by a corrupt file", {"pgbackrest restore": (82, recorded("pgbackrest-restore.log").replace(
        "restore command end: completed successfully (663ms)",
        "restore command end: aborted with exception [029]\nERROR: [029]: raised from local-1 protocol: zlib threw "
        "error: [-3] data error"))},
     Verdict.FAILED, "pgbackrest restore of backup 20261124-045834F_20261124-045847I failed: [029] raised from "
                     "local-1 protocol: zlib threw error: [-3] data error"),
    # A local repository: a file missing is the backups' fault; [039] is pgBackRest's processes failing to
    # understand each other (protocol/client.c), which on a posix repository never judges a file.
    ("restore refused by a missing file", {"pgbackrest restore": (55, recorded("pgbackrest-restore.log").replace(
        "restore command end: completed successfully (663ms)",
        "restore command end: aborted with exception [055]\nERROR: [055]: raised from local-1 protocol: unable to "
        "open missing file '/repo/backup/demo1/20261124-045834F/pg_data/base/1/1247.gz' for read"))},
     Verdict.FAILED, "pgbackrest restore of backup 20261124-045834F_20261124-045847I failed: [055] raised from "
                     "local-1 protocol: unable to open missing file "
                     "'/repo/backup/demo1/20261124-045834F/pg_data/base/1/1247.gz' for read"),
    # What pgBackRest 2.45 says when the restore's destination refuses it (storage/posix/write.c
    # STORAGE_ERROR_WRITE_OPEN with the system's words): the target's fault, the backups are not shown bad.
    ("the target's data folder not writable", {"pgbackrest restore": (41, restore_aborted(
        "041", "raised from local-1 protocol: unable to open file "
        "'/var/lib/restoreproof/data/base/5/16384.pgbackrest.tmp' for write: [13] Permission denied"))},
     Verdict.ERROR, "pgbackrest restore of backup 20261124-045834F_20261124-045847I stopped at "
                    "/var/lib/restoreproof/data/base/5/16384.pgbackrest.tmp, in the target outside the repository "
                    "/repo (exit 41): [041] raised from local-1 protocol: unable to open file "
                    "'/var/lib/restoreproof/data/base/5/16384.pgbackrest.tmp' for write: [13] Permission denied"),
    ("the target's quota ran out", {"pgbackrest restore": (41, restore_aborted(
        "041", "raised from local-1 protocol: unable to open file "
        "'/var/lib/restoreproof/data/base/1/1247.pgbackrest.tmp' for write: [122] Disk quota exceeded"))},
     Verdict.ERROR, "pgbackrest restore of backup 20261124-045834F_20261124-045847I stopped at "
                    "/var/lib/restoreproof/data/base/1/1247.pgbackrest.tmp, in the target outside the repository "
                    "/repo (exit 41): [041] raised from local-1 protocol: unable to open file "
                    "'/var/lib/restoreproof/data/base/1/1247.pgbackrest.tmp' for write: [122] Disk quota exceeded"),
    # command/restore/restore.c: the destination already holds files.
    ("the target's data folder not empty", {"pgbackrest restore": (40, restore_aborted(
        "040", "unable to restore to path '/var/lib/restoreproof/data' because it contains files\n"
               "HINT: try using --delta if this is what you intended."))},
     Verdict.ERROR, "pgbackrest restore of backup 20261124-045834F_20261124-045847I stopped at "
                    "/var/lib/restoreproof/data, in the target outside the repository /repo (exit 40): [040] "
                    "unable to restore to path '/var/lib/restoreproof/data' because it contains files"),
    # storage/posix/write.c STORAGE_ERROR_WRITE_MISSING: the target's folder went away under the restore.
    ("the target's folder deleted", {"pgbackrest restore": (55, restore_aborted(
        "055", "raised from local-1 protocol: unable to open file "
        "'/var/lib/restoreproof/data/base/1/1249' for write in missing path"))},
     Verdict.ERROR, "pgbackrest restore of backup 20261124-045834F_20261124-045847I stopped at "
                    "/var/lib/restoreproof/data/base/1/1249, in the target outside the repository /repo (exit 55): "
                    "[055] raised from local-1 protocol: unable to open file '/var/lib/restoreproof/data/base/1/1249' "
                    "for write in missing path"),
    # postgres/interface.c: the target's pgBackRest does not know the backup's PostgreSQL version.
    ("the target's pgBackRest too old for the backup", {"pgbackrest restore": (46, restore_aborted(
        "046", "invalid PostgreSQL version 170000\nHINT: is this version of PostgreSQL supported?"))},
     Verdict.ERROR, "pgbackrest restore of backup 20261124-045834F_20261124-045847I could not run (exit 46): "
                    "[046] invalid PostgreSQL version 170000"),
    # The same codes naming a file in the repository do blame the backups (info/info.c; storage/posix/read.c).
    ("the repository's info files unreadable", {"pgbackrest restore": (41, restore_aborted(
        "041", "unable to load info file '/repo/backup/demo1/backup.info' or "
               "'/repo/backup/demo1/backup.info.copy':\nChecksumError: invalid checksum in "
               "'/repo/backup/demo1/backup.info', expected 'a' but found 'b'\n"
               "FileMissingError: unable to open missing file '/repo/backup/demo1/backup.info.copy' for read"))},
     Verdict.FAILED, "pgbackrest restore of backup 20261124-045834F_20261124-045847I failed: [041] unable to load "
                     "info file '/repo/backup/demo1/backup.info' or '/repo/backup/demo1/backup.info.copy':"),
    ("a repository file unreadable", {"pgbackrest restore": (41, restore_aborted(
        "041", "raised from local-1 protocol: unable to open file "
        "'/repo/backup/demo1/20261124-045834F/pg_data/base/1/1247.gz' for read: [13] Permission denied"))},
     Verdict.FAILED, "pgbackrest restore of backup 20261124-045834F_20261124-045847I failed: [041] raised from "
                     "local-1 protocol: unable to open file "
                     "'/repo/backup/demo1/20261124-045834F/pg_data/base/1/1247.gz' for read: [13] Permission denied"),
    ("pgBackRest's own processes out of step", {"pgbackrest restore": (39, recorded("pgbackrest-restore.log").replace(
        "restore command end: completed successfully (663ms)",
        "restore command end: aborted with exception [039]\nERROR: [039]: client state is 'idle' but expected "
        "'cmdDataGet'"))},
     Verdict.ERROR, "pgbackrest restore of backup 20261124-045834F_20261124-045847I could not read the repository "
                    "/repo: [039] ProtocolError: client state is 'idle' but expected 'cmdDataGet'"),
    ("server log cut before the end of redo", {"server.log": (0, "\n".join(
        recorded("server.log").splitlines()[:12]) + "\n")},
     Verdict.ERROR, "the server came online but its log does not say where redo ended (no 'redo done at' line), "
                    "so the point reached is unproven"),
    ("pg_amcheck found corruption", {"pg_amcheck": (2, recorded("pg_amcheck.out") + 'heap table '
                                                    '"postgres.public.pgbench_accounts", block 3:\n')},
     Verdict.FAILED, "pg_amcheck failed: pg_amcheck found corruption (1 lines): heap table "
                     '"postgres.public.pgbench_accounts", block 3:'),
    ("pg_checksums printed nothing", {"pg_checksums": (0, "")},
     Verdict.ERROR, "pg_checksums error: pg_checksums could not run (exit 0)"),
    ("the server did not stop", {"pg_ctl stop": (1, "pg_ctl: server does not shut down\n")},
     Verdict.ERROR, "the restored server did not stop cleanly: pg_ctl: server does not shut down"),
    # A server that does not start, and says nothing restoreproof knows: nothing blames the backups.
    ("the server never came online", {"pg_ctl start": (1, "pg_ctl: could not start server\n"),
                                      "server.log": (0, "")},
     Verdict.ERROR, "the restored server did not come online, for a reason not shown to be a fault of the backups: "
                    "pg_ctl: could not start server"),
    # Real PostgreSQL 15.18 logs of servers that did not start (scripts/capture-postgres-start-fixtures.sh).
    ("the checkpoint's segment is missing", {"pg_ctl start": (1, PG_CTL_FAILED),
                                             "server.log": (0, fixture_text("server-start-checkpoint-missing.log"))},
     Verdict.FAILED, "the restored server did not come online: FATAL: could not locate required checkpoint record"),
    ("the backup's last segment is missing", {"pg_ctl start": (1, PG_CTL_FAILED),
                                              "server.log": (0, fixture_text("server-start-backup-end-missing.log"))},
     Verdict.FAILED, "the restored server did not come online: FATAL: WAL ends before end of online backup"),
    ("a library the target lacks", {"pg_ctl start": (1, PG_CTL_FAILED),
                                    "server.log": (0, fixture_text("server-start-missing-library.log"))},
     Verdict.ERROR, "the restored server did not come online, for a reason not shown to be a fault of the backups: "
                    'FATAL: could not access file "restoreproof_absent": No such file or directory'),
    # Bad WAL said before the server stopped is the backups' fault whatever the last words were.
    ("a segment the archive could not deliver", {
        "pg_ctl start": (1, PG_CTL_FAILED), "server.log": (0, fixture_text("server-recovery-truncated-segment.log"))},
     Verdict.FAILED, "the restored server did not come online: pgBackRest archive-get ERROR: [042]: unable to get "
                     "00000001000000000000000D: repo1: 15-1/0000000100000000/00000001000000000000000D-"
                     "83c6cdd74f7f84324f15a60ad1c40eefe227010f.gz [FormatError] unexpected eof in compressed data"),
    ("a zeroed segment", {"pg_ctl start": (1, PG_CTL_FAILED),
                          "server.log": (0, fixture_text("server-recovery-zeroed-segment.log"))},
     Verdict.FAILED, "the restored server did not come online: LOG: invalid magic number 0000 in log segment "
                     "00000001000000000000000D, offset 0"),
])
def test_each_recorded_output_with_one_fault(demo_plan: RestorePlan, tmp_path: Path, fault: str,
                                             replace: dict[str, tuple[int, str]], verdict: Verdict,
                                             reason: str) -> None:
    _, (found, reasons) = verify(demo_plan, tmp_path, RecordedTarget(**replace))
    assert (found, reasons[0]) == (verdict, reason), fault


def test_checks_disabled_by_settings_are_said_skipped_never_passed(demo_plan: RestorePlan, tmp_path: Path) -> None:
    def off(settings: Settings) -> None:
        settings.postgres.checksums_check = False
        settings.postgres.repository_verify = False

    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, RecordedTarget(), off)
    skipped = {c.name: c.summary for c in outcome.checks if c.status is CheckStatus.SKIPPED}
    assert skipped == {"pg_checksums": "not run: disabled by the setting postgres.checksums_check: false",
                       "pgbackrest_verify": "not run: disabled by the setting postgres.repository_verify: false"}
    assert verdict is Verdict.PASSED and reasons[-2:] == [
        "pg_checksums skipped: not run: disabled by the setting postgres.checksums_check: false",
        "pgbackrest_verify skipped: not run: disabled by the setting postgres.repository_verify: false"]


def test_what_the_engine_proved_before_the_target_went_away_is_in_the_outcome_given(demo_plan: RestorePlan,
                                                                                     tmp_path: Path) -> None:
    # pg_amcheck found corruption, then the target died at the clean stop: the caller still has the proof.
    target = RecordedTarget(pg_amcheck=(2, recorded("pg_amcheck.out") + 'heap table "postgres.public.t", block 3:\n'))
    target.dies_at = "pg_ctl stop"
    given = RestoreOutcome()
    with pytest.raises(TargetError, match="the target went away running pg_ctl stop"):
        PostgresEngine(Settings()).restore_and_check(demo_plan, target, Evidence(tmp_path / "evidence"), given)
    assert given.online is True
    assert [(c.name, c.status, c.summary) for c in given.checks] == [
        ("pg_amcheck", CheckStatus.FAILED, "pg_amcheck found corruption (1 lines)")]
    # Without an outcome given, the engine makes its own.
    outcome = PostgresEngine(Settings()).restore_and_check(demo_plan, RecordedTarget(), Evidence(tmp_path / "e2"))
    assert outcome is not given and outcome.online is True


class SlowTarget(RecordedTarget):
    """The recorded outputs, each command taking `slow[command]` seconds, and every command's start and
    end noted in `log` (with the data checks' own, from the checks below)."""

    def __init__(self, log: list[str], slow: dict[str, float], **replace: tuple[int, str]) -> None:
        super().__init__(**replace)
        self.log, self.slow = log, slow

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        key = self._key(argv)
        self.log.append(f"start {key}")
        time.sleep(self.slow.get(key, 0.0))
        try:
            return super().run(argv, timeout=timeout, env=env)
        finally:
            self.log.append(f"end {key}")


def test_the_data_checks_run_alongside_pg_amcheck_and_the_server_stops_only_once_both_are_done(
        demo_plan: RestorePlan, tmp_path: Path) -> None:
    log: list[str] = []
    target = SlowTarget(log, {"pg_amcheck": 0.3})
    target.exchange = ("/run/restoreproof", str(tmp_path / "exchange"))
    amcheck_started = threading.Event()
    original = target.run

    def run(argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        if argv[0] == "pg_amcheck":
            amcheck_started.set()
        return original(argv, timeout=timeout, env=env)

    target.run = run  # type: ignore[method-assign]

    def data_checks(access: DataAccess, evidence: Evidence) -> list[CheckResult]:
        log.append("start data checks")
        # They are under way while pg_amcheck runs: it starts without waiting for them.
        assert amcheck_started.wait(5), "pg_amcheck waited for the data checks"
        time.sleep(0.5)  # and they outlast it
        log.append("end data checks")
        return [CheckResult("data:rows", CheckStatus.PASSED, "2 expectations met", kind=CheckKind.DATA)]

    outcome = PostgresEngine(Settings()).restore_and_check(demo_plan, target, Evidence(tmp_path / "evidence"),
                                                           data_checks=data_checks)
    assert log.index("start data checks") < log.index("end pg_amcheck") < log.index("end data checks")
    assert log.index("end data checks") < log.index("start pg_ctl stop")  # the server stayed up for them
    # Checks and phases in the order a run one step after the other gives them.
    assert [c.name for c in outcome.checks] == ["data:rows", "pg_amcheck", "pg_checksums", "pgbackrest_verify"]
    names = [p.name for p in outcome.phases]
    assert names.index("data_checks") < names.index("integrity_check") < names.index("repository_verify")
    phases = {p.name: p for p in outcome.phases}
    checks, integrity = phases["data_checks"], phases["integrity_check"]
    assert checks.seconds is not None and checks.seconds >= 0.5
    assert "integrity_check" in checks.details["alongside"] and "data_checks" in integrity.details["alongside"]
    # The integrity check's own seconds: pg_amcheck, the stop, pg_checksums; not the wait between.
    waited = integrity.details["waited_for_data_checks_seconds"]
    assert waited >= 0.1
    assert integrity.seconds == pytest.approx(integrity.details["pg_amcheck_seconds"] + integrity.details[
        "stop_seconds"] + integrity.details["pg_checksums_seconds"], abs=0.05)
    assert integrity.started_at is not None and checks.started_at is not None
    assert decide(demo_plan, outcome)[0] is Verdict.PASSED


def test_pgbackrest_verify_runs_alongside_the_recovery_and_is_timed_on_its_own(demo_plan: RestorePlan,
                                                                               tmp_path: Path) -> None:
    log: list[str] = []
    # The recorded server log replays WAL for 0.13 s right after its start: the verify is running then.
    target = SlowTarget(log, {"pgbackrest restore": 0.3, "pgbackrest verify": 1.0, "pg_amcheck": 0.2})
    outcome, (verdict, _) = verify(demo_plan, tmp_path, target)
    assert verdict is Verdict.PASSED
    # Not alongside the transfer (pgBackRest's restore processes keep the CPUs busy), right after it.
    assert log.index("end pgbackrest restore") < log.index("start pgbackrest verify")
    assert log.index("end pgbackrest verify") > log.index("start pg_amcheck")  # still running: not waited for
    phases = {p.name: p for p in outcome.phases}
    verify_phase = phases["repository_verify"]
    assert verify_phase.seconds == pytest.approx(1.0, abs=0.3)
    assert {"integrity_check", "redo", "server_start"} <= set(verify_phase.details["alongside"])
    assert "transfer" not in verify_phase.details["alongside"] and "alongside" not in phases["transfer"].details
    assert "repository_verify" in phases["redo"].details["alongside"]


def test_the_repository_is_verified_even_where_the_target_could_not_be_prepared(demo_plan: RestorePlan,
                                                                                tmp_path: Path) -> None:
    target = RecordedTarget(mkdir=(1, "mkdir: cannot create directory: No space left on device"))
    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, target)
    assert verdict is Verdict.ERROR and reasons[0].startswith("cannot prepare /var/lib/restoreproof/data")
    assert [argv[-1] for argv in target.sent if argv[0] == "pgbackrest"] == ["version", "verify"]
    assert [c.name for c in outcome.checks] == ["pgbackrest_verify"]


@pytest.mark.parametrize(("kind", "cpus", "options", "jobs"), [
    ("docker", 1.5, [], f"--jobs={min(2, os.cpu_count() or 1)}"),  # a share of a CPU still runs a job
    ("docker", 64.0, [], f"--jobs={os.cpu_count() or 1}"),  # never more than the host has
    ("recorded", 1.0, [], f"--jobs={os.cpu_count() or 1}"),  # a local target: the host's
    ("docker", 2.0, ["--heapallindexed", "--jobs=7"], None),  # the configuration's own, left as it is
    ("docker", 2.0, ["-j", "3"], None),
])
def test_pg_amcheck_opens_a_connection_per_cpu_the_target_is_given(demo_plan: RestorePlan, tmp_path: Path,
                                                                   kind: str, cpus: float, options: list[str],
                                                                   jobs: str | None) -> None:
    target = RecordedTarget()
    target.kind = kind

    def limits(settings: Settings) -> None:
        settings.docker.cpus = cpus
        settings.postgres.amcheck_options = options

    verify(demo_plan, tmp_path, target, limits)
    (amcheck,) = [argv for argv in target.sent if argv[0] == "pg_amcheck"]
    added = [arg for arg in amcheck if arg.startswith("--jobs=")]
    assert added == ([jobs] if jobs else [a for a in options if a.startswith("--jobs=")])
    if options:  # the configuration's options come last, as given
        assert amcheck[-len(options):] == options


def test_the_tools_versions_are_asked_in_one_command_each_in_its_own_words(tmp_path: Path) -> None:
    import stat
    import subprocess

    tools = tmp_path / "bin"
    tools.mkdir()
    for name, script in {"pgbackrest": 'echo "pgBackRest 2.45"', "postgres": 'echo "postgres (PostgreSQL) 15.18"',
                         "pg_amcheck": 'echo "no such option" >&2; exit 2'}.items():
        (tools / name).write_text(f"#!/bin/sh\n{script}\n")
        (tools / name).chmod(stat.S_IRWXU)

    class Shell(RecordedTarget):
        def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
            self.sent.append(argv)
            done = subprocess.run(argv, capture_output=True, text=True, env={"PATH": f"{tools}:/usr/bin:/bin"})
            return ExecResult(argv, done.returncode, done.stdout, done.stderr, 0.0)

    target = Shell()
    assert PostgresEngine(Settings()).tool_versions(target) == {
        "pgbackrest": "pgBackRest 2.45", "postgres": "postgres (PostgreSQL) 15.18", "pg_amcheck": "(exit 2)"}
    assert len(target.sent) == 1

    class Gone(RecordedTarget):
        def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
            raise TargetError("the target went away")

    assert PostgresEngine(Settings()).tool_versions(Gone()) == {
        tool: "(not run: the target went away)" for tool in ("pgbackrest", "postgres", "pg_amcheck")}


def test_the_wait_for_the_end_of_recovery_asks_the_server_only_once_its_log_says_it_is_ready(tmp_path: Path) -> None:
    """The wait runs beside the server's redo: while the log does not say the server accepts connections,
    psql is started once a second, not every 50 ms; a server that is gone ends the wait with exit 3."""
    import stat
    import subprocess

    from verification.engines.postgres.engine import WAIT_ONLINE

    tools, data, log, asked = tmp_path / "bin", tmp_path / "data", tmp_path / "server.log", tmp_path / "asked"
    tools.mkdir()
    data.mkdir()
    (tools / "psql").write_text(f'#!/bin/sh\ncase "$*" in *"-d template1 "*) echo x >> {asked};; esac\n'
                                f'grep -q "ready to accept connections" {log} && echo f || exit 2\n')
    (tools / "psql").chmod(stat.S_IRWXU)
    server = subprocess.Popen(["sleep", "30"])  # stands for the postmaster
    (data / "postmaster.pid").write_text(f"{server.pid}\n{data}\n")
    log.write_text("LOG:  redo starts at 0/2000028\n")

    def wait() -> subprocess.Popen[str]:
        return subprocess.Popen(["bash", "-c", WAIT_ONLINE, "wait", "/sock", "5432", "postgres", str(data), str(log)],
                                env={"PATH": f"{tools}:/usr/bin:/bin"}, text=True)

    try:
        waiting = wait()
        time.sleep(1.5)
        assert waiting.poll() is None  # still recovering
        assert len(asked.read_text().splitlines()) <= 2  # 2 in 1.5 s, not 30
        log.write_text(log.read_text() + "LOG:  database system is ready to accept connections\n")
        assert waiting.wait(5) == 0
        log.write_text("LOG:  redo starts at 0/2000028\n")
        waiting = wait()
        server.kill()
        server.wait()
        assert waiting.wait(5) == 3  # the server is gone: no waiting for the timeout
    finally:
        server.kill()


def test_the_wait_asks_postgres_when_template1_refuses_connections_and_says_which(tmp_path: Path) -> None:
    import stat
    import subprocess

    from verification.engines.postgres.engine import WAIT_ONLINE

    tools, data, log = tmp_path / "bin", tmp_path / "data", tmp_path / "server.log"
    tools.mkdir()
    data.mkdir()
    # The server's own refusal for a database that does not allow connections.
    (tools / "psql").write_text('#!/bin/sh\ncase "$*" in *"-d template1 "*) echo \'psql: error: FATAL:  database '
                                '"template1" is not currently accepting connections\' >&2; exit 2;; esac\necho f\n')
    (tools / "psql").chmod(stat.S_IRWXU)
    server = subprocess.Popen(["sleep", "30"])
    (data / "postmaster.pid").write_text(f"{server.pid}\n{data}\n")
    log.write_text("LOG:  database system is ready to accept connections\n")
    try:
        waited = subprocess.run(["bash", "-c", WAIT_ONLINE, "wait", "/sock", "5432", "postgres", str(data), str(log)],
                                env={"PATH": f"{tools}:/usr/bin:/bin"}, text=True, capture_output=True, timeout=10)
        assert (waited.returncode, waited.stdout) == (0, "postgres\n")
    finally:
        server.kill()


def _damage_block_before_last(path: Path) -> None:
    """Its last plaintext byte (the padding's length) made invalid: CBC XORs the block before into it."""
    data = bytearray(path.read_bytes())
    data[-17] ^= 0xFF
    path.write_bytes(data)


def test_a_stanza_the_proven_passphrase_does_not_open_is_damage_not_a_wrong_passphrase(
        encrypted_copy: EncryptedRepo) -> None:
    # A second stanza, every info file of it damaged: the first stanza's open with the same passphrase.
    repo, stanza = encrypted_copy.path, encrypted_copy.stanza
    for kind in ("backup", "archive"):
        shutil.copytree(repo / kind / stanza, repo / kind / "zdamaged", symlinks=True)
        for info in (repo / kind / "zdamaged").glob(f"{kind}.info*"):
            _damage_block_before_last(info)
    settings = Settings()
    settings.postgres.repo_cipher_pass = SecretStr(encrypted_copy.passphrase)
    planned = PostgresEngine(settings).plan(LocalSource(repo), None)
    by_name = {p.database: p for p in planned.plans}
    assert by_name[stanza].chain.status is ChainStatus.COMPLETE  # the good stanza is still planned
    damaged = by_name["zdamaged"].chain
    assert damaged.status is ChainStatus.BROKEN
    assert damaged.problems[0].message.startswith(
        "stanza zdamaged cannot be planned: no info file of stanza zdamaged decrypts with the passphrase that opens "
        "the repository's other stanzas (backup/zdamaged/backup.info, backup/zdamaged/backup.info.copy, "
        "archive/zdamaged/archive.info, archive/zdamaged/archive.info.copy): damaged")
    assert sorted(u.path for u in planned.unreadable if u.database == "zdamaged") == sorted(
        f"{kind}/zdamaged/{kind}.info{copy}" for kind in ("backup", "archive") for copy in ("", ".copy"))
    assert encrypted_copy.passphrase not in repr(planned)
    # With only the damaged stanza there, nothing proves the passphrase: it is said wrong, as before.
    for kind in ("backup", "archive"):
        shutil.rmtree(repo / kind / stanza)
    with pytest.raises(WrongPassphraseError):
        PostgresEngine(settings).plan(LocalSource(repo), None)


# -- every database of the restored cluster ------------------------------------------------------------

class ByStatement(RecordedTarget):
    """psql answered by the statement it runs: ALTER DATABASE by `altered` (the server's words per
    database, default success), the listing by the recorded answer."""

    def __init__(self, altered: dict[str, tuple[int, str]] | None = None, **replace: tuple[int, str]) -> None:
        super().__init__(**replace)
        self.altered = altered or {}

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        if argv[0] == "psql" and argv[-1].startswith("ALTER DATABASE "):
            self.sent.append(argv)
            self.env.append(env or {})
            name = argv[-1].split('"')[1]
            code, said = self.altered.get(name, (0, ""))
            return ExecResult(argv, code, "", said, 0.1)
        return super().run(argv, timeout=timeout, env=env)


def test_closed_databases_are_opened_before_any_check_and_the_data_checks_read_them(demo_plan: RestorePlan,
                                                                                     tmp_path: Path) -> None:
    # pg_database of a fault test's cluster: archive closed, tmpl_orders a closed template, template0.
    target = ByStatement(psql=(0, fixture_text("pg_database-closed-databases.json")),
                         pg_amcheck=(0, fixture_text("pg_amcheck-every-database.out")))
    target.exchange = ("/run/restoreproof", str(tmp_path / "exchange"))
    seen: list[DataAccess] = []

    def data_checks(access: DataAccess, evidence: Evidence) -> list[CheckResult]:
        seen.append(access)
        return [CheckResult("data_baseline", CheckStatus.PASSED, "2 tables", kind=CheckKind.DATA),
                CheckResult("data:orders", CheckStatus.PASSED, "1 expectation met", kind=CheckKind.DATA)]

    outcome = PostgresEngine(Settings()).restore_and_check(demo_plan, target, Evidence(tmp_path / "evidence"),
                                                           data_checks=data_checks)
    statements = [argv[-1] for argv in target.sent if argv[0] == "psql"]
    assert statements[-3:] == [f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'
                               for name in ("archive", "template0", "tmpl_orders")]
    last_alter = max(i for i, argv in enumerate(target.sent) if argv[-1].startswith("ALTER DATABASE"))
    assert last_alter < [argv[0] for argv in target.sent].index("pg_amcheck")
    (access,) = seen
    assert access.databases == ("archive", "postgres")  # the templates left out
    # The main database among those the source's applications reached: archive was closed there.
    assert access.main_database == "postgres"
    checks = {c.name: c for c in outcome.checks}
    expected = {"databases_checked": ["archive", "postgres"],
                "databases_existing": ["archive", "postgres", "template0", "template1", "tmpl_orders"],
                "databases_not_checked": {name: TEMPLATE_LEFT_OUT for name in ("template0", "template1", "tmpl_orders")}}
    assert checks["data_baseline"].details == expected
    assert checks["data:orders"].details == {}  # a suite names its own database
    (phase,) = [p for p in outcome.phases if p.name == "data_checks"]
    assert {key: phase.details[key] for key in expected} == expected and phase.details["databases"] == 2
    assert checks["pg_amcheck"].summary.endswith(" in 5 of 5 databases: no corruption")
    verdict, reasons = decide(demo_plan, outcome)
    assert verdict is Verdict.PASSED, reasons


def test_the_main_database_is_the_one_other_than_postgres_the_applications_reached(demo_plan: RestorePlan,
                                                                                   tmp_path: Path) -> None:
    listing = fixture_text("pg_database-mixed.json")  # app, frozen (closed), we|ird.na me beside postgres
    target = ByStatement(psql=(0, listing.replace('"we|ird.na me", "connections" : true',
                                                   '"we|ird.na me", "connections" : false')))
    target.exchange = ("/run/restoreproof", str(tmp_path / "exchange"))
    seen: list[DataAccess] = []
    PostgresEngine(Settings()).restore_and_check(demo_plan, target, Evidence(tmp_path / "evidence"),
                                                 data_checks=lambda access, evidence: seen.append(access) or [])
    (access,) = seen
    assert access.databases == ("app", "frozen", "postgres", "we|ird.na me")
    assert access.main_database == "app"


@pytest.mark.parametrize(("psql", "said"), [
    ((2, 'psql: error: connection to server on socket "/s/.s.PGSQL.5432" failed: FATAL:  database "template1" '
         'does not exist'),
     'cannot list the restored server\'s databases: psql: error: connection to server on socket "/s/.s.PGSQL.5432" '
     'failed: FATAL:  database "template1" does not exist'),
    ((2, ""), "cannot list the restored server's databases: exited 2"),
    ((0, "postgres\nshop\n"), "cannot read the restored server's list of databases (pg_database): not the JSON list "
                              "asked for: 'postgres\\nshop'"),
])
def test_a_cluster_whose_databases_cannot_be_listed_is_never_passed(demo_plan: RestorePlan, tmp_path: Path,
                                                                    psql: tuple[int, str], said: str) -> None:
    target = RecordedTarget(psql=psql)
    target.exchange = ("/run/restoreproof", str(tmp_path / "exchange"))
    ran: list[DataAccess] = []
    outcome = PostgresEngine(Settings()).restore_and_check(demo_plan, target, Evidence(tmp_path / "evidence"),
                                                           data_checks=lambda access, evidence: ran.append(access) or [])
    assert ran == []
    statements = [argv[-1] for argv in target.sent if argv[0] == "psql"]
    assert not any(sql.startswith("ALTER DATABASE") for sql in statements)  # nothing opened
    assert sum(sql.startswith("select coalesce(json_agg(") for sql in statements) == 1
    (phase,) = [p for p in outcome.phases if p.name == "data_checks"]
    assert phase.details["why"] == "the restored server's databases could not be listed"
    verdict, reasons = decide(demo_plan, outcome)
    assert verdict is Verdict.ERROR
    # (Every psql of this recorded target answers alike: the settings' read-back before it says so too.)
    assert said in reasons
    assert ("pg_amcheck error: pg_amcheck checked 3 databases, but the restored server's list of databases could not "
            "be read: none is known not to be left out") in reasons


def test_a_database_the_server_would_not_open_is_named_and_the_verdict_is_an_error(demo_plan: RestorePlan,
                                                                                  tmp_path: Path) -> None:
    refused = "ERROR:  permission denied to change allow_connections"
    # pg_amcheck as it runs when template0 stays closed (postgres and template1 only).
    target = ByStatement({"template0": (1, refused)}, pg_amcheck=(0, fixture_text("pg_amcheck-clean.out")))
    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, target)
    (check,) = [c for c in outcome.checks if c.name == "pg_amcheck"]
    why = f"it refuses connections (pg_database.datallowconn = false) and restoreproof could not allow them: {refused}"
    assert check.status is CheckStatus.ERROR
    assert check.details["databases_not_checked"] == {"template0": why}
    assert check.details["connections_allowed_by_restoreproof"] == []
    assert verdict is Verdict.ERROR
    assert reasons[0] == ("pg_amcheck error: pg_amcheck checked 2 of 3 databases; not checked: template0: "
                          f"database template0 not checked: {why}")


# -- the restored server's settings (engines/postgres/settings.py) ---------------------------------------


def test_a_forced_setting_not_in_effect_is_an_error_naming_it(demo_plan: RestorePlan, tmp_path: Path) -> None:
    target = RecordedTarget(**{"psql settings-in-effect": (0, settings_capture("effect-unforced.json"))})
    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, target)
    assert verdict is Verdict.ERROR
    assert ("the setting ignore_checksum_failure is 'on' (from configuration file) in the restored server, not 'off' "
            "as restoreproof forced it (would hide damaged pages from redo and the checks)") in reasons
    assert outcome.online is True  # the checks still ran: a corruption they find is still said


@pytest.mark.parametrize(("answer", "said"), [
    ((0, "15\n# Do not edit this file manually!\n"), "cannot configure the restored server: pgbackrest restore wrote "
                                                     "no recovery settings into postgresql.auto.conf"),
    ((0, "\n"), "cannot configure the restored server: its PG_VERSION reads ''"),
    ((1, "cat: /var/lib/restoreproof/data/PG_VERSION: No such file or directory"),
     "cannot configure the restored server: cat: /var/lib/restoreproof/data/PG_VERSION: No such file or directory"),
])
def test_a_restore_whose_settings_cannot_be_forced_never_starts(demo_plan: RestorePlan, tmp_path: Path,
                                                                answer: tuple[int, str], said: str) -> None:
    target = RecordedTarget(**{"bash configure": answer})
    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, target)
    assert verdict is Verdict.ERROR and reasons[0].startswith(said), reasons
    assert not any(argv[0] == "pg_ctl" for argv in target.sent) and outcome.online is False


def test_server_options_cannot_weaken_a_forced_setting(demo_plan: RestorePlan, tmp_path: Path) -> None:
    target = RecordedTarget()
    _, (verdict, reasons) = verify(demo_plan, tmp_path, target,
                                   lambda s: s.postgres.server_options.update({"ignore_checksum_failure": "on"}))
    assert verdict is Verdict.ERROR
    assert reasons[0] == ("cannot configure the restored server: postgres.server_options sets ignore_checksum_failure "
                          "= 'on', which restoreproof forces to 'off' (would hide damaged pages from redo and the "
                          "checks): remove it from postgres.server_options")
    assert not any(argv[0] == "pg_ctl" for argv in target.sent)


def test_server_options_go_on_the_command_line_after_the_forced_settings(demo_plan: RestorePlan,
                                                                          tmp_path: Path) -> None:
    target = RecordedTarget()
    _, (verdict, _) = verify(demo_plan, tmp_path, target, lambda s: s.postgres.server_options.update(
        {"shared_buffers": "64MB"}))
    (start,) = [argv for argv in target.sent if argv[:2] == ["pg_ctl", "start"]]
    assert shlex.split(start[start.index("-o") + 1])[-2:] == ["-c", "shared_buffers=64MB"]
    assert verdict is Verdict.PASSED
    # The wait for the end of recovery connects with the forced client options too.
    (wait,) = [env for argv, env in zip(target.sent, target.env, strict=True) if argv[3:4] == ["wait"]]
    assert "-c default_transaction_read_only=off" in wait["PGOPTIONS"]


def test_the_timeline_the_plan_chose_is_told_to_pgbackrest(demo_plan: RestorePlan, tmp_path: Path) -> None:
    target = RecordedTarget()
    demo_plan.target_timeline = 1
    verify(demo_plan, tmp_path, target)
    (restore,) = [argv for argv in target.sent if argv[0] == "pgbackrest" and argv[-1] == "restore"]
    assert "--target-timeline=1" in restore
    assert not any(arg.startswith("--type=") for arg in restore)


def test_no_timeline_chosen_leaves_postgresql_s_default(demo_plan: RestorePlan, tmp_path: Path) -> None:
    target = RecordedTarget()
    verify(demo_plan, tmp_path, target)
    (restore,) = [argv for argv in target.sent if argv[0] == "pgbackrest" and argv[-1] == "restore"]
    assert not any(arg.startswith("--target-timeline") for arg in restore)


# A quiet archive: the first start (to a point) refused for want of a transaction after it, then the
# start on to the archive's end, both as PostgreSQL 15.18 logged them for a stanza of two fulls and
# nothing written after the first (tests/integration/test_backup_kinds.py).
QUIET_POINT = datetime(2026, 11, 28, 12, 38, 12, tzinfo=UTC)
QUIET_WAL = WalRange(1, "000000010000000000000002", "000000010000000000000005", 4, "the end of the archive")
# Its end read as the proof reads it (pg_waldump of the last two segments): the XLOG SWITCH at redo done.
QUIET_WAL_END_READ = FLOW_WAL_END_READ.replace("00000001000000000000000C", "000000010000000000000004").replace(
    "00000001000000000000000D", "000000010000000000000005").replace("0/0DCB9AB0", "0/05000090")
POINT_AUTO_CONF = ("15\n" + settings_capture("pgbackrest-auto-conf-alter-system.conf")
                   + "recovery_target_time = '2026-11-28 12:38:12.000000+00'\nrecovery_target_action = 'promote'\n")


class QuietTarget(RecordedTarget):
    """The first start refused at the point, the second (on to the archive's end) online."""

    def __init__(self) -> None:
        super().__init__(**{"bash configure": (0, POINT_AUTO_CONF), "wal-end-read": (0, QUIET_WAL_END_READ)})
        self.starts = [(1, PG_CTL_FAILED), (0, "waiting for server to start.... done\nserver started\n")]
        self.logs = {f"{self.work_dir}/server.log": fixture_text("server-recovery-no-transaction-after-target.log"),
                     f"{self.work_dir}/server-to-end.log": fixture_text("server-recovery-continued-to-end.log")}

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        if argv[:2] == ["pg_ctl", "start"]:
            self.answers["pg_ctl start"] = self.starts.pop(0)
        return super().run(argv, timeout=timeout, env=env)

    def read_text(self, path: str) -> str:
        return self.logs[path]


def quiet_plan(plan: RestorePlan, chosen: bool = True, newest_end: datetime | None = None) -> RestorePlan:
    backup = plan.target_backup
    assert backup is not None
    point = ChosenPoint("random", backup.label, newest_end or QUIET_POINT + timedelta(seconds=2), QUIET_WAL)
    return replace(plan, stop_at=QUIET_POINT, chosen_point=point if chosen else None)


def test_a_chosen_point_with_no_transaction_after_it_is_proven_as_the_archive_s_end(demo_plan: RestorePlan,
                                                                                   tmp_path: Path) -> None:
    target = QuietTarget()
    plan = quiet_plan(demo_plan)
    outcome, (verdict, reasons) = verify(plan, tmp_path, target)
    assert verdict is Verdict.PASSED, reasons
    said = ('random: 2026-11-28T12:38:12+00:00; the archive holds no transaction after 2026-11-28T12:38:12+00:00 '
            '(server: "recovery ended before configured recovery target was reached"), so the state at '
            "2026-11-28T12:38:12+00:00 is the archive's end: recovery continued to the end and is proven as latest")
    assert reasons[3:6] == [
        said,
        "server log: redo done at 0/5000090 (in segment 000000010000000000000005), the plan's last segment is "
        "000000010000000000000005; all 4 planned segments 000000010000000000000002 to 000000010000000000000005 "
        "restored from the archive; no line ending recovery early",
        "WAL read with pg_waldump from 000000010000000000000004, 000000010000000000000005 (pgbackrest archive-get): "
        "its last record is XLOG SWITCH at 0/5000090, and redo done at 0/5000090 is that record; the WAL ends with "
        "an XLOG SWITCH: the rest of the segment is padding and the archive holds no later segment on this timeline"]
    assert outcome.achieved == QUIET_POINT and outcome.achieved_detail == (
        f"{said} (no transaction replayed after the backup's start: its time is the point's)")
    # The second start on the same data (no second restore), with pgBackRest's recovery for latest.
    sent = [" ".join(argv[:2]) if argv[0] != "pgbackrest" else f"pgbackrest {argv[-1]}" for argv in target.sent]
    assert sent.count("pgbackrest restore") == 1 and sent.count("pg_ctl start") == 2
    first, second = [shlex.split(argv[argv.index("-o") + 1]) for argv in target.sent if argv[:2] == ["pg_ctl", "start"]]
    assert "recovery_target_time=2026-11-28 12:38:12.000000+00" in first
    assert "recovery_target_time=" in second and "recovery_target_action=pause" in second
    assert [argv[argv.index("-l") + 1] for argv in target.sent if argv[:2] == ["pg_ctl", "start"]] == [
        "/var/lib/restoreproof/server.log", "/var/lib/restoreproof/server-to-end.log"]
    written = target.files["/var/lib/restoreproof/data/postgresql.auto.conf"]
    assert "\n# recovery_target_time = '2026-11-28 12:38:12.000000+00' # removed by restoreproof" in written
    assert "\nrestore_command = " in written
    # Both starts count: the phases add up to the first start's 'starting' to the second's 'ready'.
    phases = {p.name: p for p in outcome.phases}
    assert phases["server_start"].seconds == pytest.approx(0.757 + 0.552 + 0.131)
    assert phases["server_start"].details["starts_seconds"] == pytest.approx([0.757, 0.131])
    assert phases["redo"].seconds == pytest.approx(0.231 + 0.4)
    assert sum(phases[name].seconds or 0 for name in ("server_start", "redo", "recovery_end")) == pytest.approx(
        36.573 - 34.153)
    assert {"server.log", "server-to-end.log"} <= {p.name for p in (tmp_path / "evidence").iterdir()}


def test_a_point_asked_for_with_no_transaction_after_it_stays_an_error(demo_plan: RestorePlan,
                                                                        tmp_path: Path) -> None:
    target = QuietTarget()
    _, (verdict, reasons) = verify(quiet_plan(demo_plan, chosen=False), tmp_path, target)
    assert verdict is Verdict.ERROR
    assert reasons[0].startswith("the archive holds no transaction after 2026-11-28T12:38:12+00:00: PostgreSQL "
                                 "replayed all the WAL it could get"), reasons
    assert "restoreproof chose" not in reasons[0]
    assert [argv[:2] for argv in target.sent].count(["pg_ctl", "start"]) == 1 and not target.files


def test_a_chosen_point_after_the_newest_backup_s_end_stays_an_error(demo_plan: RestorePlan, tmp_path: Path) -> None:
    target = QuietTarget()
    newest = QUIET_POINT - timedelta(minutes=1)
    _, (verdict, reasons) = verify(quiet_plan(demo_plan, newest_end=newest), tmp_path, target)
    assert verdict is Verdict.ERROR
    assert reasons[0].startswith("the archive holds no transaction after 2026-11-28T12:38:12+00:00"), reasons
    assert reasons[0].endswith(
        "; restoreproof chose this point, but cannot prove it as the archive's end: 2026-11-28T12:38:12+00:00 is after "
        f"the newest backup's end ({INCR}, 2026-11-28T12:37:12+00:00): the archive is not shown to cover it, and a "
        "transaction after it may never have been archived")
    assert [argv[:2] for argv in target.sent].count(["pg_ctl", "start"]) == 1 and not target.files


def test_a_transaction_after_the_chosen_point_in_the_continued_recovery_fails_it(demo_plan: RestorePlan,
                                                                                tmp_path: Path) -> None:
    target = QuietTarget()
    log = f"{target.work_dir}/server-to-end.log"
    # The server said no transaction follows the point, then replayed one after it: its words disagree.
    target.logs[log] = target.logs[log].replace(
        "elapsed: 0.39 s\n", "elapsed: 0.39 s\n2026-11-28 12:38:36.224 UTC [155] LOG:  last completed transaction was "
                             "at log time 2026-11-28 12:38:20.5+00\n")
    _, (verdict, reasons) = verify(quiet_plan(demo_plan), tmp_path, target)
    assert verdict is Verdict.FAILED
    assert reasons[0] == ("recovery went past the target: last transaction 2026-11-28T12:38:20.500000+00:00 is after "
                          "2026-11-28T12:38:12+00:00"), reasons


def test_the_restored_pg_controls_prepared_transactions_and_locks_are_given_to_the_server(
        demo_plan: RestorePlan, tmp_path: Path) -> None:
    from verification.engines.postgres.control import FILES_MARK, MARK

    control = (Path(__file__).parents[3] / "fixtures" / "postgres" / "pg_controldata-15.out").read_text()
    auto_conf = settings_capture("pgbackrest-auto-conf-alter-system.conf")
    # The files (Debian's layout: none in the backup) give PostgreSQL's defaults.
    files = "max_prepared_transactions=0\nmax_locks_per_transaction=64\n"
    target = RecordedTarget(**{"bash configure": (0, f"15\n{auto_conf}\n{MARK}\n{control}\n{FILES_MARK}\n{files}")})
    verify(demo_plan, tmp_path, target)
    (configured,) = [argv for argv in target.sent if argv[:2] == ["bash", "-c"] and argv[3] == "configure"]
    assert f"printf '\\n%s\\n' '{MARK}'; pg_controldata /var/lib/restoreproof/data || true; " in configured[2]
    assert configured[2].endswith(
        f"printf '\\n%s\\n' '{FILES_MARK}'; for n in max_prepared_transactions max_locks_per_transaction; do "
        'printf "%s=%s\\n" "$n" "$(postgres -D /var/lib/restoreproof/data -C "$n" 2>/dev/null)"; done')
    (start,) = [argv for argv in target.sent if argv[:2] == ["pg_ctl", "start"]]
    options = shlex.split(start[start.index("-o") + 1])
    assert "max_prepared_transactions=5" in options and "max_locks_per_transaction=128" in options
    # pgBackRest's recovery settings are read as before: the marks, pg_control and the files are none of them.
    assert any(o.startswith("restore_command=pgbackrest ") for o in options)
    assert not any(o.startswith(("pg_control", "Database cluster", "#restoreproof")) for o in options)


def test_files_giving_as_much_as_pg_control_are_left_to_give_it(demo_plan: RestorePlan, tmp_path: Path) -> None:
    from verification.engines.postgres.control import FILES_MARK, MARK

    control = (Path(__file__).parents[3] / "fixtures" / "postgres" / "pg_controldata-15.out").read_text()
    auto_conf = settings_capture("pgbackrest-auto-conf-alter-system.conf")
    files = "max_prepared_transactions=20\nmax_locks_per_transaction=128\n"
    target = RecordedTarget(**{"bash configure": (0, f"15\n{auto_conf}\n{MARK}\n{control}\n{FILES_MARK}\n{files}")})
    verify(demo_plan, tmp_path, target)
    (start,) = [argv for argv in target.sent if argv[:2] == ["pg_ctl", "start"]]
    assert "max_prepared_transactions" not in start[start.index("-o") + 1]
    assert "max_locks_per_transaction" not in start[start.index("-o") + 1]


def test_databases_refusing_connections_for_their_locale_are_an_error_naming_it(demo_plan: RestorePlan,
                                                                                tmp_path: Path) -> None:
    said = ('psql: error: connection to server on socket "/tmp/.s.PGSQL.5432" failed: FATAL:  database locale is '
            'incompatible with operating system\nDETAIL:  The database was initialized with LC_COLLATE "xx_XX.UTF-8",'
            "  which is not recognized by setlocale().\n")
    target = RecordedTarget(bash=(4, said))
    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, target)
    assert verdict is Verdict.ERROR and outcome.failures == []
    assert reasons[0].startswith("the restored server recovered, but its databases (template1, postgres) refuse "
                                 "connections: they were made under a locale the target image does not have (psql: "
                                 "error: connection to server"), reasons
    assert 'LC_COLLATE "xx_XX.UTF-8",  which is not recognized by setlocale().' in reasons[0]


def test_verify_is_given_only_the_options_the_targets_pgbackrest_has(demo_plan: RestorePlan, tmp_path: Path) -> None:
    # pgBackRest 2.33 (bullseye's) has neither --output nor --verbose for verify, and refuses both.
    target = RecordedTarget(**{"pgbackrest version": (0, "pgBackRest 2.33\n")})
    verify(demo_plan, tmp_path, target)
    (argv,) = [argv for argv in target.sent if argv[-1] == "verify"]
    assert "--log-level-console=info" in argv and not {"--output=text", "--verbose"} & set(argv)
    target = RecordedTarget()
    verify(demo_plan, tmp_path / "2.45", target)
    (argv,) = [argv for argv in target.sent if argv[-1] == "verify"]
    assert argv[-3:] == ["--output=text", "--verbose", "verify"]


def test_a_pgbackrest_whose_verify_is_not_read_here_is_not_run_and_is_an_error(demo_plan: RestorePlan,
                                                                                 tmp_path: Path) -> None:
    target = RecordedTarget(**{"pgbackrest version": (0, "pgBackRest 2.99\n")})
    outcome, (verdict, _) = verify(demo_plan, tmp_path, target)
    assert verdict is Verdict.ERROR
    assert not [argv for argv in target.sent if argv[-1] == "verify"]
    (check,) = [c for c in outcome.checks if c.name == "pgbackrest_verify"]
    assert check.status is CheckStatus.ERROR
    assert check.summary.startswith("pgbackrest verify not run: the target has pgBackRest 2.99; restoreproof reads")


MAJORS = FIXTURES / "majors"
MAJOR_EXIT_CODES = dict(line.split() for line in (MAJORS / "exit-codes.txt").read_text().splitlines())


class Pg13Target(RecordedTarget):
    """The recorded run, its restored data a PostgreSQL 13 cluster: amcheck's SQL functions answer each
    database with what they printed in the 13 image (tests/fixtures/postgres/majors)."""

    def __init__(self, **replace: tuple[int, str]) -> None:
        super().__init__(**{"bash configure": (0, "13\n" + settings_capture("pgbackrest-auto-conf-alter-system.conf")),
                            "psql": (0, (MAJORS / "pg13-pg_database.json").read_text()), **replace})

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> ExecResult:
        if argv[:2] != ["bash", "-c"] or argv[3:4] != ["amcheck"]:
            return super().run(argv, timeout=timeout, env=env)
        self.sent.append(argv)
        self.env.append(env or {})
        stem = f"pg13-amcheck-clean-{argv[-1]}"
        return ExecResult(argv, int(MAJOR_EXIT_CODES[stem]), (MAJORS / f"{stem}.stdout").read_text(),
                          (MAJORS / f"{stem}.stderr").read_text(), 0.1)


def test_on_13_every_database_s_btree_indexes_are_checked_with_amcheck_s_functions_not_pg_amcheck(
        demo_plan: RestorePlan, tmp_path: Path) -> None:
    target = Pg13Target()
    outcome, (verdict, reasons) = verify(demo_plan, tmp_path, target)
    assert verdict is Verdict.PASSED, reasons
    assert "pg_amcheck" not in [argv[0] for argv in target.sent]  # 13 has no such program
    runs = [argv for argv in target.sent if argv[3:4] == ["amcheck"]]
    databases = ["app", "postgres", "shop", "template0", "template1"]
    assert [argv[-1] for argv in runs] == databases
    assert runs[0][:3] == ["bash", "-c", 'psql "$@" <<<"$RESTOREPROOF_AMCHECK_SQL"']
    assert all(env == {"RESTOREPROOF_AMCHECK_SQL": SCRIPT} for argv, env in zip(target.sent, target.env, strict=True)
               if argv[3:4] == ["amcheck"])
    (check,) = [c for c in outcome.checks if c.name == "amcheck"]
    assert check.status is CheckStatus.PASSED and check.details["databases_checked"] == databases
    assert check.summary.startswith("PostgreSQL 13: ")
    assert check.details["heap_pages"] == "every page's checksum read by pg_checksums: passed"
    assert f"amcheck: {check.summary}" in reasons
    said = (tmp_path / check.evidence).read_text()
    assert [line for line in said.splitlines() if line.startswith("== database ")] == [
        f"== database {name}: exit 0" for name in databases]
    (phase,) = [p for p in outcome.phases if p.name == "integrity_check"]
    assert "pg_amcheck_seconds" not in phase.details and phase.details["amcheck_functions_seconds"] >= 0
