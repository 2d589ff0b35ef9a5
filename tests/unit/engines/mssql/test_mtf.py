"""The offline MTF header reader on every real file of the SQL Server corpus (../shared/testdata)."""

from __future__ import annotations

import csv
import itertools
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import MSSQL_CORPUS
from verification.engines.mssql.mtf import (
    HEAD_BYTES,
    TAIL_BYTES,
    BackupHeader,
    MtfError,
    MtfUnsupported,
    NeedsServerHeaderOnly,
    read_backup_header,
)
from verification.sources import LocalSource
from verification.sources.base import SourceFile


def manifest() -> list[dict[str, str]]:
    path = MSSQL_CORPUS / "MANIFEST.tsv"
    if not path.exists():
        return []
    with path.open() as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def read(root: Path, rel: str) -> BackupHeader:
    return read_backup_header(SourceFile(LocalSource(root), rel))


@pytest.mark.parametrize("row", manifest(), ids=lambda row: row["file"])
def test_every_corpus_file_is_read_from_its_head_and_trailer_only(mssql_corpus, row):
    reader = SourceFile(LocalSource(mssql_corpus), row["file"])
    if row["file"].startswith("history/compressed/"):
        with pytest.raises(NeedsServerHeaderOnly, match=r"natively compressed backup .*RESTORE HEADERONLY"):
            read_backup_header(reader)
        return
    header = read_backup_header(reader)
    assert header.size_bytes == int(row["bytes"])
    assert reader.bytes_read == header.bytes_read <= 64 * 1024
    # The set's head, its closing blocks and the filemarks and end-of-set blocks after them.
    assert header.bytes_read <= HEAD_BYTES + TAIL_BYTES + 8 * 1024
    assert header.database_name and header.server_name
    assert header.backup_type in ("full", "diff", "log")
    assert header.first_lsn <= header.last_lsn
    assert header.backup_start is not None and header.backup_finish is not None
    assert header.backup_start <= header.backup_finish
    assert 1 <= header.family_number <= header.family_count
    assert (header.database_version, header.software_version) in ((661, (10, 50)), (852, (13, 0)))
    assert header.is_differential == (header.flags & 0x800 != 0)


def test_values_stated_by_the_corpus_readme(mssql_corpus):
    # "The log in this backup set begins at LSN 19000000021500001 ... An earlier log backup that
    # includes LSN 19000000020400004 can be restored." (restoring StopAt_23 after stopping inside StopAt_21)
    stop_21 = read(mssql_corpus, "sql2008-backups/StopAt/StopAt_21.trn")
    stop_23 = read(mssql_corpus, "sql2008-backups/StopAt/StopAt_23.trn")
    assert stop_23.first_lsn == 19000000021500001
    assert stop_21.first_lsn <= 19000000020400004 < stop_21.last_lsn
    assert (stop_21.database_name, stop_21.backup_type, stop_21.database_version) == ("StopAt", "log", 661)


def test_a_full_header_in_detail(mssql_corpus):
    header = read(mssql_corpus, "RestoreTimeClean/RestoreTimeClean.bak")
    assert (header.database_name, header.server_name, header.backup_type) == ("RestoreTimeClean", "SQL2008", "full")
    assert (header.first_lsn, header.last_lsn) == (25000000006200170, 25000000013200001)
    assert header.checkpoint_lsn == 25000000006200170 and header.database_backup_lsn == 0
    assert header.backup_start == datetime(2017, 6, 1, 12, 59, 12)
    assert header.database_creation == datetime(2017, 6, 1, 12, 59, 12)
    assert header.media_set_guid == "484f18bf-ea27-4c4b-859c-c049ff6bd2d0"
    assert (header.family_count, header.family_number) == (1, 1)
    data, log = header.files
    assert (data.file_id, data.logical_name, data.size_bytes) == (1, "RestoreTimeClean", 2359296)
    assert data.physical_name == (r"C:\Program Files\Microsoft SQL Server\MSSQL10_50.MSSQLSERVER\MSSQL\DATA"
                                  r"\RestoreTimeClean.mdf")
    assert (log.file_id, log.logical_name, log.size_bytes) == (2, "RestoreTimeClean_log", 589824)
    assert log.physical_name.endswith("RestoreTimeClean_log.LDF")


