"""Every backup set of a file, with the media's own block sizes: appended sets (BACKUP ... WITH NOINIT)
built from real backups by the MTF specification (mtf_append.py), and the copy-only fulls written
with 4096-byte soft filemark blocks (../shared/testdata/mssql-real-world)."""

from __future__ import annotations

import dataclasses
import re
import struct
from pathlib import Path

import pytest

from tests.unit.engines.mssql.mtf_append import append_sets, filemarks, set_ranges
from tests.unit.engines.mssql.mtf_edit import Backup, StrictBytes
from verification.engines.mssql.mtf import (
    BackupHeader,
    MtfError,
    MtfUnsupported,
    read_backup_header,
    read_backup_headers,
    read_media,
)

FULL, LOG = "OlaMsFilter/Simple/test_FULL_20160629_141300.bak", "OlaMsFilter/Simple/test_LOG_20160629_141310.trn"
COPY_ONLY = ("plataformadb_4b7a2e4.bak", "plataformadb_93b98ca.bak", "plataformadb_792dd97.bak")
# What a set's header says about the file rather than the set: where it lies and what media it is on.
WHERE = ("path", "size_bytes", "position", "set_offset", "set_end", "media_set_guid", "family_count", "family_number")


def alone(data: bytes, name: str = "alone.bak") -> BackupHeader:
    return read_backup_header(StrictBytes(name, data))


def facts(header: BackupHeader) -> dict[str, object]:
    return {k: v for k, v in dataclasses.asdict(header).items() if k not in (*WHERE, "bytes_read")}


@pytest.fixture()
def copy_only(mssql_real_world: Path) -> list[bytes]:
    return [(mssql_real_world / "copy-only" / name).read_bytes() for name in COPY_ONLY]


def test_the_copy_only_fulls_read_with_their_4096_byte_filemarks(copy_only: list[bytes]) -> None:
    for name, data in zip(COPY_ONLY, copy_only, strict=True):
        header = alone(data, name)
        assert (header.backup_type, header.database_name, header.recovery_model) == ("full", "plataformadb", "SIMPLE")
        assert (header.is_copy_only, header.position, header.set_offset, header.set_end) == (True, 1, 0x2000, len(data))
        assert header.writer == "SQL Server 13.0.4001 (SQL Server 2016)" and header.layout_proven
        assert header.backup_finish is not None and header.first_lsn <= header.checkpoint_lsn <= header.last_lsn


def test_lab_backups_are_not_copy_only_and_name_their_writer(mssql_corpus: Path) -> None:
    full, log = (alone((mssql_corpus / rel).read_bytes()) for rel in (FULL, LOG))
    assert (full.is_copy_only, log.is_copy_only) == (False, False)
    assert full.writer == "SQL Server 10.50.4042 (SQL Server 2008 R2)"
    assert dataclasses.replace(full, software_version=(16, 0)).layout_proven is False


def test_copy_only_needs_both_marks(copy_only: list[bytes]) -> None:
    # The SSET's copy-set bit cleared, the configuration's flag kept: the marks disagree, so unknown.
    backup = Backup(copy_only[1])
    sset = 0x2000
    backup.put(sset + 52, "<I", struct.unpack_from("<I", backup.data, sset + 52)[0] & ~0x2)
    assert backup.header().is_copy_only is None


def test_appended_sets_are_each_read_in_position_order(mssql_corpus: Path) -> None:
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    both = append_sets(full, log, adopt_media=True)
    headers = read_backup_headers(StrictBytes("both.bak", both))
    assert [(h.position, h.backup_type) for h in headers] == [(1, "full"), (2, "log")]
    assert [(h.set_offset, h.set_end) for h in headers] == [(0x600, len(full)), *(
        (start, end) for start, end in set_ranges(both)[1:])]
    assert [facts(h) for h in headers] == [facts(alone(full)), facts(alone(log))]
    assert {h.media_set_guid for h in headers} == {alone(full).media_set_guid}
    assert headers[1].size_bytes == len(both)


