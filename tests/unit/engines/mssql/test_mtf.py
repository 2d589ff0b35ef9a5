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
    assert header.bytes_read <= HEAD_BYTES + TAIL_BYTES
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


@pytest.mark.parametrize(("cut", "expected"), [
    (lambda size: size // 2, r"end of file at offset 0x[0-9a-f]+: expected a size in whole 512-byte blocks, "
                             r"found \d+ bytes \(\d+ past a block boundary\): the file is truncated"),
    (lambda size: size - 1, r"end of file .* \(511 past a block boundary\)"),
    (lambda size: size - 1024, r"descriptor block at offset 0x[0-9a-f]+: expected SFMB, found b'ESET'"),
    (lambda size: size // 2 // 512 * 512, r"descriptor block at offset 0x[0-9a-f]+: expected SFMB, found "),
])
def test_truncated_copies_name_the_file_and_what_is_missing(mssql_copy, cut, expected):
    root = mssql_copy("RestoreTimeClean/RestoreTimeClean.bak")
    path = root / "RestoreTimeClean/RestoreTimeClean.bak"
    data = path.read_bytes()
    path.write_bytes(data[: cut(len(data))])
    with pytest.raises(MtfError, match=r"^RestoreTimeClean/RestoreTimeClean\.bak: " + expected):
        read(root, "RestoreTimeClean/RestoreTimeClean.bak")


def test_a_damaged_trailer_copy_is_caught_on_a_log_too(mssql_copy):
    rel = "RestoreTimeClean/RestoreTimeClean_2.trn"
    path = mssql_copy(rel) / rel
    data = bytearray(path.read_bytes())
    trailer_scin = data.rindex(b"SCIN")
    data[trailer_scin + 0x57] = ord("D")  # the trailer now claims a full backup
    path.write_bytes(bytes(data))
    with pytest.raises(MtfError, match=r"closing configuration copy \(backup_type\) .*expected log as in the head "
                                       r"copy, found full"):
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