def test_neighbours_in_a_chain_agree(mssql_corpus):
    folder = "RestoreTimeClean"
    full = read(mssql_corpus, f"{folder}/RestoreTimeClean.bak")
    diff = read(mssql_corpus, f"{folder}/RestoreTimeClean2.bak")
    logs = [read(mssql_corpus, f"{folder}/RestoreTimeClean_{i}.trn") for i in (1, 2, 3)]
    assert diff.is_differential and diff.database_backup_lsn == full.checkpoint_lsn
    assert logs[0].first_lsn == full.first_lsn  # the first log after a full starts at its checkpoint
    for earlier, later in itertools.pairwise(logs):
        assert later.first_lsn == earlier.last_lsn
    assert {h.database_creation for h in (full, diff, *logs)} == {full.database_creation}


@pytest.mark.parametrize("folder", ["sql2008-backups/RestoreTimeStripe", "history/sql2016-stripe"])
def test_both_families_of_a_striped_set_share_media_and_lsns(mssql_corpus, folder):
    names = {"sql2008-backups/RestoreTimeStripe": ("RestoreTimeStripe.bak", "RestoreTimeStripe1.bak"),
             "history/sql2016-stripe": ("restoretime.bak", "restoretime1.bak")}[folder]
    one = read(mssql_corpus, f"{folder}/Stripe1/{names[0]}")
    two = read(mssql_corpus, f"{folder}/Stripe2/{names[1]}")
    assert (one.family_count, one.family_number, two.family_count, two.family_number) == (2, 1, 2, 2)
    assert one.media_set_guid == two.media_set_guid
    assert (one.first_lsn, one.last_lsn) == (two.first_lsn, two.last_lsn)


def test_empty_log_backups_are_recognised(mssql_corpus):
    empty = read(mssql_corpus, "OlaMsFilter/complex/Log/test_LOG_20160629_141500.trn")
    assert empty.is_empty_log and empty.first_lsn == empty.last_lsn == 21000000018200001
    assert not read(mssql_corpus, "OlaMsFilter/complex/Log/test_LOG_20160629_141400.trn").is_empty_log


def test_media_password_backup_is_read(mssql_corpus):
    header = read(mssql_corpus, "backuppassword/passwd.bak")
    assert (header.database_name, header.backup_type, header.last_lsn) == ("stripetest", "full", 20000000035400001)


def test_checksum_flag(mssql_corpus):
    assert read(mssql_corpus, "sql2008-backups/db2/FULL/SQL2008_db2_FULL_20170518_041738.bak").has_checksums
    assert not read(mssql_corpus, "RestoreTimeClean/RestoreTimeClean.bak").has_checksums


