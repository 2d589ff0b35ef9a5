"""Copy-only backups in the chain, read from the file as SQL Server writes them.

Copy-only is in two places of a backup file (mtf.py): the SSET block's MTF "copy set" attribute and
the SCIN configuration flag 0x400, in both configuration copies. The files here are real lab backups
copied and edited the way SQL Server writes a BACKUP ... WITH COPY_ONLY of the same database (both
marks, its own media set and backup set GUIDs, LSNs and dates where it was taken), and the real
COPY_ONLY fulls of ../shared/testdata/mssql-real-world. Each plan is compared, word for word, with a
reviewed golden (tests/fixtures/golden/mssql-copy-only-*.json; `RESTOREPROOF_GOLDEN=write` rewrites).
"""

from __future__ import annotations

import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.unit.engines.mssql.mtf_edit import Backup
from tests.unit.engines.test_chain_golden import check, summary
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan
from verification.engines.mssql.mtf import SCIN_COPY_ONLY, SSET_ATTRIBUTES, SSET_COPY, SSET_GUID
from verification.model import ChainStatus, RestorePlan
from verification.sources import LocalSource

RTC = "RestoreTimeClean"
SCIN_FLAGS, SCIN_FIRST, SCIN_LAST, SCIN_CHECKPOINT, SCIN_DB_BACKUP = 0x08, 0x20, 0x2A, 0x34, 0x3E
SCIN_START, SCIN_FINISH = 0x4D, 0x52
COPY_ONLY_FULL = "RestoreTimeClean_copyonly.bak"
COPY_ONLY_LOG = "RestoreTimeClean2_copyonly.trn"
# RestoreTimeClean.bak: the regular full (CheckpointLSN, the base of RestoreTimeClean2.bak).
REGULAR_FULL_CHECKPOINT = 25000000006200170


def lsn(value: int) -> tuple[int, int, int]:
    """The decimal LSN RESTORE HEADERONLY prints -> the 10 bytes' (u32 VLF, u32 block, u16 slot)."""
    return value // 10**15, value // 10**5 % 10**10, value % 10**5


def mtf_date(at: datetime) -> bytes:
    """5-byte big-endian MTF date: 14 bits year, 4 month, 5 day, 5 hour, 6 minute, 6 second."""
    value = at.year
    for part, bits in ((at.month, 4), (at.day, 5), (at.hour, 5), (at.minute, 6), (at.second, 6)):
        value = value << bits | part
    return value.to_bytes(5, "big")


def copy_only_of(source: Path, target: Path, *, first: int, checkpoint: int, last: int, start: datetime,
                 finish: datetime, database_backup: int | None = None, sset: bool = True, scin: bool = True,
                 seed: int = 0xC0) -> None:
    """Another backup of the same database, as BACKUP ... WITH COPY_ONLY writes it: its copy-only marks
    (either may be left off, for a file whose marks disagree), its own media set and backup set, and
    the LSNs and dates of when it was taken (the finish date only in the closing copy)."""
    backup = Backup(source.read_bytes())
    sset_at = backup.header().set_offset
    if sset:
        backup.put(sset_at + SSET_ATTRIBUTES, "<I", u32(backup, sset_at + SSET_ATTRIBUTES) | SSET_COPY)
    backup.put(sset_at + SSET_GUID, "16s", uuid.UUID(bytes=bytes([seed, 1] * 8)).bytes_le)
    backup.put(backup.streams(b"RAID")[0] + 22, "16s", uuid.UUID(bytes=bytes([seed, 2] * 8)).bytes_le)
    for copy in (0, 1):
        scin_at = backup.chunk(copy, b"SCIN")
        if scin:
            backup.put(scin_at + SCIN_FLAGS, "<I", u32(backup, scin_at + SCIN_FLAGS) | SCIN_COPY_ONLY)
        for relative, value in ((SCIN_FIRST, first), (SCIN_LAST, last), (SCIN_CHECKPOINT, checkpoint)):
            backup.put(scin_at + relative, "<IIH", *lsn(value))
        if database_backup is not None:
            backup.put(scin_at + SCIN_DB_BACKUP, "<IIH", *lsn(database_backup))
        backup.put(scin_at + SCIN_START, "5s", mtf_date(start))
        if copy == 1:
            backup.put(scin_at + SCIN_FINISH, "5s", mtf_date(finish))
    target.write_bytes(bytes(backup.data))


