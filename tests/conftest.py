"""Shared fixtures: real outputs captured from PostgreSQL 15.18 and pgBackRest 2.45 (tests/fixtures)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "postgres"
STANZA = "demo1"
LABELS = ["20261122-195034F", "20261122-195034F_20261122-195039D", "20261122-195034F_20261122-195042I"]


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


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
        (backup / label / "backup.manifest").write_text("[backrest]\n")
    archive = repo / "archive" / STANZA
    segments = archive / "15-1" / "0000000100000000"
    segments.mkdir(parents=True)
    shutil.copy(FIXTURES / "archive.info", archive / "archive.info")
    for name in fixture_text("archive-listing.txt").split():
        (segments / name).write_bytes(b"")
    return repo
