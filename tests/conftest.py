"""Shared fixtures: real outputs captured from PostgreSQL 15.18 and pgBackRest 2.45 (tests/fixtures)."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures" / "postgres"
STANZA = "demo1"
LABELS = ["20261122-195034F", "20261122-195034F_20261122-195039D", "20261122-195034F_20261122-195042I"]


_STATE_HOMES = itertools.count()


@pytest.fixture(autouse=True)
def _own_state_folder(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test's default state folder (results store, SQL Server header cache) is its own, made
    only if used: never the user's, and nothing one test kept is found by another."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.getbasetemp() / "state-homes" / str(next(_STATE_HOMES))))
    # Nor the user's or the system's configuration file (settings_env.py): none, unless a test makes one.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "no-config-home"))
    monkeypatch.setenv("RESTOREPROOF_SYSTEM_CONFIG", str(tmp_path_factory.getbasetemp() / "no-system-config.yaml"))


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def write_manifest(folder: Path, label: str) -> Path:
    """A small backup.manifest for the backup `label`, as pgBackRest lays one out (format 5, signed with
    its checksum), so planning loads it as pgBackRest would; the captured repository kept no manifests.
    The checksum is restoreproof's own (engines/postgres/manifest.py), which tests/unit/engines/postgres/
    test_manifest.py holds to the manifests real pgBackRest writes."""
    from verification.engines.postgres.manifest import info_checksum, info_values

    text = (f'[backrest]\nbackrest-format=5\nbackrest-version="2.45"\n\n[backup]\nbackup-label="{label}"\n\n'
            '[target:file]\npg_data/PG_VERSION={"checksum":"587b596f04f7db9c2cad3d6b87dd2b3a05de4f35","size":3}\n')
    text += f'\n[backrest]\nbackrest-checksum="{info_checksum(info_values(text))}"\n'
    path = folder / "backup.manifest"
    path.write_text(text)
    return path


@pytest.fixture
def captured_repo(tmp_path: Path) -> Path:
    """A repository laid out as pgBackRest wrote it: the real backup.info and archive.info, a
    manifest per backup, and one (empty) file per archived WAL segment, named as in the real archive."""
    repo = tmp_path / "repo"
    backup = repo / "backup" / STANZA
    backup.mkdir(parents=True)
    shutil.copy(FIXTURES / "backup.info", backup / "backup.info")
    shutil.copy(FIXTURES / "backup.info", backup / "backup.info.copy")
    for label in LABELS:
        (backup / label).mkdir()
        write_manifest(backup / label, label)
    archive = repo / "archive" / STANZA
    segments = archive / "15-1" / "0000000100000000"
    segments.mkdir(parents=True)
    shutil.copy(FIXTURES / "archive.info", archive / "archive.info")
    for name in fixture_text("archive-listing.txt").split():
        (segments / name).write_bytes(b"")
    return repo


# Real SQL Server backups (2008 R2, 2016) live beside the project, never inside it.
# Found by walking up, so the tests find it from a copy of the project too (mutation testing runs
# them from ./mutants).
MSSQL_CORPUS = next((parent / "shared" / "testdata" / "mssql-backups" for parent in Path(__file__).resolve().parents
                     if (parent / "shared" / "testdata" / "mssql-backups").is_dir()),
                    Path(__file__).resolve().parents[2] / "shared" / "testdata" / "mssql-backups")


@pytest.fixture(scope="session")
def mssql_corpus() -> Path:
    if not (MSSQL_CORPUS / "MANIFEST.tsv").exists():
        pytest.skip(f"the SQL Server backup corpus is not at {MSSQL_CORPUS} (it ships in ../shared/testdata)")
    return MSSQL_CORPUS


# Three COPY_ONLY fulls from outside the lab (SQL Server 2016 SP1, 4096-byte soft filemark blocks).
MSSQL_REAL_WORLD = next((parent / "shared" / "testdata" / "mssql-real-world" for parent in Path(__file__).resolve().parents
                         if (parent / "shared" / "testdata" / "mssql-real-world").is_dir()),
                        Path(__file__).resolve().parents[2] / "shared" / "testdata" / "mssql-real-world")


@pytest.fixture(scope="session")
def mssql_real_world() -> Path:
    if not (MSSQL_REAL_WORLD / "MANIFEST.tsv").exists():
        pytest.skip(f"the real-world SQL Server backups are not at {MSSQL_REAL_WORLD} (they ship in ../shared/testdata)")
    return MSSQL_REAL_WORLD


@pytest.fixture
def mssql_copy(mssql_corpus: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """Copy part of the corpus into a writable temporary folder: copy(rel, ...) -> the copy's root."""
    root = tmp_path / "mssql"

    def copy(*relative: str) -> Path:
        for rel in relative:
            source = mssql_corpus / rel
            target = root / rel
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, target)
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        return root

    return copy


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The sample pgBackRest repository (two real clusters), made once per session for the
    integration and fault tests."""
    from tests.integration.conftest import leftovers
    from verification.demo.source import make_demo

    # RESTOREPROOF_TEST_DEMO: a folder to keep it in between sessions (a matching one is reused), for
    # running a few tests again and again by hand; CI makes it anew.
    kept = os.environ.get("RESTOREPROOF_TEST_DEMO")
    result = make_demo(Path(kept) if kept else tmp_path_factory.mktemp("demo"), scale=1, clusters=2)
    assert result.reused or leftovers(result.run_id) == [], "making the demo left containers behind"
    return result