def u32(backup: Backup, offset: int) -> int:
    return int.from_bytes(backup.data[offset:offset + 4], "little")


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2017, 6, 1, hour, minute, second)


def rtc(corpus: Path, tmp_path: Path) -> Path:
    root = tmp_path / "mssql"
    shutil.copytree(corpus / RTC, root / RTC)
    return root / RTC


def add_copy_only_full(folder: Path, **marks: bool) -> None:
    """Taken at 13:06:30, between RestoreTimeClean.bak (12:59:12, LastLSN 25000000013200001) and its
    differential RestoreTimeClean2.bak (13:14:13, FirstLSN 25000000017300038), while RestoreTimeClean_2.trn's
    range (25000000015300001 to 25000000016300001) was logged. Its DatabaseBackupLSN is the regular full's
    CheckpointLSN: a copy-only full leaves the base where it was."""
    copy_only_of(folder / "RestoreTimeClean.bak", folder / COPY_ONLY_FULL, first=25000000015800037,
                 checkpoint=25000000015800037, last=25000000016000001, start=at(13, 6, 30),
                 finish=at(13, 6, 31), database_backup=REGULAR_FULL_CHECKPOINT, **marks)


def add_copy_only_log(folder: Path, **marks: bool) -> None:
    """Taken at 13:21:00, between RestoreTimeClean2_1.trn (13:19:13, LastLSN 25000000020000001) and
    RestoreTimeClean2_2.trn (13:24:13, 25000000020000001 to 25000000021000001): a copy-only log does not
    truncate the log, so it starts where the next regular log starts and ends before it."""
    source = folder / "RestoreTimeClean2_2.trn"
    checkpoint = Backup(source.read_bytes()).header().checkpoint_lsn
    copy_only_of(source, folder / COPY_ONLY_LOG, first=25000000020000001, checkpoint=checkpoint,
                 last=25000000020500001, start=at(13, 21), finish=at(13, 21, 1), seed=0xC1, **marks)


def plan_of(folder: Path, when: datetime | None = None) -> RestorePlan:
    (db,) = scan(LocalSource(folder)).databases
    return plan(db, RTC, when)


def names(result: RestorePlan) -> list[str]:
    return [Path(b.path).name for b in result.chain.backups]


def details(result: RestorePlan, rule: str) -> list[tuple[bool, str]]:
    return [(r.passed, r.detail) for r in result.chain.rules if r.rule == rule]


def header_of(folder: Path, name: str) -> Any:
    return Backup((folder / name).read_bytes()).header(name)


# ---- 1. a copy-only full between a regular full and its differential ----------------------------------


def test_the_edited_file_reads_as_sql_server_writes_a_copy_only_full(mssql_corpus, tmp_path):
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_full(folder)
    made, regular = header_of(folder, COPY_ONLY_FULL), header_of(folder, "RestoreTimeClean.bak")
    assert (made.is_copy_only, regular.is_copy_only) == (True, False)
    assert (made.first_lsn, made.checkpoint_lsn, made.last_lsn, made.database_backup_lsn) == (
        25000000015800037, 25000000015800037, 25000000016000001, REGULAR_FULL_CHECKPOINT)
    assert (made.backup_start, made.backup_finish) == (at(13, 6, 30), at(13, 6, 31))
    assert made.backup_set_guid != regular.backup_set_guid and made.media_set_guid != regular.media_set_guid
    assert made.backup_type == "full" and made.database_name == RTC


def test_a_copy_only_full_does_not_move_the_differential_base(mssql_corpus, tmp_path):
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_full(folder)
    diff, regular, made = (header_of(folder, n) for n in ("RestoreTimeClean2.bak", "RestoreTimeClean.bak",
                                                          COPY_ONLY_FULL))
    # The differential names the regular full, not the newer copy-only one.
    assert diff.differential_base_guid == regular.backup_set_guid != made.backup_set_guid
    result = plan_of(folder)
    assert result.chain.status is ChainStatus.COMPLETE and not result.chain.defects
    copy_only = {Path(b.path).name: b.copy_only for b in result.data_backups}
    assert copy_only == {"RestoreTimeClean.bak": False, COPY_ONLY_FULL: True, "RestoreTimeClean2.bak": False}
    # The regular full and its differential reach further than the newer copy-only full: restored, and said.
    assert [d for ok, d in details(result, "differential-base")] == [
        "differential RestoreTimeClean2.bak: DifferentialBaseGUID 5af3e50d-a4e0-4e9b-8aef-fe52898c6359 equals the "
        "full's BackupSetGUID (DatabaseBackupLSN 25000000006200170, the full's CheckpointLSN 25000000006200170)"]
    assert details(result, "copy-only-full") == [
        (True, f"full {COPY_ONLY_FULL} is copy-only and ends at LSN 25000000016000001; full RestoreTimeClean.bak "
               "with its differential reaches LSN 25000000019000001: restored instead")]
    check("mssql-copy-only-full-between-full-and-diff", [summary(result)])