def _in_the_data(data: bytes) -> int:
    """A cut at a sector boundary past the middle, where the last sector kept is not all zeros."""
    return next(end for end in range(len(data) // 2 // 512 * 512, len(data), 512) if any(data[end - 512:end]))


@pytest.mark.parametrize(("cut", "expected"), [
    (lambda data: len(data) // 2, r"end of file at offset 0x[0-9a-f]+: expected a size in whole 512-byte blocks, "
                                  r"found \d+ bytes \(\d+ past a block boundary\): the file is truncated"),
    (lambda data: len(data) - 1, r"end of file .* \(511 past a block boundary\)"),
    (lambda data: len(data) - 1024, r"descriptor block at offset 0x[0-9a-f]+: expected SFMB, found b'ESET'"),
    (_in_the_data, r"descriptor block at offset 0x[0-9a-f]+: expected SFMB, found b'.*': the file is truncated or "
                   r"was never closed"),
])
def test_truncated_copies_name_the_file_and_what_is_missing(mssql_copy, cut, expected):
    root = mssql_copy("RestoreTimeClean/RestoreTimeClean.bak")
    path = root / "RestoreTimeClean/RestoreTimeClean.bak"
    data = path.read_bytes()
    path.write_bytes(data[: cut(data)])
    with pytest.raises(MtfError, match=r"^RestoreTimeClean/RestoreTimeClean\.bak: " + expected) as raised:
        read(root, "RestoreTimeClean/RestoreTimeClean.bak")
    assert not isinstance(raised.value, MtfUnsupported)  # a truncation is proof of damage


def test_a_file_ending_in_zeros_is_not_called_truncated(mssql_copy):
    # A copy in progress sizes the file first and fills it in order: its end is zeros, not a filemark.
    rel = "RestoreTimeClean/RestoreTimeClean.bak"
    path = mssql_copy(rel) / rel
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2] + bytes(len(data) - len(data) // 2))
    with pytest.raises(MtfUnsupported, match=r"end of file at offset 0x[0-9a-f]+: expected a closing soft filemark "
                                             r"\(SFMB\), found 512 zero bytes: still being written"):
        read(path.parents[1], rel)


def test_copies_naming_different_backups_are_an_error_not_damage(mssql_copy):
    # The configuration stream has no checksum: which copy is wrong cannot be proven.
    rel = "RestoreTimeClean/RestoreTimeClean_2.trn"
    path = mssql_copy(rel) / rel
    data = bytearray(path.read_bytes())
    trailer_scin = data.rindex(b"SCIN")
    data[trailer_scin + 0x57] = ord("D")  # the trailer now claims a full backup
    path.write_bytes(bytes(data))
    with pytest.raises(MtfUnsupported, match=r"closing configuration copy \(backup_type\) .*expected the same backup "
                                             r"\(log in the head copy\), found full: a layout restoreproof"):
        read(path.parents[1], rel)


def test_a_flipped_byte_in_the_media_stream_header_is_caught(mssql_copy):
    rel = "RestoreTimeClean/RestoreTimeClean.bak"
    path = mssql_copy(rel) / rel
    data = bytearray(path.read_bytes())
    data[140 + 8] ^= 0x01  # the RAID stream's length field, right after the TAPE block header
    path.write_bytes(bytes(data))
    with pytest.raises(MtfError, match=r"RAID stream header checksum at offset 0x8c"):
        read(path.parents[1], rel)


def test_flipped_header_byte_fails_the_block_checksum(mssql_copy):
    root = mssql_copy("RestoreTimeClean/RestoreTimeClean.bak")
    path = root / "RestoreTimeClean/RestoreTimeClean.bak"
    data = bytearray(path.read_bytes())
    data[0x600 + 12] ^= 0x01  # inside the SSET block's common header
    path.write_bytes(bytes(data))
    with pytest.raises(MtfError, match=r"RestoreTimeClean\.bak: SSET block header checksum at offset 0x600: "
                                       r"expected 0x[0-9a-f]{4}, found 0x[0-9a-f]{4}"):
        read(root, "RestoreTimeClean/RestoreTimeClean.bak")


def test_a_file_that_is_not_mtf(tmp_path):
    (tmp_path / "notes.bak").write_bytes(b"this is not a backup" * 100)
    with pytest.raises(MtfError, match=r"notes\.bak: media header at offset 0x0: expected 'TAPE'"):
        read(tmp_path, "notes.bak")


# ---- the whole header ------------------------------------------------------------------------------------


def corpus_headers(root: Path) -> dict[str, BackupHeader]:
    return {row["file"]: read(root, row["file"]) for row in manifest()
            if not row["file"].startswith("history/compressed/")}


def test_recovery_model_of_every_database(mssql_corpus):
    # SIMPLE exactly where there is no log backup and no log chain: SimpleRecovery (full + two
    # differentials), detachattach and testlastbackup (single fulls). Every database with logs is FULL.
    headers = corpus_headers(mssql_corpus)
    simple = {path for path, h in headers.items() if h.recovery_model == "SIMPLE"}
    assert simple == {"sql2008-backups/SimpleRecovery/SimpleBacktest.bak",
                      "sql2008-backups/SimpleRecovery/SimpleBackTest_1.bak",
                      "sql2008-backups/SimpleRecovery/SimpleBackTest_2.bak",
                      "detachattach/detachattach.bak", "singlerestore/testlastbackup.bak"}
    assert {h.recovery_model for path, h in headers.items() if path not in simple} == {"FULL"}
    assert all(h.log_chain_origin_lsn is None for path, h in headers.items() if path in simple)
    with_logs = {(h.server_name, h.database_name) for h in headers.values() if h.backup_type == "log"}
    assert not any((h.server_name, h.database_name) in with_logs for path, h in headers.items() if path in simple)


def test_every_differentials_base_guid_is_its_fulls_backup_set_guid(mssql_corpus):
    headers = corpus_headers(mssql_corpus)
    fulls = {h.backup_set_guid: h for h in headers.values() if h.backup_type == "full"}
    diffs = [h for h in headers.values() if h.backup_type == "diff"]
    assert len(diffs) == 23 and len({h.backup_set_guid for h in headers.values()}) == 102  # 118 files, 16 stripe pairs
    matched = 0
    for diff in diffs:
        assert diff.differential_base_lsn == diff.database_backup_lsn
        if (full := fulls.get(diff.differential_base_guid)) is not None:
            assert (full.database_name, full.checkpoint_lsn) == (diff.database_name, diff.differential_base_lsn)
            matched += 1
    assert matched == 21  # all but db1's two differentials, whose full is not in the corpus
    assert all(h.differential_base_guid is None and h.differential_base_lsn is None
               for h in headers.values() if h.backup_type != "diff")


def test_a_differential_names_its_full_exactly(mssql_corpus):
    full = read(mssql_corpus, "DoubleDiffing/difftest-full.bak")
    diff = read(mssql_corpus, "DoubleDiffing/difftest-diff1.bak")
    assert full.backup_set_guid == diff.differential_base_guid == "f24e3dc4-fb3c-48aa-9360-fc9ee26d1464"
    assert diff.backup_set_guid == "46b619d2-0f7d-4b9d-bbf8-acd5affc4767"
    assert diff.differential_base_lsn == full.checkpoint_lsn == 24000000006800099


def test_recovery_forks_and_the_fork_a_restored_database_came_from(mssql_corpus):
    headers = corpus_headers(mssql_corpus)
    by_database: dict[tuple[str, str, datetime | None], set[str | None]] = {}
    for h in headers.values():
        by_database.setdefault((h.server_name, h.database_name, h.database_creation), set()).add(h.recovery_fork_guid)
    assert len(by_database) == 22 and all(len(forks) == 1 for forks in by_database.values())  # one fork each
    source = read(mssql_corpus, "RestoreTimeClean/RestoreTimeClean.bak")
    restored = read(mssql_corpus, "restoretimeclean2016/RestoreTimeClean.bak")
    assert source.recovery_fork_guid == source.family_guid == "e4b9b1b7-255c-4866-af1f-eb4a29e8c2c9"
    assert source.parent_fork_guid is None and source.fork_point_lsn is None
    # Restored on 2016 from the 2008 R2 chain up to the end of RestoreTimeClean_1.trn: a new fork,
    # branched off the source's, the family kept, a new binding id.
    assert restored.recovery_fork_guid == "6d3a541d-31c4-4207-975e-917419133822"
    assert restored.parent_fork_guid == restored.family_guid == source.recovery_fork_guid
    assert restored.fork_point_lsn == read(mssql_corpus, "RestoreTimeClean/RestoreTimeClean_1.trn").last_lsn
    assert (source.binding_id, restored.binding_id) == ("f784761b-0032-4636-9a07-202706d9f791",
                                                        "edad2fa4-c5a4-4acd-8ad6-7386c2260d5d")
    # passwd.bak's database was restored from RestoreTimeStripe's chain, through its log 23.
    passwd = read(mssql_corpus, "backuppassword/passwd.bak")
    stripe = read(mssql_corpus, "sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe.bak")
    assert passwd.parent_fork_guid == passwd.family_guid == stripe.recovery_fork_guid
    assert passwd.fork_point_lsn == read(mssql_corpus,
                                         "sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe_23.trn").last_lsn
    assert passwd.recovery_fork_guid == "5df21dbd-0334-4219-bc90-c6d37fa86dd1"


def test_begins_log_chain_marks_the_first_log_of_each_chain(mssql_corpus):
    headers = corpus_headers(mssql_corpus)
    first = sorted(path for path, h in headers.items() if h.begins_log_chain)
    assert first == sorted([
        "OlaMsFilter/Simple/test_LOG_20160629_141310.trn", "OlaMsFilter/complex/Log/test_LOG_20160629_141400.trn",
        "RestoreTimeClean/RestoreTimeClean_1.trn",
        "history/sql2016-stripe/Stripe1/restoretime_1.trn", "history/sql2016-stripe/Stripe2/restoretime_1a.trn",
        "sql2008-backups/Cube_Query_History/LOG/SQL2008_Cube_Query_History_LOG_20170518_041831.trn",
        "sql2008-backups/DBWithoutOwner/LOG/SQL2008_DBWithoutOwner_LOG_20170518_041831.trn",
        "sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe_1.trn",
        "sql2008-backups/RestoreTimeStripe/Stripe2/RestoreTimeStripe_1a.trn",
        "sql2008-backups/StopAt/StopAt_1.trn",
        "sql2008-backups/db1/LOG/SQL2008_db1_LOG_20170518_041831.trn",
        "sql2008-backups/dbOrphanUsers/LOG/SQL2008_dbOrphanUsers_LOG_20170518_041831.trn",
        "sql2008-backups/dbareports/LOG/SQL2008_dbareports_LOG_20170518_041831.trn",
        "sql2008-backups/ft1/LOG/SQL2008_ft1_LOG_20170518_041831.trn"])
    assert all(h.begins_log_chain is False for h in headers.values() if h.backup_type != "log")


def test_compatibility_level_collation_and_build(mssql_corpus):
    headers = corpus_headers(mssql_corpus)
    assert {h.compatibility_level for p, h in headers.items() if p.startswith("history/sql2016-stripe/")} == {130}
    assert {h.compatibility_level for p, h in headers.items() if not p.startswith("history/sql2016-stripe/")} == {100}
    assert {h.collation for h in headers.values()} == {"SQL_Latin1_General_CP1_CI_AS", "Latin1_General_CI_AS"}
    for h in headers.values():
        sql = h.collation == "SQL_Latin1_General_CP1_CI_AS"
        assert (h.collation_id, h.sort_order) == (("0904d00034", 52) if sql else ("0904d00000", 0))
        assert (h.unicode_locale_id, h.unicode_comparison_style) == (1033, 196609)
    assert read(mssql_corpus, "DoubleDiffing/difftest-full.bak").collation == "Latin1_General_CI_AS"
    assert read(mssql_corpus, "RestoreTimeClean/RestoreTimeClean.bak").collation == "SQL_Latin1_General_CP1_CI_AS"
    # The build beside SSET's major.minor: 10.50.4000 is the SQL2008R2SP2 instance, 13.0.1601 2016 RTM.
    stop = read(mssql_corpus, "sql2008-backups/StopAt/StopAt.bak")
    assert (stop.software_version, stop.software_build) == ((10, 50), 4000)
    assert read(mssql_corpus, "history/sql2016-stripe/Stripe1/restoretime.bak").software_build == 1601


def test_file_lists_with_type_filegroup_and_allocated_size(mssql_corpus):
    def listed(rel: str) -> list[tuple[int, str, str | None, str | None, int]]:
        return [(f.file_id, f.logical_name, f.file_type, f.filegroup, f.size_bytes) for f in read(mssql_corpus, rel).files]

    assert listed("DoubleDiffing/difftest-full.bak") == [(1, "doublediff", "D", "PRIMARY", 2359296),
                                                         (2, "doublediff_log", "L", None, 589824)]
    assert listed("sql2008-backups/db1/DIFF/SQL2008_db1_DIFF_20170518_041819.bak") == [
        (1, "db1", "D", "PRIMARY", 1073741824), (3, "db1_1", "D", "PRIMARY", 1073741824),
        (2, "db1_log", "L", None, 3538944)]
    assert listed("restoretimeclean2016/RestoreTimeClean.bak") == [
        (1, "RestoreTimeClean", "D", "PRIMARY", 3407872), (2, "RestoreTimeClean_log", "L", None, 5963776)]
    for h in corpus_headers(mssql_corpus).values():
        for f in h.files:  # the type code agrees with the file's extension everywhere
            assert f.file_type == ("L" if f.physical_name.lower().endswith((".ldf", "\\log")) else "D")
            assert f.filegroup_id == (0 if f.file_type == "L" else 1)


def test_what_the_offline_header_does_not_carry_is_unknown(mssql_corpus):
    # No lab file is copy-only (both copy-only marks are absent: False), damaged or bulk-logged (not
    # located: None, never False).
    for h in corpus_headers(mssql_corpus).values():
        assert (h.is_copy_only, h.is_damaged, h.has_bulk_logged_data) == (False, None, None)


def test_collation_names_follow_ms_tds_flag_order():
    from verification.engines.mssql.mtf_config import collation_name

    def raw(flags: int, sort_id: int = 0, lcid: int = 0x409, high: int = 0) -> bytes:
        return (lcid | flags << 20 | high << 24).to_bytes(4, "little") + bytes([sort_id])

    # Bits 20..23: ignore case, accent, kana, width (MS-TDS 2.2.5.1.2); set = insensitive.
    assert collation_name(raw(0b1111)) == "Latin1_General_CI_AI"
    assert collation_name(raw(0b1101)) == "Latin1_General_CI_AS"  # the corpus's own: kana and width ignored
    assert collation_name(raw(0b0000)) == "Latin1_General_CS_AS_KS_WS"
    assert collation_name(raw(0b1011)) == "Latin1_General_CI_AI_KS"  # kana sensitive, width not
    assert collation_name(raw(0b0111)) == "Latin1_General_CI_AI_WS"  # width sensitive, kana not
    assert collation_name(raw(0b1101, sort_id=52)) == "SQL_Latin1_General_CP1_CI_AS"
    assert collation_name(raw(0b1101, sort_id=53)) is None  # a sort order the corpus does not confirm
    assert collation_name(raw(0b1101, lcid=0x411)) is None  # a locale the corpus does not confirm
    assert collation_name(raw(0b1101, high=0x01)) is None  # binary
    assert collation_name(raw(0b1101, high=0x10)) is None  # a versioned collation (_100_)


def test_the_recovery_model_from_the_status_word():
    from verification.engines.mssql.mtf_config import recovery_model

    assert [recovery_model(s) for s in (0, 4, 8, 12, 0x10000)] == ["FULL", "BULK_LOGGED", "SIMPLE", "SIMPLE", "FULL"]
