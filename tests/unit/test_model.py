"""The report's building blocks: how an unread file and a phase that was not reached are said."""

import pydantic
import pytest

from verification.model import PhaseStatus, PhaseTiming, UnreadableFile, UnreadableKind
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
