"""Discovery of a pgBackRest repository from its own files, checked against `pgbackrest info --output=json`
captured from the same repository."""

import json
from datetime import UTC, datetime

import pytest

from tests.conftest import FIXTURES, LABELS
from verification.engines.postgres.repository import discover, find_stanzas
from verification.engines.postgres.wal import parse_segment
from verification.errors import SourceError
from verification.model import BackupType
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024


def test_backups_match_what_pgbackrest_info_reports(captured_repo):
    (stanza,) = discover(LocalSource(captured_repo), MB16)
    info = json.loads((FIXTURES / "pgbackrest-info.json").read_text())[0]
    assert stanza.name == info["name"] == "demo1"
    assert stanza.db_version == "15"
    assert stanza.system_id == info["db"][0]["system-id"]
    assert [b.label for b in stanza.backups] == [b["label"] for b in info["backup"]] == LABELS
    for mine, theirs in zip(stanza.backups, info["backup"], strict=True):
        assert str(mine.type) == theirs["type"]
        assert mine.start == datetime.fromtimestamp(theirs["timestamp"]["start"], UTC)
        assert mine.finish == datetime.fromtimestamp(theirs["timestamp"]["stop"], UTC)
        assert mine.size_bytes == theirs["info"]["size"]
        assert mine.repo_size_bytes == theirs["info"]["repository"]["size"]
        assert list(mine.references) == (theirs["reference"] or [])
        assert (mine.start_wal, mine.stop_wal) == (theirs["archive"]["start"], theirs["archive"]["stop"])
        assert (mine.start_lsn, mine.stop_lsn) == (theirs["lsn"]["start"], theirs["lsn"]["stop"])
    assert [b.type for b in stanza.backups] == [BackupType.FULL, BackupType.DIFF, BackupType.INCR]


def test_archive_lists_segments_but_not_backup_history_files(captured_repo):
    (stanza,) = discover(LocalSource(captured_repo), MB16)
    archive = stanza.archives["15-1"]
    names = sorted(s.name(MB16) for s in archive.segments)
    assert names[0] == "000000010000000000000001"
    assert names[-1] == "00000001000000000000000A"
    assert len(names) == 10  # the three *.backup files are not segments
    seg = archive.segments[parse_segment("000000010000000000000004", MB16)]
    assert seg.file.endswith("000000010000000000000004-4886679f65586e32c5d5e075c99513323dc736d5.gz")


def test_falls_back_to_the_copy_when_backup_info_is_damaged(captured_repo):
    (captured_repo / "backup/demo1/backup.info").write_text("garbage without sections")
    (stanza,) = discover(LocalSource(captured_repo), MB16)
    assert len(stanza.backups) == 3


def test_both_info_files_unusable_names_them(captured_repo):
    for name in ("backup.info", "backup.info.copy"):
        (captured_repo / "backup/demo1" / name).write_text("[backrest]\n[backup:current]\nX={not json\n[db]\n")
    with pytest.raises(SourceError, match=r"backup/demo1/backup.info.*not valid JSON"):
        discover(LocalSource(captured_repo), MB16)


def test_a_folder_that_is_not_a_repository_says_so(tmp_path):
    (tmp_path / "something.txt").write_text("hello")
    with pytest.raises(SourceError, match="not a pgBackRest repository: it has no backup/ folder"):
        find_stanzas(LocalSource(tmp_path))
    (tmp_path / "backup" / "x").mkdir(parents=True)
    with pytest.raises(SourceError, match=r"no backup/<stanza>/backup\.info found"):
        find_stanzas(LocalSource(tmp_path))


def test_missing_source_folder_is_named(tmp_path):
    with pytest.raises(SourceError, match=f"{tmp_path}/nope does not exist"):
        LocalSource(tmp_path / "nope")
