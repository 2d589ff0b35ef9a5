"""Offline page verification of the real SQL Server full and differential backups (../shared/testdata),
and of copies damaged the ways a disk, a torn write or a buggy copy would damage them."""

from __future__ import annotations

import csv
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import MSSQL_CORPUS
from verification.engines.mssql import pages as pages_module
from verification.engines.mssql.mtf import MtfError, NeedsServerHeaderOnly, read_backup_header
from verification.engines.mssql.pages import (
    PAGE,
    SECTOR,
    PageFinding,
    PageScan,
    decode_header,
    locate_data_streams,
    page_checksum,
    page_checksums,
    scan_pages,
    scan_set,
)
from verification.sources import LocalSource
from verification.sources.base import SourceFile

real_overlapped = pages_module._scan_overlapped

# file: pages in its data stream, pages with a checksum (all verified), pages without one
# (formatted, flag 0x200 clear), all-zero pages, pages of stale never-formatted bytes.
CORPUS = {
    "DoubleDiffing/difftest-diff1.bak": (48, 44, 2, 2, 0),
    "DoubleDiffing/difftest-diff2.bak": (48, 44, 2, 2, 0),
    "DoubleDiffing/difftest-full.bak": (184, 168, 4, 2, 10),
    "OlaMsFilter/Simple/test_FULL_20160629_141300.bak": (184, 170, 4, 10, 0),
    "OlaMsFilter/Simple/test_FULL_20160629_141320.bak": (184, 170, 4, 10, 0),
    "OlaMsFilter/complex/Diff/test_DIFF_20160629_141600.bak": (32, 28, 2, 2, 0),
    "OlaMsFilter/complex/Diff/test_DIFF_20160629_141900.bak": (32, 28, 2, 2, 0),
    "OlaMsFilter/complex/Diff/test_DIFF_20160629_142500.bak": (32, 28, 2, 2, 0),
    "OlaMsFilter/complex/Diff/test_DIFF_20160629_142800.bak": (32, 28, 2, 2, 0),
    "OlaMsFilter/complex/Full/test_FULL_20160629_141300.bak": (184, 170, 4, 10, 0),
    "OlaMsFilter/complex/Full/test_FULL_20160629_142200.bak": (184, 170, 4, 10, 0),
    "RestoreTimeClean/RestoreTimeClean.bak": (168, 159, 4, 5, 0),
    "RestoreTimeClean/RestoreTimeClean2.bak": (56, 52, 2, 2, 0),
    "backuppassword/passwd.bak": (184, 170, 4, 10, 0),
    "detachattach/detachattach.bak": (160, 154, 4, 2, 0),
    "history/sql2016-stripe/Stripe1/restoretime.bak": (168, 133, 1, 34, 0),
    "history/sql2016-stripe/Stripe1/restoretime2.bak": (168, 138, 1, 29, 0),
    "history/sql2016-stripe/Stripe2/restoretime1.bak": (168, 156, 1, 11, 0),
    "history/sql2016-stripe/Stripe2/restoretime2a.bak": (168, 151, 1, 16, 0),
    "restoretimeclean2016/RestoreTimeClean.bak": (296, 289, 2, 4, 1),
    "restoretimeclean2016/RestoreTimeClean2.bak": (80, 69, 2, 2, 7),
    "singlerestore/singlerestore.bak": (168, 159, 4, 5, 0),
    "singlerestore/testlastbackup.bak": (160, 154, 4, 2, 0),
    "sql2008-backups/Cube_Query_History/DIFF/SQL2008_Cube_Query_History_DIFF_20170518_041819.bak": (128, 124, 2, 2, 0),
    "sql2008-backups/Cube_Query_History/DIFF/SQL2008_Cube_Query_History_DIFF_20170518_041826.bak": (128, 124, 2, 2, 0),
    "sql2008-backups/Cube_Query_History/FULL/SQL2008_Cube_Query_History_FULL_20170518_041737.bak": (256, 249, 4, 3, 0),
    "sql2008-backups/DBWithoutOwner/DIFF/SQL2008_DBWithoutOwner_DIFF_20170518_041819.bak": (32, 28, 2, 2, 0),
    "sql2008-backups/DBWithoutOwner/DIFF/SQL2008_DBWithoutOwner_DIFF_20170518_041826.bak": (32, 28, 2, 2, 0),
    "sql2008-backups/DBWithoutOwner/FULL/SQL2008_DBWithoutOwner_FULL_20170518_041741.bak": (168, 161, 4, 3, 0),
    "sql2008-backups/Noextension.bak": (168, 159, 4, 5, 0),
    "sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe.bak": (96, 75, 11, 10, 0),
    "sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe2.bak": (96, 88, 3, 5, 0),
    "sql2008-backups/RestoreTimeStripe/Stripe2/RestoreTimeStripe1.bak": (96, 95, 1, 0, 0),
    "sql2008-backups/RestoreTimeStripe/Stripe2/RestoreTimeStripe2a.bak": (96, 82, 9, 5, 0),
    "sql2008-backups/SimpleRecovery/SimpleBackTest_1.bak": (64, 60, 2, 2, 0),
    "sql2008-backups/SimpleRecovery/SimpleBackTest_2.bak": (64, 60, 2, 2, 0),
    "sql2008-backups/SimpleRecovery/SimpleBacktest.bak": (184, 170, 4, 10, 0),
    "sql2008-backups/StopAt/StopAt.bak": (176, 166, 5, 5, 0),
    "sql2008-backups/db1/DIFF/SQL2008_db1_DIFF_20170518_041819.bak": (128, 124, 2, 2, 0),
    "sql2008-backups/db1/DIFF/SQL2008_db1_DIFF_20170518_041826.bak": (128, 124, 2, 2, 0),
    "sql2008-backups/db2/DIFF/SQL2008_db2_DIFF_20170518_041819.bak": (32, 28, 2, 2, 0),
    "sql2008-backups/db2/FULL/SQL2008_db2_FULL_20170518_041738.bak": (168, 162, 4, 2, 0),
    "sql2008-backups/db3/FULL/SQL2008_db3_FULL_20170518_041739.bak": (168, 161, 4, 3, 0),
    "sql2008-backups/dbOrphanUsers/DIFF/SQL2008_dbOrphanUsers_DIFF_20170518_041819.bak": (32, 28, 2, 2, 0),
    "sql2008-backups/dbOrphanUsers/DIFF/SQL2008_dbOrphanUsers_DIFF_20170518_041826.bak": (32, 28, 2, 2, 0),
    "sql2008-backups/dbOrphanUsers/FULL/SQL2008_dbOrphanUsers_FULL_20170518_041740.bak": (168, 161, 4, 3, 0),
    "sql2008-backups/dbareports/DIFF/SQL2008_dbareports_DIFF_20170518_041819.bak": (56, 46, 2, 8, 0),
    "sql2008-backups/dbareports/DIFF/SQL2008_dbareports_DIFF_20170518_041826.bak": (56, 46, 2, 8, 0),
    "sql2008-backups/dbareports/FULL/SQL2008_dbareports_FULL_20170518_041739.bak": (208, 194, 3, 11, 0),
    "sql2008-backups/ft1/DIFF/SQL2008_ft1_DIFF_20170518_041819.bak": (32, 28, 2, 2, 0),
    "sql2008-backups/ft1/DIFF/SQL2008_ft1_DIFF_20170518_041826.bak": (32, 28, 2, 2, 0),
    "sql2008-backups/ft1/FULL/SQL2008_ft1_FULL_20170518_041742.bak": (168, 159, 4, 5, 0),
}
# Natively compressed (MSSQLBAK, not MTF): their pages are out of reach offline, said so by an error.
COMPRESSED = ("history/compressed/SharePoint_Config_a.bak", "history/compressed/SharePoint_Config_b.bak")
FULL = "RestoreTimeClean/RestoreTimeClean.bak"  # 2008 R2, 168 pages from offset 0x1e00; files 1 (288 pages), 2
FULL_FILES = {1: 288, 2: 72}


