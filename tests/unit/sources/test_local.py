"""A local folder of backups: every name read from a repository file stays inside it."""

import os
from pathlib import Path

import pytest

from verification.errors import SourceError
from verification.sources import LocalSource


@pytest.fixture()
def source(tmp_path: Path) -> LocalSource:
    (tmp_path / "repo" / "backup").mkdir(parents=True)
    (tmp_path / "repo" / "backup" / "backup.info").write_bytes(b"0123456789")
    (tmp_path / "secret.txt").write_text("not a backup")
    os.symlink(tmp_path / "secret.txt", tmp_path / "repo" / "backup" / "link-out")
    return LocalSource(tmp_path / "repo")


@pytest.mark.parametrize("name", ["../secret.txt", "backup/../../secret.txt", "/etc/passwd", "backup/link-out"])
def test_a_name_leading_out_of_the_source_is_refused_naming_it(source: LocalSource, name: str) -> None:
    for read in (source.exists, source.is_dir, source.list_dir, source.read_bytes, source.size, source.open_binary):
        with pytest.raises(SourceError, match=rf"^path {name!r} leaves the source {source.root}$"):
            read(name)


def test_names_inside_the_source_are_read(source: LocalSource) -> None:
    assert source.list_dir("") == ["backup"] and source.list_dir("backup") == ["backup.info", "link-out"]
    assert source.read_bytes("backup/backup.info", 2, 3) == b"234"
    assert source.read_bytes("backup/./backup.info") == b"0123456789"
    assert source.size("backup/backup.info") == 10 and source.is_dir("backup") and source.exists("")
    assert source.list_dir("missing") == [] and source.modified("missing") is None


def test_a_missing_file_and_a_missing_source_are_named(source: LocalSource, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"backup/gone does not exist$"):
        source.read_bytes("backup/gone")
    with pytest.raises(SourceError, match=r"backup/gone does not exist$"):
        source.open_binary("backup/gone")
    with pytest.raises(SourceError, match=rf"^source {tmp_path / 'nowhere'} does not exist$"):
        LocalSource(tmp_path / "nowhere")
    with pytest.raises(SourceError, match=r"secret.txt is not a folder$"):
        LocalSource(tmp_path / "secret.txt")
