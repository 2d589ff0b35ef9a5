"""Real pgBackRest repositories, one encrypted and one plain, each made once per session by this host's
pgBackRest 2.45 and PostgreSQL 15 (`make setup` installs both): the cipher and manifest tests read files
pgBackRest wrote, not ours."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN_DIR = Path("/usr/lib/postgresql/15/bin")
PASSPHRASE = "Unit-Cipher-Pass-4f9e2a"
STANZA = "crypt1"
PLAIN_STANZA = "plain1"
# A timeline history file, pushed into the archive by pgBackRest's own archive-push (it encrypts it); the
# switch is after the backups' WAL, so the newest backup's chain is complete.
HISTORY = "1\t0/9000000\tno recovery target specified\n"

MAKE = r"""
set -euo pipefail
work=$1
export PGBACKREST_REPO1_PATH=$work/repo PGBACKREST_REPO1_CIPHER_TYPE=$CIPHER PGBACKREST_PG1_PATH=$work/data \
  PGBACKREST_PG1_SOCKET_PATH=$work PGBACKREST_LOG_PATH=$work PGBACKREST_LOCK_PATH=$work PGBACKREST_LOG_LEVEL_FILE=off \
  PGBACKREST_LOG_LEVEL_CONSOLE=error PGBACKREST_START_FAST=y PGBACKREST_STANZA=$STANZA PGBACKREST_REPO1_RETENTION_FULL=9
"$BIN/initdb" -k -A trust -U postgres -D "$work/data" >/dev/null
printf "%s\n" "archive_mode = on" "archive_command = 'pgbackrest archive-push %p'" "listen_addresses = ''" \
  "unix_socket_directories = '$work'" >> "$work/data/postgresql.conf"
"$BIN/pg_ctl" start -w -D "$work/data" -l "$work/server.log" >/dev/null
trap '"$BIN/pg_ctl" stop -w -m immediate -D "$work/data" >/dev/null 2>&1 || true' EXIT
pgbackrest stanza-create
pgbackrest backup --type=full
"$BIN/psql" -X -q -h "$work" -d postgres -c "create table t as select generate_series(1, 1000) as n"
pgbackrest backup --type=incr
pgbackrest check
printf %s "$HISTORY" > "$work/data/pg_wal/00000002.history"
pgbackrest archive-push "$work/data/pg_wal/00000002.history"
"""


@dataclass(frozen=True)
class EncryptedRepo:
    path: Path
    passphrase: str
    stanza: str

    def backup_labels(self) -> list[str]:
        folder = self.path / "backup" / self.stanza
        return sorted(p.name for p in folder.iterdir() if re.fullmatch(r"\d{8}-\d{6}F(_\d{8}-\d{6}[DI])?", p.name))


def _made_repository(stanza: str, passphrase: str | None) -> Iterator[Path]:
    """A repository made by pgBackRest: encrypted with `passphrase`, or plain without one."""
    if shutil.which("pgbackrest") is None or not (BIN_DIR / "initdb").exists():
        pytest.skip("pgBackRest and PostgreSQL 15 are not installed on this host (make setup installs them)")
    # Not under pytest's own (root-only) folder: the postgres OS user must reach it.
    work = Path(tempfile.mkdtemp(prefix="restoreproof-test-crypt-"))
    try:
        as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if as_postgres:
            shutil.chown(work, "postgres", "postgres")
        cipher = {"CIPHER": "aes-256-cbc", "PGBACKREST_REPO1_CIPHER_PASS": passphrase} if passphrase else {"CIPHER": "none"}
        made = subprocess.run([*as_postgres, "bash", "-c", MAKE, "make", str(work)], capture_output=True, text=True,
                              timeout=300, check=False,
                              env={"PATH": os.environ["PATH"], "BIN": str(BIN_DIR), "STANZA": stanza,
                                   "HISTORY": HISTORY, **cipher})
        assert made.returncode == 0, made.stdout + made.stderr
        yield work / "repo"
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def encrypted_repo() -> Iterator[EncryptedRepo]:
    for path in _made_repository(STANZA, PASSPHRASE):
        yield EncryptedRepo(path, PASSPHRASE, STANZA)


@pytest.fixture(scope="session")
def plain_repo() -> Iterator[EncryptedRepo]:
    """The same, not encrypted (repo1-cipher-type none): its `passphrase` is empty."""
    for path in _made_repository(PLAIN_STANZA, None):
        yield EncryptedRepo(path, "", PLAIN_STANZA)


def _private_copy(repo: EncryptedRepo, tmp_path: Path) -> EncryptedRepo:
    copy = tmp_path / f"repo-{repo.stanza}"  # a test may damage both kinds
    shutil.copytree(repo.path, copy, symlinks=True)
    return EncryptedRepo(copy, repo.passphrase, repo.stanza)


@pytest.fixture
def encrypted_copy(encrypted_repo: EncryptedRepo, tmp_path: Path) -> EncryptedRepo:
    """A private copy, for tests that damage it."""
    return _private_copy(encrypted_repo, tmp_path)


@pytest.fixture
def plain_copy(plain_repo: EncryptedRepo, tmp_path: Path) -> EncryptedRepo:
    return _private_copy(plain_repo, tmp_path)