def test_latest_restores_the_regular_full_and_its_differential(mssql_corpus, tmp_path):
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_full(folder)
    result = plan_of(folder)
    assert names(result) == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak", "RestoreTimeClean2_1.trn",
                             "RestoreTimeClean2_2.trn", "RestoreTimeClean2_3.trn"]


def test_without_logs_the_newer_differential_is_still_restored(mssql_corpus, tmp_path):
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_full(folder)
    for log in folder.glob("*.trn"):
        log.unlink()
    assert names(plan_of(folder)) == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak"]


def test_a_log_lost_after_the_copy_only_full_does_not_break_the_chain_through_the_differential(
        mssql_corpus, tmp_path):
    # RestoreTimeClean_3.trn gone: regular full + differential + RestoreTimeClean2_*.trn still reach the
    # latest point; the copy-only full's own path would meet a gap before RestoreTimeClean2_1.
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_full(folder)
    (folder / "RestoreTimeClean_3.trn").unlink()
    result = plan_of(folder)
    assert names(result) == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak", "RestoreTimeClean2_1.trn",
                             "RestoreTimeClean2_2.trn", "RestoreTimeClean2_3.trn"]
    assert result.chain.status is ChainStatus.COMPLETE and not result.chain.problems
    check("mssql-copy-only-full-logs-after-it-missing", [summary(result)])


def test_a_target_between_the_copy_only_full_and_the_differential_restores_the_copy_only_full(
        mssql_corpus, tmp_path):
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_full(folder)
    when = datetime(2017, 6, 1, 13, 10, tzinfo=UTC)
    result = plan_of(folder, when)
    assert result.chain.status is ChainStatus.COMPLETE and not result.chain.defects
    # The newest full finished before the target is the copy-only one; no differential is before the target.
    assert names(result) == [COPY_ONLY_FULL, "RestoreTimeClean_2.trn", "RestoreTimeClean_3.trn"]
    assert details(result, "differential-base") == [
        (True, f"full {COPY_ONLY_FULL} is copy-only: never a differential base")]
    assert [b.copy_only for b in result.chain.backups] == [True, False, False]
    check("mssql-copy-only-full-target-before-the-diff", [summary(result)])


# ---- 2. a copy-only log between two regular logs ------------------------------------------------------


def test_a_copy_only_log_read_from_the_file_is_not_required(mssql_corpus, tmp_path):
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_log(folder)
    made = header_of(folder, COPY_ONLY_LOG)
    assert (made.is_copy_only, made.backup_type, made.first_lsn, made.last_lsn) == (
        True, "log", 25000000020000001, 25000000020500001)
    result = plan_of(folder)
    assert result.chain.status is ChainStatus.COMPLETE and not result.chain.defects
    assert names(result) == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak", "RestoreTimeClean2_1.trn",
                             "RestoreTimeClean2_2.trn", "RestoreTimeClean2_3.trn"]
    assert details(result, "copy-only-logs") == [
        (True, "copy-only log backup(s) not required, a regular log continuing from the same LSN: "
               f"{COPY_ONLY_LOG}")]
    check("mssql-copy-only-log-between-two-logs", [summary(result)])


def test_without_the_next_regular_log_the_copy_only_log_continues_the_chain(mssql_corpus, tmp_path):
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_log(folder)
    (folder / "RestoreTimeClean2_2.trn").unlink()
    (folder / "RestoreTimeClean2_3.trn").unlink()
    result = plan_of(folder)
    assert result.chain.status is ChainStatus.COMPLETE
    assert names(result)[-2:] == ["RestoreTimeClean2_1.trn", COPY_ONLY_LOG]
    assert "copy-only-logs" not in {r.rule for r in result.chain.rules}
    check("mssql-copy-only-log-continues-the-chain", [summary(result)])


