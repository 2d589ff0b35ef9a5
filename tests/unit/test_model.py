"""The report's building blocks: how an unread file and a phase that was not reached are said."""

from datetime import UTC, datetime

import pydantic
import pytest

from verification.model import (
    BackupSet,
    BackupType,
    PhaseStatus,
    PhaseTiming,
    UnreadableFile,
    UnreadableKind,
    set_name,
)
from verification.results.store import unreadable_json, unreadable_of


def test_an_unread_file_is_named_once_with_its_reason():
    own = UnreadableFile("FULL/x.bak", UnreadableKind.CORRUPT, "FULL/x.bak: end of file at offset 0x4e20: truncated")
    assert own.describe() == "FULL/x.bak: end of file at offset 0x4e20: truncated"
    bare = UnreadableFile("notes.txt", UnreadableKind.NOT_A_BACKUP, "not a SQL Server backup", database="shop")
    assert bare.describe() == "notes.txt: not a SQL Server backup"
    # As the report and the store keep it (one type for every unread file, read back the same).
    assert unreadable_json([bare]) == [{"path": "notes.txt", "kind": "not-a-backup",
                                        "reason": "not a SQL Server backup", "database": "shop"}]
    assert unreadable_of({"unreadable": unreadable_json([own, bare])}) == [own, bare]
    with pytest.raises(pydantic.ValidationError, match="Unexpected keyword argument"):
        unreadable_of({"unreadable": [{"path": "x", "kind": "corrupt", "reason": "r", "size": 3}]})
    with pytest.raises(pydantic.ValidationError, match="'corrupt', 'needs-server', 'not-a-backup', 'excluded', 'unaddressable', 'archived', 'permission' or 'unsupported'"):
        unreadable_of({"unreadable": [{"path": "x", "kind": "damaged", "reason": "r"}]})


def test_a_phase_not_reached_says_why():
    phase = PhaseTiming.not_reached("integrity_check", "the restore failed")
    assert (phase.name, phase.status, phase.details) == (
        "integrity_check", PhaseStatus.NOT_REACHED, {"why": "the restore failed"})


def test_a_backup_set_is_named_by_its_set_only_where_its_file_holds_several():
    assert set_name("a.bak", 2, True) == "a.bak (set 2)"
    assert set_name("a.bak", 1, True) == "a.bak (set 1)"  # the first of several: not the whole file
    assert set_name("a.bak", 1, False) == "a.bak"
    at = datetime(2026, 1, 1, tzinfo=UTC)
    appended = BackupSet("db", "a.bak", BackupType.LOG, at, at, path="a.bak", position=3, shares_file=True)
    assert (appended.name, appended.label, appended.path) == ("a.bak (set 3)", "a.bak", "a.bak")
    # A backup of another engine (a pgBackRest label, no position) is named by its label.
    labelled = BackupSet("pg", "20260101-000000F", BackupType.FULL, at, at)
    assert labelled.name == "20260101-000000F"
