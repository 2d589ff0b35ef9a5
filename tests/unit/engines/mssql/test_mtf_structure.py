"""The MTF reader against structural faults that keep every checksum valid.

A real log backup of the corpus is edited the way a buggy writer, another tool or tampering would
leave it: a field changed and the block or stream header checksum recomputed, so the checksum test
passes and the reader's structural checks alone must catch the fault, or read the value exactly as
stored. Each error is asserted word for word: file, offset, what was expected, what was found.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.engines.mssql.mtf_edit import Backup, StrictBytes, resize_stream
from verification.engines.mssql.mtf import (
    BackupHeader,
    MtfError,
    header_checksum,
    read_backup_header,
    read_trailer_identity,
    stream_checksum,
)
from verification.engines.mssql.mtf_config import decode_lsn

NAME = "RestoreTimeClean2_1.trn"
MSCI_HEAD, MSLS_TRAILER = 0xE00, 0x12600  # where SQL Server put the two configuration copies in this file


@pytest.fixture()
def original(mssql_corpus: Path) -> bytes:
    return (mssql_corpus / "RestoreTimeClean" / NAME).read_bytes()


@pytest.fixture()
def backup(original: bytes) -> Backup:
    return Backup(original)


@pytest.fixture()
def clean(original: bytes) -> BackupHeader:
    return read_backup_header(StrictBytes(NAME, original))


def test_the_layout_these_edits_rely_on(backup: Backup, clean: BackupHeader) -> None:
    assert backup.streams(b"MQCI") == [MSCI_HEAD + 0x38, MSLS_TRAILER + 0x38]
    assert backup.streams(b"RAID") == [0x8C]
    assert (clean.database_name, clean.backup_type, clean.family_count, clean.family_number) == (
        "RestoreTimeClean", "log", 1, 1)
    assert [f.file_id for f in clean.files] == [1, 2]


def test_every_field_is_read_unsigned_as_stored(backup: Backup, clean: BackupHeader) -> None:
    backup.in_both_copies(b"SCIN", 0x08, "<I", clean.flags | 0x8000_0000)
    backup.in_both_copies(b"SCIN", 0x5E, "<H", 0x8295)
    backup.in_both_copies(b"SFIN", 0x14, "<H", 0x8001)
    backup.in_both_copies(b"SFIN", 0x28, "<Q", 0x8000_0000_0000_2000)
    raid = backup.streams(b"RAID")[0] + 22
    backup.put(raid + 20, "<H", 0x8002)
    backup.put(raid + 24, "<H", 0x8001)
    header = backup.header(NAME)
    assert header.flags == clean.flags | 0x8000_0000 and header.has_checksums == clean.has_checksums
    assert header.database_version == 0x8295
    assert (header.files[0].file_id, header.files[0].size_bytes) == (0x8001, 0x8000_0000_0000_2000)
    assert (header.family_count, header.family_number) == (0x8002, 0x8001)
    assert header.files[1] == clean.files[1]


def test_lsn_fields_are_unsigned() -> None:
    assert decode_lsn(b"\xff" * 10) == 0xFFFF_FFFF * 10**15 + 0xFFFF_FFFF * 10**5 + 0xFFFF
    assert decode_lsn(struct.pack("<IIH", 25, 132, 1)) == 25000000013200001


def test_checksums_are_xors_of_unsigned_words() -> None:
    assert stream_checksum(b"\xff\xff" + b"\x00" * 18 + b"\x00\x00") == 0xFFFF
    assert stream_checksum(struct.pack("<10H", 0x8001, 0x8002, *([0] * 8))) == 0x0003
    assert header_checksum(struct.pack("<25H", 0xF000, *([0] * 23), 0x0F00)) == 0xFF00


def test_a_stream_header_whose_checksum_has_the_high_bit_reads(backup: Backup, clean: BackupHeader) -> None:
    spad = backup.streams(b"SPAD")[0]
    checksum = struct.unpack_from("<H", backup.data, spad + 20)[0]
    if checksum < 0x8000:  # flip the high bit of the unused attribute word, and so of the checksum
        backup.put(spad + 4, "<H", struct.unpack_from("<H", backup.data, spad + 4)[0] ^ 0x8000)
        backup.fix_stream(spad)
    assert struct.unpack_from("<H", backup.data, spad + 20)[0] >= 0x8000
    assert backup.header(NAME) == clean


def test_a_name_that_is_not_utf16_is_named_with_the_replacement_character(backup: Backup) -> None:
    _size, offset = struct.unpack_from("<HH", backup.data, backup.chunk(0, b"SCIN") + 0x68)
    backup.in_both_copies(b"SCIN", offset, "<H", 0xD800)  # a lone high surrogate
    assert backup.header(NAME).database_name == "\ufffd" + "RestoreTimeClean"[1:]


def test_a_name_running_past_its_chunk_is_refused(backup: Backup) -> None:
    scin = backup.chunk(0, b"SCIN")
    _size, offset = struct.unpack_from("<HH", backup.data, scin + 0x68)
    backup.put(scin + 0x68, "<HH", 0xFFFE, offset)
    assert backup.unsupported(NAME) == (
        f"{NAME}: MQCI configuration stream at offset {MSCI_HEAD:#x}: expected well-formed chunks, found "
        f"b'SCIN' string at +{offset:#x} (65534 bytes) runs past its 410-byte chunk")


def test_a_configuration_stream_without_its_scin_chunk(backup: Backup) -> None:
    at = backup.chunk(0, b"SCIN")
    backup.data[at:at + 4] = b"SCIX"
    assert backup.unsupported(NAME) == (
        f"{NAME}: MQCI configuration stream at offset {MSCI_HEAD:#x}: expected an SCIN chunk, found none")


def test_a_closing_copy_without_its_scin_chunk(backup: Backup) -> None:
    at = backup.chunk(1, b"SCIN")
    backup.data[at:at + 4] = b"SCIX"
    message = (f"{NAME}: MQCI configuration stream at offset {MSLS_TRAILER:#x}: expected an SCIN chunk, "
               "found none")
    assert backup.unsupported(NAME) == message
    assert read_trailer_identity(StrictBytes(NAME, backup.data)) is None


def split_chunk(backup: Backup, copy: int, tag: bytes, keep: int) -> None:
    """Cut a chunk to `keep` bytes and fill the rest of its room with an unknown chunk."""
    at = backup.chunk(copy, tag)
    size = struct.unpack_from("<I", backup.data, at + 4)[0]
    backup.put(at + 4, "<I", keep)
    backup.data[at + keep:at + keep + 4] = b"XPAD"
    backup.put(at + keep + 4, "<I", size - keep)


def test_an_scin_chunk_shorter_than_its_fixed_part(backup: Backup) -> None:
    split_chunk(backup, 0, b"SCIN", 0x6C)
    assert backup.unsupported(NAME) == (
        f"{NAME}: SCIN chunk at offset {MSCI_HEAD:#x}: expected at least 112 bytes, found 108 bytes")


def test_an_scin_chunk_of_exactly_its_fixed_part_is_read_up_to_its_names(backup: Backup) -> None:
    split_chunk(backup, 0, b"SCIN", 0x70)
    assert backup.unsupported(NAME) == (
        f"{NAME}: MQCI configuration stream at offset {MSCI_HEAD:#x}: expected well-formed chunks, found "
        "b'SCIN' string at +0x16c (32 bytes) runs past its 112-byte chunk")


def test_an_unknown_backup_type(backup: Backup) -> None:
    backup.in_both_copies(b"SCIN", 0x57, "<B", ord("X"))
    assert backup.unsupported(NAME) == f"{NAME}: SCIN backup type at offset {MSCI_HEAD:#x}: expected D, I or L, found 'X'"


def test_a_database_file_chunk_too_short_to_read_is_never_dropped(backup: Backup) -> None:
    split_chunk(backup, 0, b"SFIN", 0x37)
    assert backup.unsupported(NAME) == (
        f"{NAME}: SFIN chunk at offset {MSCI_HEAD:#x}: expected at least 56 bytes, found 55 bytes")


def test_a_database_file_chunk_of_exactly_its_fixed_part_reads(backup: Backup, clean: BackupHeader) -> None:
    for copy in (0, 1):
        split_chunk(backup, copy, b"SFIN", 0x38)
        at = backup.chunk(copy, b"SFIN")
        backup.put(at + 0x30, "<HHHH", 0, 0x38, 0, 0x38)  # both names empty, at the chunk's end
    header = backup.header(NAME)
    assert header.files[0] == replace(clean.files[0], logical_name="", physical_name="")


@pytest.mark.parametrize(("keep", "found"), [(0x7FFF_FFF0, "2147483632"), (0xFFFF_FFF0, "4294967280"), (4, "4")])
def test_a_chunk_claiming_more_or_less_than_its_room(backup: Backup, keep: int, found: str) -> None:
    at = backup.chunk(0, b"SFGI")
    backup.put(at + 4, "<I", keep)
    assert backup.unsupported(NAME) == (
        f"{NAME}: MQCI configuration stream at offset {MSCI_HEAD:#x}: expected well-formed chunks, found "
        f"chunk b'SFGI' at +0x19a claims {found} bytes, 2558 left in the stream")


def test_bytes_after_the_last_chunk(backup: Backup) -> None:
    last = backup.chunk(0, b"SFIN", 1)
    backup.put(last + 4, "<I", 1256 - 5)
    assert backup.unsupported(NAME) == (
        f"{NAME}: MQCI configuration stream at offset {MSCI_HEAD:#x}: expected well-formed chunks, found "
        "5 byte(s) after the last chunk, at +0xb93")


SSET, SSET_SPAD = 0x600, 0x690  # the set's first block, and the pad stream that ends it


def test_a_block_header_ending_exactly_at_the_end_of_the_head_is_read(backup: Backup) -> None:
    # The set block's pad stream is lengthened so that the next block's 52-byte header ends exactly at
    # the end of the set's head: it is read (and its bytes, data, fail the header checksum).
    backup.stream_length(SSET_SPAD, SSET + 16384 - 52 - (SSET_SPAD + 22))
    stored = struct.unpack_from("<H", backup.data, SSET + 16384 - 2)[0]
    computed = header_checksum(bytes(backup.data[SSET + 16384 - 52:SSET + 16384]))
    kind = bytes(backup.data[SSET + 16384 - 52:SSET + 16384 - 48]).decode("latin-1")
    assert backup.error(NAME) == (f"{NAME}: {kind} block header checksum at offset {SSET + 16384 - 52:#x}: "
                                  f"expected {computed:#06x}, found {stored:#06x}")


def test_a_closing_copy_running_past_the_end_of_the_file(backup: Backup) -> None:
    mqci = backup.streams(b"MQCI")[1]
    length = len(backup.data) - (mqci + 22) + 10
    backup.stream_length(mqci, length)
    after = (mqci + 22 + length + 3) & ~3
    assert backup.error(NAME) == (
        f"{NAME}: structure at offset {after:#x}: expected 22 bytes within the file, found the end of the file at "
        f"{len(backup.data):#x}: the file is truncated")


def test_a_media_header_without_its_media_set(backup: Backup) -> None:
    backup.rename_stream(backup.streams(b"RAID")[0], b"RAIX")
    assert backup.unsupported(NAME) == f"{NAME}: TAPE block at offset 0x0: expected a RAID stream (media set), found none"




def test_a_media_set_stream_too_short_to_hold_the_family(backup: Backup, clean: BackupHeader) -> None:
    raid = backup.streams(b"RAID")[0]
    short = Backup(bytes(backup.data))
    resize_stream(backup, raid, 26)
    assert backup.header(NAME) == clean
    resize_stream(short, raid, 25)
    assert short.unsupported(NAME) == f"{NAME}: RAID stream at offset 0x0: expected at least 26 bytes, found 25 bytes"


def test_a_configuration_block_without_its_configuration_stream(backup: Backup) -> None:
    backup.rename_stream(backup.streams(b"MQCI")[0], b"MQCX")
    assert backup.unsupported(NAME) == f"{NAME}: MSCI block at offset {MSCI_HEAD:#x}: expected an MQCI stream, found none"


@pytest.mark.parametrize("after", [0x8000, 16384 - 51])
def test_a_head_without_a_configuration_block_lists_what_it_holds(backup: Backup, after: int) -> None:
    # The set block's pad says the next block lies past the set's head, or so that its header ends a
    # byte past it: not read, and the blocks that were are listed.
    backup.stream_length(SSET_SPAD, SSET + after - (SSET_SPAD + 22))
    assert backup.unsupported(NAME) == (f"{NAME}: backup set header at offset {SSET + after:#x}: expected an MSCI "
                                        "block in the set's first 16384 bytes, found blocks SSET")


def test_chunks_of_only_a_header_are_read_wherever_they_are(backup: Backup, clean: BackupHeader) -> None:
    # The filegroup chunk gives up 8 of its zero bytes (its name moved 8 bytes down, its pointer with it)
    # to a header-only chunk after it: once where it is, in the middle of the stream, and once moved to
    # the very end of the stream.
    scin, sfgi, files_end = backup.chunk(0, b"SCIN"), backup.chunk(0, b"SFGI"), backup.chunk(0, b"SFIN", 1) + 1256
    groups = bytearray(backup.data[sfgi:sfgi + 62])
    assert groups[0x28:0x30] == bytes(8) and groups[0x30:] == "PRIMARY".encode("utf-16le")
    groups[0x28:0x36] = groups[0x30:0x3E]
    struct.pack_into("<I", groups, 4, 54)
    struct.pack_into("<H", groups, 0x12, 0x28)
    shrunk = bytes(groups[:54]) + b"XEMP" + struct.pack("<I", 8)
    middle = Backup(bytes(backup.data))
    middle.data[sfgi:sfgi + 62] = shrunk
    assert middle.header(NAME) == clean
    backup.data[sfgi:files_end] = backup.data[sfgi + 62:files_end] + shrunk
    assert backup.chunk(0, b"XEMP") == files_end - 8 and scin < sfgi
    assert backup.header(NAME) == clean


def test_a_stream_longer_than_the_file_is_damage(backup: Backup) -> None:
    # The media header's pad stream claims more bytes than the file holds: the filemark after it is
    # past the end of the file.
    spad = backup.streams(b"SPAD")[0]
    backup.stream_length(spad, 0xFFFF_FFFF_FFFF_FF00)
    filemark = spad + 22 + 0xFFFF_FFFF_FFFF_FF00
    assert backup.error(NAME) == (f"{NAME}: descriptor block at offset {filemark:#x}: expected a complete 52-byte "
                                  f"header, found end of data (file is {len(backup.data)} bytes: truncated?)")


def test_a_backup_set_without_its_set_block(backup: Backup) -> None:
    backup.rename_block(SSET, b"DIRB")
    assert backup.unsupported(NAME) == f"{NAME}: descriptor block at offset 0x600: expected SSET, found b'DIRB'"


def test_a_block_with_too_many_streams(backup: Backup) -> None:
    first = 0x8C  # the TAPE block's first stream
    for n in range(64):
        at = first + 24 * n
        backup.data[at:at + 22] = b"XSTR" + bytes(18)
        backup.fix_stream(at)
    backup.data[first + 24 * 64:first + 24 * 64 + 22] = b"SPAD" + bytes(18)
    backup.fix_stream(first + 24 * 64)
    assert backup.unsupported(NAME) == f"{NAME}: stream list at offset 0x0: expected an SPAD stream ending the block, found none"


def test_a_set_continued_on_another_medium_is_unsupported(backup: Backup) -> None:
    # EOTM (end of medium) where the set's end belongs: the set goes on in another file.
    backup.rename_block(0x13400, b"EOTM")
    assert backup.unsupported(NAME) == f"{NAME}: descriptor block at offset 0x13400: expected ESET, found b'EOTM'"


def test_the_closing_copy_may_sit_in_an_msci_block(backup: Backup, clean: BackupHeader) -> None:
    backup.rename_block(MSLS_TRAILER, b"MSCI")
    assert backup.header(NAME) == clean


def test_the_closing_copy_is_found_at_the_first_block_of_the_trailer(original: bytes, clean: BackupHeader) -> None:
    # Pad the file between the closing copy and the filemark after it, so that the copy starts
    # exactly 32 KiB (the closing read) before that filemark, which the last filemark's list follows.
    filemark = 0x13200
    padding = 32768 - (filemark - MSLS_TRAILER)
    padded = Backup(original[:filemark] + bytes(padding) + original[filemark:])
    last = len(padded.data) - 512
    assert struct.unpack_from("<2Q", padded.data, last + 72) == (filemark, 0x400)
    padded.put(last + 72, "<Q", filemark + padding)
    header = padded.header(NAME)
    assert header == replace(clean, size_bytes=len(padded.data), set_end=clean.set_end + padding)
    assert read_trailer_identity(StrictBytes(NAME, bytes(padded.data))) is not None


@pytest.mark.parametrize("length", [0, 100, 16384, 20000])
def test_short_files_never_cause_an_empty_or_out_of_range_read(original: bytes, length: int) -> None:
    with pytest.raises(MtfError, match=rf"^{NAME}: "):
        read_backup_header(StrictBytes(NAME, original[:length]))


def test_a_closing_block_whose_first_stream_lies_past_the_file(backup: Backup) -> None:
    # The closing block's first-stream offset points at the last 22 bytes of the file (zeros, a stream
    # header of length 0 by its checksum): the stream after it would lie past the end.
    size = len(backup.data)
    backup.put(MSLS_TRAILER + 8, "<H", size - 22 - MSLS_TRAILER)
    backup.fix_block(MSLS_TRAILER)
    assert backup.error(NAME) == (f"{NAME}: structure at offset {size:#x}: expected 22 bytes within the file, found "
                                  f"the end of the file at {size:#x}: the file is truncated")