def test_three_copy_only_sets_of_4096_byte_blocks(copy_only: list[bytes]) -> None:
    data = append_sets(*copy_only, adopt_media=True)
    headers = read_backup_headers(StrictBytes("three.bak", data))
    assert [h.position for h in headers] == [1, 2, 3]
    assert [facts(h) for h in headers] == [facts(alone(d)) for d in copy_only]
    # Each set is read at its head and end, not through its data.
    assert headers[0].bytes_read < 3 * 100 * 1024 < len(data)


def test_read_backup_header_refuses_a_file_of_several_sets(mssql_corpus: Path) -> None:
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    with pytest.raises(ValueError, match=r"^both\.bak: holds 2 backup sets; read them with read_backup_headers$"):
        alone(append_sets(full, log, adopt_media=True), "both.bak")


def test_a_file_cut_inside_its_second_set_is_truncated(mssql_corpus: Path) -> None:
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    both = append_sets(full, log, adopt_media=True)
    start, end = set_ranges(both)[1]
    cut = next(at for at in range((start + end) // 2 // 512 * 512, end, 512) if any(both[at - 512:at]))
    with pytest.raises(MtfError, match=r"^both\.bak: descriptor block at offset 0x[0-9a-f]+: expected SFMB, found "
                                       r".*: the file is truncated or was never closed \(in backup set 2, which "
                                       rf"begins at offset {start:#x}; the file's other whole sets are read\)$") as raised:
        read_backup_headers(StrictBytes("both.bak", both[:cut]))
    assert not isinstance(raised.value, MtfUnsupported)


def test_a_full_filemark_list_goes_on_in_the_oldest_filemark_it_lists(mssql_corpus: Path) -> None:
    # Once more sets are appended than the last filemark's list holds, its oldest entries are gone:
    # the oldest filemark it still lists carries the list of those before it.
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    both = append_sets(full, log, adopt_media=True)
    backup = Backup(both)
    last = len(backup.data) - 512
    marks = filemarks(both)
    assert marks[-1] == last and len(marks) == 5
    backup.put(last + 56, "<I", 2)  # only the two newest earlier filemarks kept
    assert [(h.position, h.backup_type) for h in read_backup_headers(StrictBytes("both.bak", bytes(backup.data)))] == [
        (1, "full"), (2, "log")]
    backup.put(marks[2] + 56, "<I", 0)  # and the oldest listed one lists none: the media header is out of reach
    with pytest.raises(MtfUnsupported, match=r"SFMB list of earlier filemarks at offset 0x[0-9a-f]+: expected "
                                             r"increasing sector offsets from the media header's filemark at 0x400, "
                                             rf"then two per backup set, found {marks[2]:#x}, {marks[3]:#x}, "
                                             rf"{marks[4]:#x}"):
        backup.header()


def test_a_set_numbered_out_of_place_is_unsupported(mssql_corpus: Path) -> None:
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    backup = Backup(append_sets(full, log, adopt_media=True))
    start = set_ranges(bytes(backup.data))[1][0]
    backup.put(start + 62, "<H", 3)
    with pytest.raises(MtfUnsupported, match=rf"SSET data set number at offset {start + 62:#x}: expected 2, the set's "
                                             r"place on the media, found 3"):
        read_backup_headers(StrictBytes("both.bak", bytes(backup.data)))


def test_a_flipped_byte_in_the_second_sets_block_header_is_damage(mssql_corpus: Path) -> None:
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    data = bytearray(append_sets(full, log, adopt_media=True))
    start = set_ranges(bytes(data))[1][0]
    data[start + 20] ^= 0x5A  # inside the SSET's common header: its checksum no longer matches
    with pytest.raises(MtfError, match=rf"SSET block header checksum at offset {start:#x}") as raised:
        read_backup_headers(StrictBytes("both.bak", bytes(data)))
    assert not isinstance(raised.value, MtfUnsupported)


@pytest.mark.parametrize("sectors", [0, 129])
def test_a_soft_filemark_size_out_of_range_is_unsupported(mssql_corpus: Path, sectors: int) -> None:
    backup = Backup((mssql_corpus / LOG).read_bytes())
    backup.put(64, "<H", sectors)
    with pytest.raises(MtfUnsupported, match=rf"TAPE soft filemark block size at offset 0x40: expected 1 to 128 "
                                             rf"sectors of 512 bytes, found {sectors}: .*written by a SQL Server "
                                             "version not yet read"):
        backup.header()


@pytest.mark.parametrize("size", [0, 1000])
def test_a_format_logical_block_size_not_in_sectors_is_unsupported(mssql_corpus: Path, size: int) -> None:
    backup = Backup((mssql_corpus / LOG).read_bytes())
    backup.put(84, "<H", size)
    with pytest.raises(MtfUnsupported, match=rf"TAPE format logical block size at offset 0x54: expected a multiple "
                                             rf"of 512 bytes, found {size}"):
        backup.header()


def test_a_closing_copy_whose_log_moved_back_is_unsupported(mssql_corpus: Path) -> None:
    # A busy database's closing copy may carry a later LastLSN than its head copy, never an earlier one.
    backup = Backup((mssql_corpus / LOG).read_bytes())
    head = alone(bytes(backup.data))
    backup.put(backup.chunk(1, b"SCIN") + 0x2A, "<IIH", 1, 0, 0)
    with pytest.raises(MtfUnsupported, match=rf"closing configuration copy \(last_lsn\) .*expected an LSN at or after "
                                             rf"the head copy's \({head.last_lsn} in the head copy\), found "
                                             r"1000000000000000"):
        backup.header()


def test_a_busy_databases_closing_copy_is_the_sets(mssql_corpus: Path) -> None:
    # Written to while backed up: the closing copy ends the log later and its files grew. Its values are the set's.
    backup = Backup((mssql_corpus / FULL).read_bytes())
    clean = alone(bytes(backup.data))
    scin, sfin = backup.chunk(1, b"SCIN"), backup.chunk(1, b"SFIN")
    vlf, block, slot = struct.unpack_from("<IIH", backup.data, scin + 0x2A)
    backup.put(scin + 0x2A, "<IIH", vlf, block + 7, slot)
    backup.put(sfin + 0x28, "<Q", clean.files[0].size_bytes + 65536)
    busy = backup.header()
    assert busy.last_lsn == clean.last_lsn + 700000
    assert busy.files[0].size_bytes == clean.files[0].size_bytes + 65536
    assert (busy.first_lsn, busy.checkpoint_lsn) == (clean.first_lsn, clean.checkpoint_lsn)


def test_a_small_set_without_its_closing_copy_never_reads_its_head_copy_as_one(mssql_corpus: Path) -> None:
    # In a 20 KB log the head copy lies within the closing read: it must not stand in for the closing copy.
    backup = Backup((mssql_corpus / "history/sql2016-stripe/Stripe2/restoretime_1a.trn").read_bytes())
    closing = max(at for at in range(0, len(backup.data), 512) if backup.data[at:at + 4] == b"MSLS")
    backup.rename_block(closing, b"MSTL")
    with pytest.raises(MtfUnsupported, match=r"closing configuration copy at offset 0x[0-9a-f]+: expected an MSLS/MSCI "
                                             r"block with MQCI in the 32768 bytes before the set's filemark, found none"):
        backup.header()


@pytest.mark.parametrize("copy", [0, 1])
def test_copy_only_needs_its_flag_in_both_configuration_copies(copy_only: list[bytes], copy: int) -> None:
    backup = Backup(copy_only[1])
    flags = backup.chunk(copy, b"SCIN") + 0x08
    backup.put(flags, "<I", struct.unpack_from("<I", backup.data, flags)[0] & ~0x400)
    assert backup.header().is_copy_only is None


def test_sql_server_2005_lists_its_filemarks_without_the_lists_offset(mssql_corpus: Path) -> None:
    # 2005 writes the list of earlier filemarks at +60 itself; 2008 and later put 0x48 there and the list at 0x48.
    original = (mssql_corpus / LOG).read_bytes()
    backup = Backup(original)
    for mark in (at for at in range(0, len(original), 512) if original[at:at + 4] == b"SFMB"):
        used = struct.unpack_from("<I", original, mark + 56)[0]
        backup.data[mark + 60:mark + 512] = original[mark + 72:mark + 72 + 8 * used] + bytes(452 - 8 * used)
    assert struct.unpack_from("<I", backup.data, len(original) - 512 + 60)[0] != 0x48
    assert facts(backup.header()) == facts(alone(original))


def _lsn(backup: Backup, copy: int, field: int) -> int:
    from verification.engines.mssql.mtf_config import decode_lsn
    at = backup.chunk(copy, b"SCIN") + field
    return decode_lsn(bytes(backup.data[at:at + 10]))


def _put_lsn(backup: Backup, copy: int, field: int, lsn: int) -> None:
    vlf, rest = divmod(lsn, 10**15)
    block, slot = divmod(rest, 10**5)
    backup.put(backup.chunk(copy, b"SCIN") + field, "<IIH", vlf, block, slot)


FIRST, LAST, CHECKPOINT = 0x20, 0x2A, 0x34


def test_a_2019_style_head_copy_holding_the_previous_checkpoint_reads_as_the_closing_copy(mssql_corpus: Path) -> None:
    # SQL Server 2019 and 2022 write the head copy before the backup's own checkpoint: its FirstLSN,
    # CheckpointLSN and LastLSN are the previous checkpoint's, all lower than the closing copy's.
    backup = Backup((mssql_corpus / FULL).read_bytes())
    clean = alone(bytes(backup.data))
    earlier = clean.first_lsn - 3 * 10**5
    for field in (FIRST, CHECKPOINT):
        _put_lsn(backup, 0, field, earlier)
    _put_lsn(backup, 0, LAST, earlier + 10**5)
    read = backup.header()
    assert (read.first_lsn, read.checkpoint_lsn, read.last_lsn) == (clean.first_lsn, clean.checkpoint_lsn,
                                                                    clean.last_lsn)


def test_a_full_whose_checkpoint_is_its_last_lsn_reads(mssql_corpus: Path) -> None:
    backup = Backup((mssql_corpus / FULL).read_bytes())
    checkpoint = alone(bytes(backup.data)).checkpoint_lsn
    for copy in (0, 1):
        _put_lsn(backup, copy, LAST, checkpoint)
    assert backup.header().last_lsn == checkpoint


@pytest.mark.parametrize(("field", "by", "name", "rule"), [
    (FIRST, 1, "first_lsn", r"FirstLSN <= CheckpointLSN \d+ <= LastLSN \d+"),
    (CHECKPOINT, -1, "checkpoint_lsn", r"an LSN at or after the head copy's"),
    (LAST, -1, "last_lsn", r"an LSN at or after the head copy's"),
])
def test_a_full_whose_closing_copy_breaks_a_rule_is_unsupported(mssql_corpus: Path, field: int, by: int, name: str,
                                                                  rule: str) -> None:
    backup = Backup((mssql_corpus / FULL).read_bytes())
    header = alone(bytes(backup.data))
    moved = {FIRST: header.checkpoint_lsn + 1, CHECKPOINT: header.checkpoint_lsn - 1, LAST: header.last_lsn - 1}
    _put_lsn(backup, 1, field, moved[field])
    assert by and re.fullmatch(rf"backup\.trn: closing configuration copy \({name}\) at offset 0x[0-9a-f]+: expected {rule} "
                               rf"\(\d+ in the head copy\), found {moved[field]}", backup.unsupported())


def test_a_log_backup_starts_where_its_head_copy_says(mssql_corpus: Path) -> None:
    backup = Backup((mssql_corpus / LOG).read_bytes())
    first = _lsn(backup, 1, FIRST)
    _put_lsn(backup, 1, FIRST, first - 1)
    assert re.fullmatch(rf"backup\.trn: closing configuration copy \(first_lsn\) at offset 0x[0-9a-f]+: expected the "
                        rf"LSN the log backup started at \({first} in the head copy\), found {first - 1}",
                        backup.unsupported())


def test_a_closing_copy_of_another_database_family_is_unsupported(mssql_corpus: Path) -> None:
    backup = Backup((mssql_corpus / LOG).read_bytes())
    backup.put(backup.chunk(1, b"SCIN") + 0xE0, "<I", 0x12345678)
    assert re.fullmatch(r"backup\.trn: closing configuration copy \(family_guid\) at offset 0x[0-9a-f]+: expected the "
                        r"same backup \([0-9a-f-]+ in the head copy\), found 12345678-[0-9a-f-]+", backup.unsupported())


@pytest.mark.parametrize(("field", "value"), [(0x28, -8192), (0x14, 7)], ids=["shrunk", "other-file-id"])
def test_a_closing_copy_whose_files_shrank_or_changed_is_unsupported(mssql_corpus: Path, field: int,
                                                                      value: int) -> None:
    backup = Backup((mssql_corpus / LOG).read_bytes())
    sfin = backup.chunk(1, b"SFIN")
    if field == 0x28:
        backup.put(sfin + field, "<Q", struct.unpack_from("<Q", backup.data, sfin + field)[0] + value)
    else:
        backup.put(sfin + field, "<H", value)
    assert re.fullmatch(r"backup\.trn: closing configuration copy \(files\) at offset 0x[0-9a-f]+: expected the "
                        r"same files, none smaller \(.*\), found .*", backup.unsupported())


class CountingBytes(StrictBytes):
    def __init__(self, name: str, data: bytes) -> None:
        super().__init__(name, data)
        self.reads: list[tuple[int, int]] = []

    def read(self, offset: int, length: int) -> bytes:
        self.reads.append((offset, length))
        return super().read(offset, length)


@pytest.mark.parametrize("rel", [FULL, LOG])
def test_a_one_set_file_is_read_in_two_reads_its_head_and_its_end(mssql_corpus: Path, rel: str) -> None:
    data = (mssql_corpus / rel).read_bytes()
    reader = CountingBytes("one.bak", data)
    read_backup_headers(reader)
    assert len(reader.reads) == 2 and reader.reads[0] == (0, 16384)
    offset, length = reader.reads[1]
    assert offset + length == len(data) and length <= 16384


def test_a_one_set_file_of_4096_byte_blocks_is_read_in_two_reads(copy_only: list[bytes]) -> None:
    reader = CountingBytes("one.bak", copy_only[0])
    read_backup_headers(reader)
    assert [offset + length for offset, length in reader.reads] == [16384, len(copy_only[0])]


def test_corrupt_files_counted_at_the_end_of_the_set_mark_it_damaged(mssql_corpus: Path) -> None:
    backup = Backup((mssql_corpus / LOG).read_bytes())
    assert backup.header().is_damaged is None  # none counted: not proof of the opposite
    eset = next(at for at in range(len(backup.data) - 4096, len(backup.data), 512) if backup.data[at:at + 4] == b"ESET")
    backup.put(eset + 56, "<I", 1)
    assert backup.header().is_damaged is True


@pytest.mark.parametrize("which", ["data", "media"])
def test_a_listed_filemark_that_is_another_block_is_unsupported(mssql_corpus: Path, which: str) -> None:
    backup = Backup((mssql_corpus / LOG).read_bytes())
    marks = filemarks(bytes(backup.data))
    at = marks[1] if which == "data" else marks[0]
    backup.rename_block(at, b"ESPB")
    assert re.fullmatch(rf"backup\.trn: descriptor block at offset {at:#x}: expected SFMB, found b'ESPB'",
                        backup.unsupported())


def test_a_block_type_neither_mtf_nor_sql_server_defines_is_unsupported(mssql_corpus: Path) -> None:
    backup = Backup((mssql_corpus / LOG).read_bytes())
    backup.rename_block(0xA00, b"QQQQ")  # the set's VOLB block
    assert backup.unsupported() == ("backup.trn: descriptor block at offset 0xa00: expected a block type MTF or SQL "
                                    "Server defines, found b'QQQQ'")


def test_a_writer_no_sample_proves_is_named_by_its_version_alone(mssql_corpus: Path) -> None:
    header = alone((mssql_corpus / FULL).read_bytes())
    later = dataclasses.replace(header, software_version=(15, 0), software_build=4138)
    assert (later.writer, later.layout_proven) == ("SQL Server 15.0.4138", False)
    assert dataclasses.replace(header, software_build=None).writer == "SQL Server 10.50 (SQL Server 2008 R2)"


def _two_sets(mssql_corpus: Path) -> tuple[Backup, list[int]]:
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    both = append_sets(full, log, adopt_media=True)
    return Backup(both), filemarks(both)


@pytest.mark.parametrize("step", ["last", "followed"])
def test_a_filemark_list_overrunning_its_block_is_unsupported(mssql_corpus: Path, step: str) -> None:
    backup, marks = _two_sets(mssql_corpus)
    if step == "followed":  # the last filemark lists two; the older one it leads to claims too many
        backup.put(marks[4] + 56, "<I", 2)
    at = marks[4] if step == "last" else marks[2]
    backup.put(at + 56, "<I", 56)  # 56 entries from +0x48: 8 bytes past a 512-byte filemark
    assert backup.unsupported() == (f"backup.trn: SFMB list of earlier filemarks at offset {at + 56:#x}: expected a "
                                    "list within the 512-byte filemark, found 56 entries at +0x48")


def test_a_filemark_list_filling_its_block_exactly_is_read_as_far_as_it_lists(mssql_corpus: Path) -> None:
    # 55 entries from +0x48 end exactly at the end of a 512-byte filemark: read, and the zeros past the
    # real entries said as what they are, not as a list running past the block.
    backup, marks = _two_sets(mssql_corpus)
    backup.put(marks[4] + 56, "<I", 55)
    assert "expected increasing sector offsets from the media header's filemark" in backup.unsupported()


def test_a_followed_filemark_that_is_another_block_is_unsupported(mssql_corpus: Path) -> None:
    backup, marks = _two_sets(mssql_corpus)
    second_set = marks[2] + 512
    backup.put(marks[4] + 56, "<I", 2)
    backup.put(marks[4] + 72 + 8, "<Q", second_set)  # the oldest listed entry: the second set's SSET block
    assert backup.unsupported() == (f"backup.trn: descriptor block at offset {second_set:#x}: expected SFMB, "
                                    "found b'SSET'")


def test_the_filemark_ending_a_set_before_the_last_must_be_one(mssql_corpus: Path) -> None:
    backup, marks = _two_sets(mssql_corpus)
    backup.rename_block(marks[2], b"ESPB")
    assert backup.unsupported() == (f"backup.trn: descriptor block at offset {marks[2]:#x}: expected SFMB, found "
                                    f"b'ESPB' (in backup set 1, which begins at offset {marks[0] + 512:#x}; the "
                                    "file's other whole sets are read)")
    # That filemark also opens set 2, so neither set is read; the first is what is said.
    found = read_media(StrictBytes("backup.trn", bytes(backup.data)))
    assert found.headers == [] and found.set_number == 1


def test_a_set_in_the_middle_not_read_leaves_the_others_read(mssql_corpus: Path) -> None:
    # Set 2 of three names a backup type the reader does not read: sets 1 and 3 are read by the list.
    full, log = ((mssql_corpus / rel).read_bytes() for rel in (FULL, LOG))
    data = bytearray(append_sets(full, log, full, adopt_media=True))
    start, end = set_ranges(bytes(data))[1]
    for at in [m.start() + start for m in re.finditer(b"SCIN", data[start:end])]:
        data[at + 0x57] = ord("F")
    found = read_media(StrictBytes("three.bak", bytes(data)))
    assert [h.position for h in found.headers] == [1, 3] and found.set_number == 2
    assert isinstance(found.problem, MtfUnsupported) and "(in backup set 2, " in str(found.problem)
    assert found.identity is not None and found.identity.backup_type == "type 'F'"