def manifest_files() -> list[str]:
    path = MSSQL_CORPUS / "MANIFEST.tsv"
    if not path.exists():
        return []
    with path.open() as handle:
        return [row["file"] for row in csv.DictReader(handle, delimiter="\t")]


def scan(root: Path, rel: str, files: dict[int, int] | None = None) -> PageScan:
    return scan_pages(SourceFile(LocalSource(root), rel), files)


def listed_files(root: Path, rel: str) -> dict[int, int]:
    """The database's files as the backup lists them: file id -> size in pages."""
    return {f.file_id: f.size_bytes // PAGE for f in read_backup_header(SourceFile(LocalSource(root), rel)).files}


def test_every_full_and_differential_backup_is_in_the_table(mssql_corpus):
    # No backup is left out silently: every .bak is walked below or named as compressed.
    assert sorted(f for f in manifest_files() if f.endswith(".bak")) == sorted([*CORPUS, *COMPRESSED])


@pytest.mark.parametrize("rel", sorted(CORPUS))
def test_every_checksummed_page_of_the_corpus_verifies(mssql_corpus, rel):
    # Checked against the files the backup lists, and (the allocation rule) against its PFS pages.
    result = scan(mssql_corpus, rel, listed_files(mssql_corpus, rel))
    pages, checksummed, without, zeroed, unformatted = CORPUS[rel]
    assert (result.pages, result.checksummed, result.without_checksum, result.zeroed, result.unformatted) == (
        pages, checksummed, without, zeroed, unformatted)
    assert result.findings == ()
    assert result.torn_page_protected == 0  # no formatted page of the corpus relies on torn-page bits
    assert sum(result.by_type.values()) == pages - zeroed - unformatted
    assert result.stale == 0
    assert result.bytes_checked == pages * PAGE
    assert scan(mssql_corpus, rel) == result  # without the file list: the same, nothing to report either


@pytest.mark.parametrize("rel", sorted(CORPUS))
def test_the_bulk_checksum_is_the_reference_one_on_every_page(mssql_corpus, rel):
    # Every page of the stream, stale and zero pages too: the numpy path computes what the plain one does.
    data = (mssql_corpus / rel).read_bytes()
    for stream in locate_data_streams(SourceFile(LocalSource(mssql_corpus), rel)):
        block = data[stream.offset:stream.offset + stream.pages * PAGE]
        words = np.frombuffer(block, dtype="<u4").reshape(stream.pages, 16, 128)
        assert page_checksums(words).tolist() == [page_checksum(block[k * PAGE:(k + 1) * PAGE])
                                                  for k in range(stream.pages)]


@pytest.mark.parametrize("rel", [FULL, "sql2008-backups/db1/DIFF/SQL2008_db1_DIFF_20170518_041819.bak",
                                 "DoubleDiffing/difftest-full.bak"])
@pytest.mark.parametrize("workers", [1, 2])
def test_small_reads_give_the_same_answer(mssql_corpus, monkeypatch, rel, workers):
    # The corpus files fit one read; here every read is 2 extents, so extents meet across reads,
    # checked inline (1 worker) and by threads reading ahead (2), whose blocks are merged in order.
    whole = scan(mssql_corpus, rel, listed_files(mssql_corpus, rel))
    monkeypatch.setattr(pages_module, "READ_PAGES", 16)
    monkeypatch.setattr(pages_module, "WORKERS", workers)
    overlapped = []
    monkeypatch.setattr(pages_module, "_scan_overlapped", lambda *args: (
        overlapped.append(True), real_overlapped(*args))[1])
    assert scan(mssql_corpus, rel, listed_files(mssql_corpus, rel)) == whole
    assert overlapped == ([True] if workers > 1 else [])


@pytest.mark.parametrize("rel", COMPRESSED)
def test_compressed_backups_are_out_of_reach_and_said_so(mssql_corpus, rel):
    with pytest.raises(NeedsServerHeaderOnly, match="natively compressed"):
        scan(mssql_corpus, rel)


def test_a_log_backup_has_no_data_pages(mssql_corpus):
    with pytest.raises(MtfError) as caught:
        scan(mssql_corpus, "RestoreTimeClean/RestoreTimeClean_1.trn")
    assert (caught.value.offset, caught.value.expected, caught.value.found) == (
        0x1A00, "an MSDA block before the log (MSTL) blocks", "MSTL: not a full or differential backup, or damaged")


def test_page_types_and_header_fields_of_a_full(mssql_corpus):
    result = scan(mssql_corpus, FULL)
    assert result.by_type == {1: 64, 2: 33, 3: 2, 8: 1, 9: 1, 10: 53, 11: 1, 13: 1, 15: 1, 16: 1, 17: 1, 19: 4}
    data = (mssql_corpus / FULL).read_bytes()
    [stream] = locate_data_streams(SourceFile(LocalSource(mssql_corpus), FULL))
    assert (stream.offset, stream.pages) == (0x1E00, 168)
    header = decode_header(data[0x1E00 + 56 * PAGE:0x1E00 + 57 * PAGE])
    assert (header.header_version, header.page_type, header.name, header.object_id, header.index_id,
            header.flag_bits, header.stored_checksum) == (1, 1, "1:56", 60, 1, 0x200, 0x3D43F36C)
    assert page_checksum(data[0x1E00 + 56 * PAGE:0x1E00 + 57 * PAGE]) == 0x3D43F36C


def damaged(mssql_copy, edit, rel: str = FULL, files: dict[int, int] | None = None) -> PageScan:  # type: ignore[no-untyped-def]
    root = mssql_copy(rel)
    path = root / rel
    data = bytearray(path.read_bytes())
    edit(data)
    path.write_bytes(bytes(data))
    return scan(root, rel, files)


def page_at(index: int) -> int:
    return 0x1E00 + index * PAGE


def restamp(data: bytearray, offset: int) -> None:
    """Give the page at `offset` the checksum of what it holds now, as SQL Server would on writing it."""
    struct.pack_into("<I", data, offset + 0x3C, page_checksum(bytes(data[offset:offset + PAGE])))


def test_a_flipped_bit_in_a_page_body(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(56) + 4000] ^= 0x10

    result = damaged(mssql_copy, edit)
    # Byte 4000 is in sector 7, whose words rotate left by 15 - 7 = 8: bit 4 becomes bit 12 (0x1000).
    assert result.findings == (PageFinding(FULL, page_at(56), "1:56", 60, 1, "checksum mismatch",
                                           0x3D43F36C, 0x3D43E36C),)
    assert (result.pages, result.checksummed) == (168, 159)


def test_a_flipped_bit_in_a_page_header(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(14) + 0x18] ^= 0x01  # m_objId 64 -> 65

    result = damaged(mssql_copy, edit)
    # Sector 0 rotates by 15: bit 0 becomes bit 15 (0x8000). The finding names the object the header now says.
    assert result.findings == (PageFinding(FULL, page_at(14), "1:14", 65, 1, "checksum mismatch",
                                           0xCB58F495, 0xCB587495),)


def test_a_flipped_bit_in_the_header_version_is_still_checked(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(27)] ^= 0x01  # m_headerVersion 1 -> 0: the page id still fits its slot

    result = damaged(mssql_copy, edit)
    assert result.findings == (PageFinding(FULL, page_at(27), "1:27", 23, 1, "checksum mismatch",
                                           0xCDA13615, 0xCDA1B615),)
    assert result.unformatted == 0


def test_a_torn_write_replacing_one_sector(mssql_copy):
    def edit(data: bytearray) -> None:
        start = page_at(58) + 9 * SECTOR
        data[start:start + SECTOR] = data[page_at(59) + 9 * SECTOR:page_at(59) + 10 * SECTOR]

    result = damaged(mssql_copy, edit)
    assert result.findings == (PageFinding(FULL, page_at(58), "1:58", 60, 1, "checksum mismatch",
                                           0x561FC2DE, 0xEDAB2FC9),)


def test_two_pages_swapped(mssql_copy):
    def edit(data: bytearray) -> None:
        first, second = bytes(data[page_at(16):page_at(17)]), bytes(data[page_at(25):page_at(26)])
        data[page_at(16):page_at(17)], data[page_at(25):page_at(26)] = second, first

    result = damaged(mssql_copy, edit)
    # Each page's own checksum still holds: only where it sits gives the swap away.
    assert result.findings == (
        PageFinding(FULL, page_at(16), "1:25", 19, 1, "page out of place: slot 0 of the extent of 1:16 holds page 1:25, and page 1:16 is "
                    "allocated (PFS page 1:1)"),
        PageFinding(FULL, page_at(25), "1:16", 7, 0, "page out of place: slot 1 of the extent of 1:24 holds page 1:16, and page 1:25 is "
                    "allocated (PFS page 1:1)"),
    )
    assert result.checksummed == 159


def test_a_page_copied_over_another(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(57):page_at(58)] = data[page_at(56):page_at(57)]

    result = damaged(mssql_copy, edit)
    assert result.findings == (
        PageFinding(FULL, page_at(57), "1:56", 60, 1, "page out of place: slot 1 of the extent of 1:56 holds page 1:56, "
                    "and page 1:57 is allocated (PFS page 1:1)"),
        PageFinding(FULL, page_at(57), "1:56", 60, 1, f"page 1:56 seen twice: first at offset {page_at(56):#x}"),
    )


def test_an_unknown_page_type(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(52) + 1] = 0x63  # m_type 1 (data) -> 99, a type SQL Server does not write

    result = damaged(mssql_copy, edit)
    assert result.findings == (
        PageFinding(FULL, page_at(52), "1:52", 3, 0, "unknown page type 99"),
        PageFinding(FULL, page_at(52), "1:52", 3, 0, "checksum mismatch", 0x1AA9DDDB, 0x2BA9DDDB),
    )


def test_a_file_cut_inside_its_data_pages(mssql_copy):
    root = mssql_copy(FULL)
    path = root / FULL
    path.write_bytes(path.read_bytes()[:page_at(100)])
    with pytest.raises(MtfError) as caught:
        scan(root, FULL)
    # The walk steps over the MQDA stream's data (2 + 168 pages) to the next stream header, past the end.
    assert (caught.value.offset, caught.value.expected, caught.value.found) == (
        page_at(168), "22 bytes", f"end of file at {page_at(100):#x}: the file is truncated")


class ShortReads:
    """A reader that answers a long read with one byte less instead of refusing it."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.data = name, data

    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, length: int) -> bytes:
        return self.data[offset:offset + length - (1 if length >= PAGE else 0)]


def test_a_short_answer_from_the_reader_is_an_error_not_a_page(mssql_corpus):
    with pytest.raises(MtfError) as caught:
        scan_pages(ShortReads(FULL, (mssql_corpus / FULL).read_bytes()))
    # The stream's 168 pages (1.3 MiB) are less than one read (READ_BYTES): one read asks for them all.
    assert (caught.value.offset, caught.value.expected, caught.value.found) == (
        0x1E00, f"{168 * PAGE} bytes", f"{168 * PAGE - 1} bytes")


class CutWhileRead:
    """A local file whose reads, from the third on, come back short: a backup cut while it is scanned."""

    def __init__(self, root: Path, rel: str) -> None:
        self.file = SourceFile(LocalSource(root), rel)
        self.name = rel
        self.reads = 0

    def size(self) -> int:
        return self.file.size()

    def read(self, offset: int, length: int) -> bytes:
        return self.file.read(offset, length)

    @contextmanager
    def sequential(self) -> Iterator[CutWhileRead]:
        self.threads = {thread.name for thread in threading.enumerate()}
        yield self

    concurrent = True

    def read_into(self, offset: int, buffer: memoryview) -> int:
        self.reads += 1
        data = self.file.read(offset, len(buffer) - (1 if self.reads >= 3 else 0))
        buffer[:len(data)] = data
        return len(data)


def test_a_file_cut_while_threads_read_it_is_an_error_and_leaves_no_thread(mssql_corpus, monkeypatch):
    monkeypatch.setattr(pages_module, "READ_PAGES", 16)
    reader = CutWhileRead(mssql_corpus, FULL)
    with pytest.raises(MtfError) as caught:
        scan_pages(reader)
    # Reads 1 and 2 are pages 0-31; the third, pages 32-47, is one byte short.
    assert (caught.value.offset, caught.value.expected, caught.value.found) == (
        page_at(32), f"{16 * PAGE} bytes", f"{16 * PAGE - 1} bytes")
    assert not [thread.name for thread in threading.enumerate() if thread.name.startswith("restoreproof-pages")]


@pytest.mark.parametrize(("read_pages", "workers"), [(None, 2), (8, 1), (8, 2)])
def test_a_whole_extent_written_over_another(mssql_copy, monkeypatch, read_pages, workers):
    monkeypatch.setattr(pages_module, "WORKERS", workers)
    if read_pages:  # one extent per read: the copy and the real extent meet in different reads
        monkeypatch.setattr(pages_module, "READ_PAGES", read_pages)

    def edit(data: bytearray) -> None:
        data[page_at(48):page_at(56)] = data[page_at(56):page_at(64)]

    result = damaged(mssql_copy, edit)
    # The copy is a well-formed extent (1:56-1:63, each page in its slot): only meeting the real one
    # later shows it, page by page. (That 1:48-1:55 are missing takes the allocation maps: not checked.)
    assert result.findings == tuple(
        PageFinding(FULL, page_at(56 + slot), f"1:{56 + slot}", 60, 1,
                    f"page 1:{56 + slot} seen twice: first at offset {page_at(48 + slot):#x}")
        for slot in range(8))
    assert (result.pages, result.checksummed) == (168, 159)


def test_a_page_whose_version_byte_and_page_id_are_both_damaged(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(56)] = 0x00  # m_headerVersion 1 -> 0
        data[page_at(56) + 0x21] ^= 0x40  # m_pageId 56 -> 16440: no longer its slot's page

    result = damaged(mssql_copy, edit, files=FULL_FILES)
    # Alone, such a page looks like stale bytes never formatted; the PFS page (1:1, in the same
    # backup) says page 1:56 is allocated, so it must be formatted: a finding, named by its slot.
    assert result.findings == (
        PageFinding(FULL, page_at(56), "1:56", 60, 1, "page 1:56 is allocated (PFS page 1:1) but is not "
                    "formatted (header version 0, page id 1:16440)"),)
    assert (result.unformatted, result.checksummed) == (1, 158)


def test_an_allocated_page_all_zeros(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(56):page_at(57)] = bytes(PAGE)

    result = damaged(mssql_copy, edit)
    assert result.findings == (
        PageFinding(FULL, page_at(56), "1:56", 0, 0, "page 1:56 is allocated (PFS page 1:1) but is all zeros"),)
    assert result.zeroed == 6  # pages 4, 5, 165-167 are zero and unallocated: counted, not reported


def test_a_stale_page_the_pfs_says_is_allocated(mssql_copy):
    rel = "DoubleDiffing/difftest-full.bak"
    [stream] = locate_data_streams(SourceFile(LocalSource(mssql_copy(rel)), rel))
    pfs = stream.offset + 1 * PAGE

    def edit(data: bytearray) -> None:
        assert data[pfs + 0x64 + 175] == 0x00  # as SQL Server left it: page 1:175 not allocated
        data[pfs + 0x64 + 175] = 0x40
        restamp(data, pfs)

    result = damaged(mssql_copy, edit, rel)
    assert result.findings == (
        PageFinding(rel, stream.offset + 175 * PAGE, "1:175", 0xCCCCCCCC, 33608, "page 1:175 is allocated "
                    "(PFS page 1:1) but is not formatted (header version 255, page id 19488:608995660)"),)
    assert result.unformatted == 10


# SQL Server backs up whole extents: an unallocated page of an allocated extent is copied as it lies on
# disk, and may hold the bytes of any page that was there before. In FULL, pages 1:42-1:47 are such pages
# (PFS bytes 0x20/0x30: not allocated, yet formatted), beside 1:40 and 1:41, allocated (0x40).
UNALLOCATED, ALLOCATED = 45, 40


def pfs_allocated(data: bytes | bytearray, page: int) -> bool:
    return bool(data[page_at(1) + 0x64 + page] & 0x40)  # PFS page 1:1, slot k of the stream is page 1:k


def copy_of_56_over(slot: int):  # type: ignore[no-untyped-def]
    def edit(data: bytearray) -> None:
        data[page_at(slot):page_at(slot + 1)] = data[page_at(56):page_at(57)]
    return edit


def test_another_page_s_bytes_in_an_unallocated_slot_are_stale_not_damage(mssql_copy):
    # Page 1:56 (valid checksum) copied over unallocated 1:45: out of place, but the slot is not in use.
    # The real 1:56, met later, is not taken for a page written twice.
    result = damaged(mssql_copy, lambda data: (assert_allocated(data, UNALLOCATED, False),
                                               copy_of_56_over(UNALLOCATED)(data)), files=FULL_FILES)
    assert result.findings == ()
    assert (result.stale, result.checksummed, result.unformatted, result.pages) == (1, 158, 0, 168)
    assert sum(result.by_type.values()) == result.pages - result.zeroed - result.unformatted - result.stale
    assert result.by_type[1] == 63  # 1:45, a data page, is no longer counted as one


def test_another_page_s_bytes_in_an_allocated_slot_are_damage(mssql_copy):
    result = damaged(mssql_copy, lambda data: (assert_allocated(data, ALLOCATED, True),
                                               copy_of_56_over(ALLOCATED)(data)), files=FULL_FILES)
    assert result.findings == (
        PageFinding(FULL, page_at(ALLOCATED), "1:56", 60, 1, "page out of place: slot 0 of the extent of 1:40 holds "
                    "page 1:56, and page 1:40 is allocated (PFS page 1:1)"),
        PageFinding(FULL, page_at(ALLOCATED), "1:56", 60, 1,
                    f"page 1:56 seen twice: also at offset {page_at(56):#x}"),
    )
    assert (result.stale, result.checksummed) == (0, 159)


def renamed_and_garbled(slot: int):  # type: ignore[no-untyped-def]
    """The page in `slot` given the id 1:200 and a body byte changed, its checksum left as it was."""
    def edit(data: bytearray) -> None:
        data[page_at(slot) + 0x20] = 200
        data[page_at(slot) + 4000] ^= 0x5A
    return edit


def assert_allocated(data: bytearray, page: int, allocated: bool) -> None:
    assert pfs_allocated(data, page) is allocated  # as SQL Server left it


def test_a_page_with_a_bad_checksum_in_an_unallocated_slot_is_stale(mssql_copy):
    result = damaged(mssql_copy, lambda data: (assert_allocated(data, UNALLOCATED, False),
                                               renamed_and_garbled(UNALLOCATED)(data)), files=FULL_FILES)
    assert result.findings == ()
    assert (result.stale, result.checksummed) == (1, 158)


def test_a_page_with_a_bad_checksum_in_an_allocated_slot_is_damage_said_in_full(mssql_copy):
    root = mssql_copy(FULL)
    data = bytearray((root / FULL).read_bytes())
    assert_allocated(data, ALLOCATED, True)
    renamed_and_garbled(ALLOCATED)(data)
    (root / FULL).write_bytes(bytes(data))
    computed = page_checksum(bytes(data[page_at(ALLOCATED):page_at(ALLOCATED + 1)]))
    result = scan(root, FULL, FULL_FILES)
    assert result.findings == (
        PageFinding(FULL, page_at(ALLOCATED), "1:200", 41, 1, "page out of place: slot 0 of the extent of 1:40 holds "
                    "page 1:200, and page 1:40 is allocated (PFS page 1:1)"),
        PageFinding(FULL, page_at(ALLOCATED), "1:200", 41, 1, "checksum mismatch", 0xFBC432BA, computed),
    )
    assert computed != 0xFBC432BA
    assert (result.stale, result.checksummed) == (0, 159)


def test_a_page_out_of_place_past_its_file_in_an_allocated_slot_says_both(mssql_copy):
    # Page 1:200 of a 160-page file 1: out of place and past the end, each said, only because the slot is in use.
    files = {1: 160, 2: 72}
    result = damaged(mssql_copy, renamed_and_garbled(ALLOCATED), files=files)
    at_slot = [f.reason for f in result.findings if f.offset == page_at(ALLOCATED)]
    assert at_slot == ["page out of place: slot 0 of the extent of 1:40 holds page 1:200, and page 1:40 is "
                       "allocated (PFS page 1:1)", "page 1:200 lies past the end of file 1 (160 pages)",
                       "checksum mismatch"]
    unallocated = damaged(mssql_copy, renamed_and_garbled(UNALLOCATED), files=files)
    assert not [f for f in unallocated.findings if f.offset == page_at(UNALLOCATED)]


def test_an_extent_in_a_tie_takes_no_page_for_stale_bytes(mssql_copy):
    # Slots 4-7 of extent 1:40 (pages 1:44-1:47, not allocated) given copies of 1:60-1:63: four pages
    # vote for 1:40, four for 1:56. Which half is out of place is not known: found at once, PFS or not.
    def edit(data: bytearray) -> None:
        data[page_at(44):page_at(48)] = data[page_at(60):page_at(64)]

    result = damaged(mssql_copy, edit, files=FULL_FILES)
    assert [(f.offset, f.reason) for f in result.findings if "out of place" in f.reason] == [
        (page_at(44 + k), f"page out of place: slot {4 + k} of the extent of 1:40 holds page 1:{60 + k}")
        for k in range(4)]
    assert result.stale == 0


def test_a_misplaced_page_whose_slot_no_pfs_page_covers_is_counted_not_reported(mssql_copy):
    # Stripe 2 read alone has no PFS page: nothing proves the slot in use, as for zero pages.
    root = mssql_copy(STRIPE2)
    victim = root / STRIPE2
    data = bytearray(victim.read_bytes())
    data[0x54200:0x54200 + PAGE] = data[0x52200:0x52200 + PAGE]  # 1:56 over 1:57
    victim.write_bytes(bytes(data))
    alone = scan(root, STRIPE2, STRIPE_FILES)
    assert alone.findings == () and alone.stale == 1


def test_a_page_past_the_end_of_its_file(mssql_corpus):
    # The same backup checked against a file list that says file 1 has 100 pages.
    result = scan(mssql_corpus, FULL, {1: 100, 2: 72})
    formatted_past = list(range(100, 165))  # 165-167 are zero pages
    assert [f.offset for f in result.findings] == [page_at(k) for k in formatted_past]
    assert result.findings[0] == PageFinding(FULL, page_at(100), "1:100", 74, 2,
                                             "page 1:100 lies past the end of file 1 (100 pages)")


def test_a_page_naming_a_file_the_database_does_not_have(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(56) + 0x24] = 5  # m_pageId's file: 1 -> 5, checksum made to match
        restamp(data, page_at(56))

    result = damaged(mssql_copy, edit, files=FULL_FILES)
    assert [f.reason for f in result.findings] == [
        "page out of place: slot 0 of the extent of 1:56 holds page 5:56, and page 1:56 is allocated (PFS page 1:1)",
        "file id 5 is not a file of the database (files 1, 2)"]
    assert {f.page for f in result.findings} == {"5:56"}


def torn_protected(page: bytes, pattern: int) -> bytearray:
    """The page as SQL Server writes it under PAGE_VERIFY TORN_PAGE_DETECTION (see pages.py): flag
    0x100 instead of 0x200; each sector after the first ends in the write's 2-bit pattern, the bits it
    held kept in m_tornBits (sector s at bits 2s..2s+1), the pattern itself in bits 0-1."""
    out = bytearray(page)
    flags = struct.unpack_from("<H", out, 4)[0]
    struct.pack_into("<H", out, 4, (flags & ~0x200) | 0x100)
    torn = pattern
    for sector in range(1, 16):
        last = sector * SECTOR + SECTOR - 1
        torn |= (out[last] & 3) << (2 * sector)
        out[last] = (out[last] & ~3) | pattern
    struct.pack_into("<I", out, 0x3C, torn)
    return out


def test_a_page_protected_by_torn_page_bits_verifies(mssql_copy):
    def edit(data: bytearray) -> None:
        data[page_at(56):page_at(57)] = torn_protected(data[page_at(56):page_at(57)], 0b01)

    result = damaged(mssql_copy, edit, files=FULL_FILES)
    assert result.findings == ()
    assert (result.checksummed, result.without_checksum, result.torn_page_protected) == (158, 5, 1)


@pytest.mark.parametrize("sector", [1, 9, 15])
def test_a_torn_write_on_a_torn_page_protected_page(mssql_copy, sector):
    def edit(data: bytearray) -> None:
        original = bytes(data[page_at(56):page_at(57)])
        before, after = torn_protected(original, 0b10), torn_protected(original, 0b01)
        # The new write (pattern 01) reached every sector but one, which still holds the write before (10).
        after[sector * SECTOR:(sector + 1) * SECTOR] = before[sector * SECTOR:(sector + 1) * SECTOR]
        data[page_at(56):page_at(57)] = after

    result = damaged(mssql_copy, edit, files=FULL_FILES)
    assert result.findings == (PageFinding(FULL, page_at(56), "1:56", 60, 1,
                                           f"torn page: sector {sector} does not end in the write's pattern 01"),)
    assert result.torn_page_protected == 1


def test_the_bulk_checks_take_torn_page_protected_pages(mssql_corpus):
    # Not only the page-by-page path: a whole extent of torn-page protected pages passes in bulk.
    data = bytearray((mssql_corpus / FULL).read_bytes()[page_at(0):page_at(168)])
    for k in range(56, 64):
        data[k * PAGE:(k + 1) * PAGE] = torn_protected(data[k * PAGE:(k + 1) * PAGE], 0b10)
    block = pages_module._prepare(bytes(data), 168, None)
    assert block.plain[7] and block.plain_torn == 8
    data[60 * PAGE + 3 * SECTOR - 1] ^= 0b11  # sector 2 of page 1:60 no longer ends in the pattern
    assert not pages_module._prepare(bytes(data), 168, None).plain[7]


def test_a_torn_page_protected_page_with_a_flipped_bit_in_its_body_passes(mssql_copy):
    # What torn-page bits cannot see (why CHECKSUM replaced them): a bit flipped inside a sector.
    def edit(data: bytearray) -> None:
        data[page_at(56):page_at(57)] = torn_protected(data[page_at(56):page_at(57)], 0b01)
        data[page_at(56) + 4000] ^= 0x10

    assert damaged(mssql_copy, edit).findings == ()


def test_one_bit_clearing_the_checksum_flag_is_found_not_counted_as_unprotected(mssql_copy):
    # m_flagBits 0x200 is bit 1 of byte 5: one flipped bit would turn page 1:56 into "without checksum".
    def edit(data: bytearray) -> None:
        data[page_at(56) + 5] ^= 0x02

    result = damaged(mssql_copy, edit)
    (finding,) = result.findings
    # The flag is in sector 0 (rotated by 15): clearing 0x200 moves the checksum by 0x200 << 15.
    assert (finding.offset, finding.page, finding.stored_checksum, finding.computed_checksum) == (
        page_at(56), "1:56", 0x3D43F36C, 0x3D43F36C ^ 0x01000000)
    assert finding.reason.startswith("checksum flag cleared: m_flagBits 0x")
    assert "lacks 0x200, yet the stored field is the checksum of the page with it set" in finding.reason


def test_a_page_without_a_checksum_whose_field_does_not_match_is_no_finding(mssql_copy):
    # The flag cleared and the field changed too: a page written without checksum, as far as can be told.
    def edit(data: bytearray) -> None:
        data[page_at(56) + 5] ^= 0x02
        data[page_at(56) + 0x3C] ^= 0x01

    result = damaged(mssql_copy, edit)
    assert result.findings == () and (result.checksummed, result.without_checksum) == (158, 5)


# ---- striped backups: the families (stripes) of one backup set read as one backup --------------------------

# The corpus's four two-family sets, family 1 then family 2 (each pair shares its BackupSetGUID).
STRIPED = [("history/sql2016-stripe/Stripe1/restoretime.bak", "history/sql2016-stripe/Stripe2/restoretime1.bak"),
           ("history/sql2016-stripe/Stripe1/restoretime2.bak", "history/sql2016-stripe/Stripe2/restoretime2a.bak"),
           ("sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe.bak",
            "sql2008-backups/RestoreTimeStripe/Stripe2/RestoreTimeStripe1.bak"),
           ("sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe2.bak",
            "sql2008-backups/RestoreTimeStripe/Stripe2/RestoreTimeStripe2a.bak")]
# The first set: PFS page 1:1 is in stripe 1; stripe 2's stream starts at 0x2200 with extent 1:8, and
# its sixth extent (0x52200) is 1:56-1:63 (object 41, index 1), pages 1:56-1:59 allocated in 1:1.
STRIPE1, STRIPE2 = STRIPED[0]
STRIPE_FILES = {1: 1024, 2: 1024}  # the database's files as both families' headers list them


def scan_families(root: Path, rels: tuple[str, ...] | list[str], files: dict[int, int] | None = None) -> list[PageScan]:
    return scan_set([SourceFile(LocalSource(root), rel) for rel in rels], files)


def test_the_striped_sets_are_two_families_of_one_backup_set(mssql_corpus):
    for first, second in STRIPED:
        one, two = (read_backup_header(SourceFile(LocalSource(mssql_corpus), rel)) for rel in (first, second))
        assert (one.family_number, two.family_number, one.family_count, two.family_count) == (1, 2, 2, 2)
        assert one.backup_set_guid == two.backup_set_guid
        assert listed_files(mssql_corpus, first) == listed_files(mssql_corpus, second)
    assert listed_files(mssql_corpus, STRIPE1) == STRIPE_FILES


@pytest.mark.parametrize("rels", STRIPED)
@pytest.mark.parametrize("order", [1, -1])
def test_an_untouched_striped_set_has_no_finding_and_each_family_its_own_counts(mssql_corpus, rels, order):
    # Read together, in either order: the same counts as each file alone (CORPUS), nothing to report. Every
    # zero page of stripe 2 (1:172-1:175 and 1:353-1:359 in the 2016 sets) is unallocated in stripe 1's PFS page.
    files = listed_files(mssql_corpus, rels[0])
    results = scan_families(mssql_corpus, rels[::order], files)
    assert [r.path for r in results] == list(rels[::order])
    for result in results:
        pages, checksummed, without, zeroed, unformatted = CORPUS[result.path]
        assert (result.pages, result.checksummed, result.without_checksum, result.zeroed, result.unformatted) == (
            pages, checksummed, without, zeroed, unformatted)
        assert result.findings == ()
        assert result == scan(mssql_corpus, result.path, files)


def zeroed_in_stripe2(data: bytearray) -> None:
    data[0x56200:0x56200 + PAGE] = bytes(PAGE)  # page 1:58, slot 2 of the extent 1:56 at 0x52200


def unformatted_in_stripe2(data: bytearray) -> None:
    data[0x56200] = 0x00  # m_headerVersion 1 -> 0
    data[0x56200 + 0x21] ^= 0x40  # m_pageId 58 -> 16442: no longer its slot's page


@pytest.mark.parametrize(("edit", "what", "owner"), [
    (zeroed_in_stripe2, "is all zeros", (0, 0)),
    (unformatted_in_stripe2, "is not formatted (header version 0, page id 1:16442)", (41, 1)),
])
@pytest.mark.parametrize("order", [1, -1])
def test_an_allocated_page_of_the_second_stripe_spoilt_is_found_by_the_first_stripes_pfs_page(
        mssql_copy, edit, what, owner, order):
    root = mssql_copy(STRIPE1, STRIPE2)
    victim = root / STRIPE2
    data = bytearray(victim.read_bytes())
    edit(data)
    victim.write_bytes(bytes(data))
    # Stripe 2 alone cannot say it (no PFS page in it): counted, not reported, as before.
    alone = scan(root, STRIPE2, STRIPE_FILES)
    assert alone.findings == () and (alone.zeroed, alone.unformatted) == (
        (12, 0) if edit is zeroed_in_stripe2 else (11, 1))
    # Read with stripe 1, in either order (the rule waits for the whole set): found, where it is.
    results = {r.path: r for r in scan_families(root, [STRIPE1, STRIPE2][::order], STRIPE_FILES)}
    assert results[STRIPE1].findings == ()
    assert results[STRIPE2].findings == (
        PageFinding(STRIPE2, 0x56200, "1:58", owner[0], owner[1],
                    f"page 1:58 is allocated (PFS page 1:1 in {STRIPE1}) but {what}"),)
    assert (results[STRIPE2].zeroed, results[STRIPE2].unformatted) == (alone.zeroed, alone.unformatted)


@pytest.mark.parametrize(("read_pages", "workers"), [(None, 2), (16, 1), (16, 2)])
def test_an_extent_of_the_first_stripe_copied_over_one_of_the_second_is_seen_twice_naming_both_files(
        mssql_copy, monkeypatch, read_pages, workers):
    monkeypatch.setattr(pages_module, "WORKERS", workers)
    if read_pages:  # small reads: the copy meets the original in another read, by threads or not
        monkeypatch.setattr(pages_module, "READ_PAGES", read_pages)
    root = mssql_copy(STRIPE1, STRIPE2)
    original = (root / STRIPE1).read_bytes()[0x22200:0x32200]  # stripe 1's extent 1:64-1:71 (object 3, index 0)
    victim = root / STRIPE2
    data = bytearray(victim.read_bytes())
    data[0x52200:0x62200] = original  # over 1:56-1:63; nothing else changed
    victim.write_bytes(bytes(data))
    # Each file alone is well formed: every page verifies and sits in its slot.
    assert scan(root, STRIPE2, STRIPE_FILES).findings == ()
    one, two = scan_families(root, [STRIPE1, STRIPE2], STRIPE_FILES)
    assert one.findings == ()
    assert two.findings == tuple(
        PageFinding(STRIPE2, 0x52200 + slot * PAGE, f"1:{64 + slot}", 3, 0,
                    f"page 1:{64 + slot} seen twice: first at offset {0x22200 + slot * PAGE:#x} in {STRIPE1}")
        for slot in range(8))
    assert (two.pages, two.checksummed, two.without_checksum) == (168, 156, 1)


def test_a_part_zero_extent_copied_across_stripes_is_seen_twice_page_by_page(mssql_copy):
    # Stripe 1's extent at 0x92200 holds 1:176-1:178 then five unallocated zero pages: met page by page
    # in both files (not the whole-extent path). Read stripe 2 first: the finding is in stripe 1.
    root = mssql_copy(STRIPE1, STRIPE2)
    copy = (root / STRIPE1).read_bytes()[0x92200:0xA2200]
    victim = root / STRIPE2
    data = bytearray(victim.read_bytes())
    data[0x52200:0x62200] = copy
    victim.write_bytes(bytes(data))
    two, one = scan_families(root, [STRIPE2, STRIPE1], STRIPE_FILES)
    assert two.findings == ()
    assert one.findings == tuple(
        PageFinding(STRIPE1, 0x92200 + slot * PAGE, f"1:{176 + slot}", 60, 1,
                    f"page 1:{176 + slot} seen twice: first at offset {0x52200 + slot * PAGE:#x} in {STRIPE2}")
        for slot in range(3))
    assert (two.zeroed, one.zeroed) == (11 + 5, 34)  # the five zero pages 1:179-1:183 are unallocated


def test_a_page_seen_twice_within_one_family_of_a_set_names_no_other_file(mssql_copy):
    # The message of a one-file backup, unchanged when the file is one family of a set.
    root = mssql_copy(STRIPE1, STRIPE2)
    victim = root / STRIPE2
    data = bytearray(victim.read_bytes())
    data[0x52200 + PAGE:0x52200 + 2 * PAGE] = data[0x52200:0x52200 + PAGE]  # 1:56 over 1:57
    victim.write_bytes(bytes(data))
    _, two = scan_families(root, [STRIPE1, STRIPE2], STRIPE_FILES)
    assert two.findings == (
        PageFinding(STRIPE2, 0x54200, "1:56", 41, 1, "page out of place: slot 1 of the extent of 1:56 holds page 1:56, "
                    f"and page 1:57 is allocated (PFS page 1:1 in {STRIPE1})"),
        PageFinding(STRIPE2, 0x54200, "1:56", 41, 1, "page 1:56 seen twice: first at offset 0x52200"),
    )


def test_two_different_backups_read_as_one_set_would_be_full_of_duplicates(mssql_corpus):
    # Why only the families of one set are read together: two fulls of a database hold the same pages.
    first, second = scan_families(mssql_corpus, [STRIPE1, STRIPED[1][0]])
    assert first.findings == ()
    assert len(second.findings) == 123 and {f.reason.split(":")[0] for f in second.findings} == {"page 1"}
    assert second.findings[0] == PageFinding(STRIPED[1][0], 0x2200, "1:0", 99, 0,
                                             f"page 1:0 seen twice: first at offset 0x2200 in {STRIPE1}")


def test_a_set_scans_families_before_its_results_and_gives_them_once(mssql_corpus):
    family = pages_module.SetScan()
    family.add(SourceFile(LocalSource(mssql_corpus), STRIPE1))
    family.add(SourceFile(LocalSource(mssql_corpus), STRIPE2))
    first = family.results()
    assert family.results() == first  # the allocation rule is applied once
    with pytest.raises(ValueError, match="families are all added before its results are taken"):
        family.add(SourceFile(LocalSource(mssql_corpus), STRIPE1))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_family_that_will_not_read_leaves_the_others_judged_with_what_it_gave(mssql_copy, monkeypatch, workers):
    # Stripe 1 comes back short from its third read on (a file cut while read): an error for it; stripe 2
    # is still read, and the PFS page stripe 1 gave before (page 1:1, in the first read) still judges it.
    monkeypatch.setattr(pages_module, "READ_PAGES", 16)
    monkeypatch.setattr(pages_module, "WORKERS", workers)
    root = mssql_copy(STRIPE1, STRIPE2)
    victim = root / STRIPE2
    data = bytearray(victim.read_bytes())
    zeroed_in_stripe2(data)
    victim.write_bytes(bytes(data))
    family = pages_module.SetScan()
    with pytest.raises(MtfError) as caught:
        family.add(CutWhileRead(root, STRIPE1))
    assert (caught.value.offset, caught.value.found) == (0x2200 + 32 * PAGE, f"{16 * PAGE - 1} bytes")
    family.add(SourceFile(LocalSource(root), STRIPE2))
    (two,) = family.results()
    assert two.findings == (PageFinding(STRIPE2, 0x56200, "1:58", 0, 0,
                                        f"page 1:58 is allocated (PFS page 1:1 in {STRIPE1}) but is all zeros"),)


def test_positions_past_32_bits_widen_what_was_seen_rather_than_wrap():
    seen = pages_module._Seen()
    assert seen.page(1, 3, 7) is None  # met page by page: marked slow in extent 0
    assert not seen.extents_met(1, np.array([5], dtype=np.int64), np.array([40], dtype=np.int64)).any()
    assert seen.extents[1].dtype == np.uint32
    beyond = np.array([6], dtype=np.int64), np.array([(1 << 32) + 8], dtype=np.int64)
    assert not seen.extents_met(1, *beyond).any()
    assert seen.extents[1].dtype == np.uint64
    assert seen.page(1, 6 * 8 + 3, 0) == (1 << 32) + 8 + 3  # not wrapped to 11
    assert seen.page(1, 5 * 8 + 2, 0) == 40 + 2  # what was kept before is kept
    assert seen.page(1, 3, 0) == 7  # the slow mark too, and the arrays grown after are wide
    assert seen.page(2, 9, 0) is None and seen.extents[2].dtype == np.uint64
    assert seen.extents_met(1, *beyond).all()


def outvoted_extent(data: bytearray) -> None:
    """Extent 1:40 of RestoreTimeClean.bak: 1:40 and 1:41 allocated, 1:42-1:47 unallocated (stale).
    The six stale slots hold pages of another file's old extent (as instant file initialization leaves
    a previous database's pages on disk): ids 1:202-1:207, each whole (own checksum holds). The real,
    allocated page 1:40 has a body byte flipped: its checksum no longer holds."""
    for slot in range(2, 8):
        at = page_at(40 + slot)
        struct.pack_into("<I", data, at + 0x20, 200 + slot)  # m_pageId
        struct.pack_into("<H", data, at + 0x24, 1)  # m_fileId
        restamp(data, at)
    data[page_at(40) + 4000] ^= 0x10


def test_a_damaged_allocated_page_outvoted_by_stale_slots_is_found(mssql_copy):  # type: ignore[no-untyped-def]
    result = damaged(mssql_copy, outvoted_extent, files=FULL_FILES)
    assert any(f.offset == page_at(40) and f.reason == "checksum mismatch" for f in result.findings), (
        result.findings, result.stale)