def test_a_copy_only_log_used_does_not_hide_the_gap_after_it(mssql_corpus, tmp_path):
    # RestoreTimeClean2_2.trn gone: the copy-only log ends at 25000000020500001, RestoreTimeClean2_3.trn
    # starts at 25000000021000001. The gap is after the copy-only log, which is used.
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_log(folder)
    (folder / "RestoreTimeClean2_2.trn").unlink()
    result = plan_of(folder)
    assert result.chain.status is ChainStatus.BROKEN
    (gap,) = result.chain.problems
    assert (gap.code, gap.files, gap.expected_lsn, gap.found_lsn) == (
        "log-gap", (COPY_ONLY_LOG, "RestoreTimeClean2_3.trn"), "25000000020500001", "25000000021000001")
    assert names(result)[-1] == COPY_ONLY_LOG


# ---- 3. the real COPY_ONLY fulls ----------------------------------------------------------------------


def test_the_real_copy_only_fulls_are_one_database_and_restore_the_newest(mssql_real_world):
    catalog = scan(LocalSource(mssql_real_world / "copy-only"))
    # LocalDB names its instance anew at each start (LOCALDB#<hash>); the backups are still one database.
    (db,) = catalog.databases
    assert {m.header.server_name for m in db.sets} == {
        "DESKTOP-A6LPK0P\\LOCALDB#3AD9E729", "DESKTOP-A6LPK0P\\LOCALDB#08B1F964", "DESKTOP-A6LPK0P\\LOCALDB#A82D36E1"}
    assert db.server == "DESKTOP-A6LPK0P\\LOCALDB"
    result = plan(db, catalog.display_name(db), None)
    assert result.chain.status is ChainStatus.COMPLETE and not result.chain.problems and not result.chain.defects
    assert names(result) == ["plataformadb_792dd97.bak"]  # LastLSN 35000000004000001, 2020-05-02
    assert [b.copy_only for b in result.chain.backups] == [True]
    assert [b.copy_only for b in result.data_backups] == [True, True, True]
    assert details(result, "differential-base") == [
        (True, "full plataformadb_792dd97.bak is copy-only: never a differential base")]
    check("mssql-copy-only-real-fulls-as-one-database", [summary(result)])


# ---- 4. marks that disagree: unknown, and the chain says nothing of copy-only ---------------------------


@pytest.mark.parametrize("marks", [{"sset": True, "scin": False}, {"sset": False, "scin": True}],
                         ids=["sset-only", "scin-only"])
@pytest.mark.parametrize("add", [add_copy_only_full, add_copy_only_log], ids=["full", "log"])
def test_marks_that_disagree_are_unknown_and_plan_as_a_regular_backup(add, marks, mssql_corpus, tmp_path):
    unknown, regular = rtc(mssql_corpus, tmp_path / "unknown"), rtc(mssql_corpus, tmp_path / "regular")
    add(unknown, **marks)
    add(regular, sset=False, scin=False)
    name = COPY_ONLY_FULL if add is add_copy_only_full else COPY_ONLY_LOG
    assert (header_of(unknown, name).is_copy_only, header_of(regular, name).is_copy_only) == (None, False)
    said, plain = plan_of(unknown), plan_of(regular)
    assert [r for r in said.chain.rules if "copy-only" in r.detail or r.rule == "copy-only-logs"] == []
    assert not any("copy-only" in p.message for p in [*said.chain.problems, *said.chain.defects])
    assert summary(said) == summary(plain)
    assert said.chain.status is plain.chain.status
    if add is add_copy_only_log:  # unknown is not copy-only: the log is applied like any other
        assert COPY_ONLY_LOG in names(said)


def test_a_scin_flag_in_one_configuration_copy_only_is_unknown(mssql_corpus, tmp_path):
    folder = rtc(mssql_corpus, tmp_path)
    add_copy_only_full(folder)
    backup = Backup((folder / COPY_ONLY_FULL).read_bytes())
    head = backup.chunk(0, b"SCIN") + SCIN_FLAGS
    backup.put(head, "<I", u32(backup, head) & ~SCIN_COPY_ONLY)
    assert backup.header(COPY_ONLY_FULL).is_copy_only is None
