"""Verify the 8 KiB data pages carried by a SQL Server full or differential backup, offline.

Where the pages are (seen in every uncompressed full and differential backup of the corpus,
../shared/testdata/mssql-backups, written by SQL Server 2008 R2 and 2016):
- after MSCI comes one MSDA block whose streams are APAD, MQDA (attributes 0x200, or 0x201 when
  the backup was taken WITH CHECKSUM, then followed by a 4-byte CSUM stream), an empty MQDA
  (attributes 0x600) and SPAD; MSTL (log) blocks follow;
- the non-empty MQDA stream holds 2 bytes (always 00 00 in the corpus) then whole 8192-byte pages
  back to back: its length is 2 + 8192 * n, and n is a multiple of 8 in every file;
- the pages come in whole extents: the page at position k of the stream sits in slot k % 8 of an
  extent, and every formatted page of a group of 8 names the same file and extent, with page id
  = extent start + slot, the start a multiple of 8 (all 726 extents of the corpus). A database's
  second data file follows the first in the same stream (file 3 in sql2008-backups/db1).
- besides formatted pages the extents carry: all-zero pages (pages 4 and 5 of every file header
  extent, never written); pages of stale bytes never formatted by SQL Server (old machine code in
  DoubleDiffing/difftest-full.bak, pages 173-183), whose header fields are noise, so a header
  version other than 1 and a page id that does not fit the slot mark such a page, and it is
  counted, not checked; and, at the end of some streams, pages of type 101 with page id 0:0 and a
  valid checksum (backup filler: assumed from what was seen, not documented).
  Pages 3:4 and 3:5 of db1's differentials carry stale bytes but a page id that fits their slot
  and a valid checksum: SQL Server stamped them, so they are verified like any other.

The 96-byte page header (field names as SQL Server's DBCC PAGE prints them; offsets as published
by Paul Randal's "Anatomy of a page" and the OrcaMDF project, each confirmed on the corpus):
  0x00 m_headerVersion u8 (1 on every formatted page)   0x01 m_type u8
  0x04 m_flagBits u16 (0x200: checksum, 0x100: torn-page bits)   0x06 m_indexId u16
  0x18 m_objId u32 (99 on allocation pages, as DBCC PAGE shows)
  0x20 m_pageId: page u32 then file u16 (matches the page's slot on every formatted page)
  0x3C m_tornBits u32: the checksum when flag 0x200 is set, the torn-page bits when 0x100 is.
The checksum (published by several authors; confirmed: every formatted, checksummed page of the
corpus matches): the page as 16 sectors of 128 little-endian u32 words, m_tornBits counted as 0;
each sector's words XORed together, rotated left by 15 - sector index, and the 16 results XORed.

Torn-page bits (flag 0x100 without 0x200; PAGE_VERIFY TORN_PAGE_DETECTION). On each write SQL
Server takes a 2-bit pattern that changes from one write to the next (01, 10), keeps it in bits
0-1 of m_tornBits, and for every sector s = 1..15 saves the low 2 bits of the sector's last byte
(byte 512 * s + 511) in bits 2s..2s+1 of m_tornBits, writing the pattern over them; a read whose
sectors do not all end in the pattern is a torn page, and the saved bits are put back. Sector 0
is not compared: it holds the header, and so the pattern itself (bits 0-1 are its place).
Sources: Kalen Delaney, Inside SQL Server ("a bit is flipped for each 512-byte sector ... the
actual state is saved in the page header"); E. Siswanto, "Which sector is torn in torn page
error?" (2008: the low 2 bits of m_tornBits compared with the last byte of each sector, on disk);
J. Gurgul, "TORN_PAGE_DETECTION internals" (the 2-bit fields, sector 15 in the top bits). No page
of the corpus carries torn-page bits, so this is checked on corpus pages converted to the scheme
(tests/unit/engines/mssql/test_pages.py), not on pages SQL Server wrote.

Page ids against the database's files: given the backup's file list (file id -> size in pages),
a page naming a file the database does not have, or a page id at or past its file's size, is a
finding (every formatted page of the corpus lies inside its file's size as the header lists it).
The list also names the log file (file 2), which no data page names: such a page is not caught.

Allocation (why a page of noise is not always a stale page). A page whose header version and page
id are both wrong could be stale bytes SQL Server never formatted, or a damaged page: the page
free space (PFS) page tells which. Each PFS page holds one byte per page for an interval of 8088
pages (PFS pages are page 1, then 8088, 16176, ...), from page offset 0x64 (after its one
record's 4-byte header); bit 0x40 is "allocated" (Paul Randal, "Inside the Storage Engine: GAM,
SGAM, PFS and other allocation maps"; the byte layout confirmed on the corpus: pages 0-3 read
0x44, the never-written pages 4 and 5 read 0x00). An all-zero or unformatted page in a slot whose
page the PFS page carried in the same backup marks allocated is a finding; on the corpus every
one of its zero and stale pages (pages 4/5, 173-183 of difftest-full, the zeroed runs at the
end of the full backups) is unallocated in its PFS page, so they stay counted, not reported.
Where no file of the backup set carries the PFS page (a family whose set is not all read, below),
or no page of the extent is formatted, nothing can be said: counted.
The same holds for a formatted page (header version 1) that does not fit its slot: SQL Server copies
whole extents, so an unallocated page of an allocated extent holds whatever was last on disk there,
which may be any earlier page, with any page id and a checksum that holds or not (pages 1:42-1:47 of
RestoreTimeClean.bak are formatted yet unallocated; public databases carry old pages of other ids in
such slots). Such a page is judged by the PFS once the set is read, and is not recorded as met (the
page it copies would be taken for a page written twice): in an allocated slot it is a finding, "page
out of place", with whatever else is wrong with it (unknown type, outside its file, seen twice, its
checksum); otherwise it is counted as stale (PageScan.stale) and not checked. This takes an extent that
is settled: two of its pages or more agree on it, and no other extent has as many votes. Where the
pages agree on none, or two extents tie, no page is taken for stale bytes: each is checked on its own,
one that does not fit the winning extent is "out of place" at once.
GAM/SGAM (extent-level) and IAM pages are not needed for this: PFS is page-level. Not seen on
the corpus but possible: a backup is fuzzy (pages are copied while the database runs, the log in
the backup makes them consistent on restore), so a page allocated while the backup ran could be
marked in a PFS page copied after the flush and still be unwritten when its own slot was copied;
such a finding would be a false alarm the restore would settle. Nothing here tells the two apart.

Striped backups: one backup set written to N files (families). SQL Server spreads the extents over
them: in the corpus's four two-family sets (sql2008-backups/RestoreTimeStripe, history/sql2016-
stripe) every extent lies whole in one family, no page id is in both, and PFS page 1:1 is in the
first family while many pages it marks are in the second. So the families of one set are read as
one backup (SetScan, scan_set): one after another, each with its own counts and findings named by
its own file and offset, sharing the pages met (`_Seen`: one u32 per extent per database file for
the whole set, positions running on from one family to the next) and the PFS pages read; the
allocation rule is decided once every family is read. A page met in two families is a finding like
a page met twice in one file, naming the other file ("seen twice: first at offset 0x22200 in
<file>"), and an allocation finding names the file the PFS page was read in when it is another.
Only families of one set (one BackupSetGUID) go together: two backups of a database hold the same
pages. A family that cannot be read is left out; what was read of it still counts for the others.

Speed: a file is read once, in order, READ_BYTES at a time; the checksum, the torn-page bits, the
header fields and the extent rules are evaluated for a whole block at once with numpy (strided
views into the block), and only the extents where something is not as expected go through the
page-by-page path, which alone makes findings. Where the reader allows positional reads from
several threads (a local file), WORKERS threads each read a block into one of DEPTH reused buffers
and run the bulk checks on it; the blocks are merged in read order on the calling thread, so the
result is that of the one-thread scan. bench/mssql_pages.py, 1 GiB built from the corpus's pages,
2 CPUs: warm 0.81-0.94x a plain read of the same file (about 8 GB/s), 0.54-0.61x on one thread;
cold 0.97-1.03x. With every core busy with other processes the threads cost up to 10% against
one thread. Mapping the file (no copy) would kill the process with SIGBUS if the file is cut while
read: not used.
"""

from __future__ import annotations

import bisect
import dataclasses
import struct
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from verification.engines.mssql.mtf import (
    COMMON_HEADER,
    COMPRESSED_MAGIC,
    STREAM_HEADER,
    ByteRangeReader,
    MtfError,
    NeedsServerHeaderOnly,
    header_checksum,
    stream_checksum,
)
from verification.errors import SourceError

PAGE = 8192
SECTOR = 512
SECTORS = PAGE // SECTOR
EXTENT = 8
PAGE_HEADER = 96
STREAM_PREFIX = 2  # the bytes before the first page of an MQDA stream (00 00 in every corpus file)
CHECKSUM_AT = 0x3C
FLAG_CHECKSUM = 0x200
FLAG_TORN = 0x100
READ_BYTES = 8 << 20  # per read, a multiple of an extent: the best of 1-16 MiB in bench/mssql_pages.py
READ_PAGES = READ_BYTES // PAGE
WORKERS = 2  # threads reading and checking blocks; this machine class has two cores
DEPTH = WORKERS + 2  # buffers: one being merged, the rest read or checked ahead
ZERO_PAGE = bytes(PAGE)
MAX_BLOCKS = 1 << 20  # a bound on the block walk, far above any real file's block count
PFS_INTERVAL = 8088
PFS_BYTES_AT = 0x64
PFS_ALLOCATED = 0x40
TYPE_PFS = 11

# Page types documented for SQL Server (Paul Randal, "Anatomy of a page"), and 101, seen in the
# corpus only as page 0:0 at the end of a data stream.
PAGE_TYPES = {1: "data", 2: "index", 3: "text mix", 4: "text tree", 7: "sort", 8: "GAM", 9: "SGAM",
              10: "IAM", 11: "PFS", 13: "boot", 14: "server config", 15: "file header",
              16: "differential map", 17: "bulk-logged map", 18: "deallocated during sort",
              19: "unlinked reorganisation", 20: "bulk-load preallocated", 101: "backup filler"}
_KNOWN_TYPE = np.zeros(256, dtype=bool)
_KNOWN_TYPE[list(PAGE_TYPES)] = True

U32 = npt.NDArray[np.uint32]
PageProblem = tuple[str, int | None, int | None]  # a finding's reason, stored and computed checksums


@dataclass(frozen=True)
class PageHeader:
    header_version: int
    page_type: int
    flag_bits: int
    index_id: int
    object_id: int
    page_id: int
    file_id: int
    stored_checksum: int

    @property
    def has_checksum(self) -> bool:
        return bool(self.flag_bits & FLAG_CHECKSUM)

    @property
    def has_torn_bits(self) -> bool:
        return bool(self.flag_bits & FLAG_TORN) and not self.has_checksum

    @property
    def name(self) -> str:
        return f"{self.file_id}:{self.page_id}"


def decode_header(page: bytes) -> PageHeader:
    version, kind, _, _, flags, index_id = struct.unpack_from("<BBBBHH", page, 0)
    object_id = struct.unpack_from("<I", page, 0x18)[0]
    page_id, file_id = struct.unpack_from("<IH", page, 0x20)
    stored = struct.unpack_from("<I", page, CHECKSUM_AT)[0]
    return PageHeader(version, kind, flags, index_id, object_id, page_id, file_id, stored)


_FOLDS = tuple(SECTOR * 8 >> n for n in range(1, 8))  # 2048, 1024, ... 32 bits


def _xor_words(sector: bytes | memoryview) -> int:
    """XOR of a sector's 128 little-endian u32 words, by folding the sector read as one integer."""
    value = int.from_bytes(sector, "little")
    for width in _FOLDS:
        value = (value >> width) ^ (value & ((1 << width) - 1))
    return value


def page_checksum(page: bytes) -> int:
    """One page's checksum, page by page in plain Python: the reference the bulk path is tested against."""
    view = memoryview(page)
    checksum = 0
    for sector in range(SECTORS):
        folded = _xor_words(view[sector * SECTOR:(sector + 1) * SECTOR])
        if sector == 0:  # the stored checksum counts as zero: XOR it back out
            folded ^= struct.unpack_from("<I", page, CHECKSUM_AT)[0]
        shift = 15 - sector
        checksum ^= ((folded << shift) | (folded >> (32 - shift))) & 0xFFFFFFFF
    return checksum


_ROTATE = (15 - np.arange(SECTORS, dtype=np.uint32)).astype(np.uint32)
_ROTATE_BACK = ((32 - _ROTATE) & 31).astype(np.uint32)  # sector 15 rotates by 0: x >> 0 | x << 0 = x


_STARTS: dict[int, npt.NDArray[np.intp]] = {}


def _sector_starts(pages: int) -> npt.NDArray[np.intp]:
    """Where each sector of `pages` pages starts, in u64 words: for reduceat, kept per page count."""
    starts = _STARTS.get(pages)
    if starts is None:
        starts = _STARTS[pages] = np.arange(0, pages * PAGE // 8, SECTOR // 8, dtype=np.intp)
    return starts


def page_checksums(words: U32) -> U32:
    """The checksums of n pages at once, from their words shaped (n, 16 sectors, 128).

    Each sector's words are XORed as 64 u64 (pairs of words; the two halves XORed after) with
    reduceat over the flat block: measured 1.5x faster than a reduce over the last axis, which
    pays numpy's per-row set-up 16 times per page."""
    pages = len(words)
    flat = np.ascontiguousarray(words).reshape(-1).view("<u8")
    pairs = np.bitwise_xor.reduceat(flat, _sector_starts(pages))
    folded = (pairs ^ (pairs >> np.uint64(32))).astype(np.uint32).reshape(pages, SECTORS)
    rotated = (folded << _ROTATE) | (folded >> _ROTATE_BACK)
    checksums: U32 = np.bitwise_xor.reduce(rotated, axis=1)
    stored = words[:, 0, CHECKSUM_AT // 4]  # it was XORed in with sector 0, rotated by 15: take it out
    checksums ^= (stored << np.uint32(15)) | (stored >> np.uint32(17))
    return checksums


def _flag_cleared(page: bytes, header: PageHeader) -> bool:
    """Whether the page's stored field is its checksum once m_flagBits has the checksum flag back."""
    flagged = bytearray(page)
    struct.pack_into("<H", flagged, 4, header.flag_bits | FLAG_CHECKSUM)
    return page_checksum(bytes(flagged)) == header.stored_checksum


def torn_bits_hold(page: bytes) -> bool:
    """Whether every sector after the first ends in the write's 2-bit pattern (see the module docstring)."""
    pattern = struct.unpack_from("<I", page, CHECKSUM_AT)[0] & 3
    return all(page[sector * SECTOR + SECTOR - 1] & 3 == pattern for sector in range(1, SECTORS))


def torn_sectors(page: bytes) -> list[int]:
    pattern = struct.unpack_from("<I", page, CHECKSUM_AT)[0] & 3
    return [sector for sector in range(1, SECTORS) if page[sector * SECTOR + SECTOR - 1] & 3 != pattern]


def protection(page: bytes, header: PageHeader, computed: int) -> tuple[str, PageProblem | None]:
    """How a page is protected ("checksum"; "torn": torn-page bits; "none") and what that protection
    says is wrong with it, if anything."""
    if header.has_checksum:
        if computed != header.stored_checksum:
            return "checksum", ("checksum mismatch", header.stored_checksum, computed)
        return "checksum", None
    if header.stored_checksum and _flag_cleared(page, header):
        # The field holds the checksum of this very page with the flag set (a chance match is one in
        # 2**32): it was written with one, and a damaged m_flagBits hides it. Said, never counted as a
        # page without protection.
        return "none", (f"checksum flag cleared: m_flagBits {header.flag_bits:#06x} lacks 0x200, "
                        "yet the stored field is the checksum of the page with it set", header.stored_checksum,
                        computed)
    if header.has_torn_bits:
        torn = torn_sectors(page)
        if torn:
            return "torn", (f"torn page: sector{'s' if len(torn) > 1 else ''} "
                            f"{', '.join(map(str, torn))} do{'' if len(torn) > 1 else 'es'} not end in "
                            f"the write's pattern {header.stored_checksum & 3:02b}", None, None)
        return "torn", None
    return "none", None


@dataclass(frozen=True)
class PageFinding:
    """One thing wrong with one page: where it is in the backup file and what it says it is."""

    path: str
    offset: int
    page: str  # "file:page" as the page's header names it (as its slot names it where the header is noise)
    object_id: int
    index_id: int
    reason: str
    stored_checksum: int | None = None
    computed_checksum: int | None = None


@dataclass(frozen=True)
class PageScan:
    path: str
    pages: int
    checksummed: int
    without_checksum: int
    torn_page_protected: int
    zeroed: int
    unformatted: int
    by_type: dict[int, int] = field(default_factory=dict)
    findings: tuple[PageFinding, ...] = ()
    bytes_checked: int = 0  # of pages, as read from the file
    # Pages whose header names the place they sit in, agreed by another page of their extent: a plain
    # page for sure. None at all in a file of pages means they are not plain (encrypted, overwritten):
    # a lone page of noise can look formatted by chance, two agreeing on their extent cannot.
    placed: int = 0
    # Formatted pages that do not fit their slot, in a slot the PFS does not mark allocated: an earlier
    # page's bytes left in an unused page of an allocated extent (see `_Scan.misplaced`). Counted, not checked.
    stale: int = 0


@dataclass(frozen=True)
class DataStream:
    offset: int  # of the first page
    pages: int
    # Which MSDA block of the set holds the stream (0, 1, ...). SQL Server 2019 and 2022 end the data of
    # every full and differential with a second MSDA block holding the data file's first 16 pages again
    # (the file header and boot page as they are at the end of the copy): a page met again in a later
    # block is that refresh, not a page written twice.
    block: int = 0


def _block(reader: ByteRangeReader, offset: int, size: int) -> bytes:
    block = reader.read(offset, COMMON_HEADER) if offset + COMMON_HEADER <= size else b""
    if len(block) < COMMON_HEADER:
        raise MtfError(reader.name, offset, "descriptor block", "a complete 52-byte header", "end of file")
    stored, computed = struct.unpack_from("<H", block, 50)[0], header_checksum(block)
    if stored != computed:
        raise MtfError(reader.name, offset, f"{block[:4].decode('latin-1')} block header checksum",
                       f"{computed:#06x}", f"{stored:#06x}")
    return block


def _block_streams(reader: ByteRangeReader, offset: int, block: bytes,
                   size: int) -> tuple[list[tuple[bytes, int, int]], int]:
    """The streams of a block as (id, data offset, length), and the offset of the next block."""
    position = offset + struct.unpack_from("<H", block, 8)[0]
    if block[:4] == b"SFMB":
        return [], position
    streams: list[tuple[bytes, int, int]] = []
    for _ in range(64):
        if position + STREAM_HEADER > size:
            # Also where a stream's data runs past the end: the walk steps over it to the next header.
            raise MtfError(reader.name, position, "stream header", f"{STREAM_HEADER} bytes",
                           f"end of file at {size:#x}: the file is truncated")
        header = reader.read(position, STREAM_HEADER)
        stream_id, length = header[:4], struct.unpack_from("<Q", header, 8)[0]
        if struct.unpack_from("<H", header, 20)[0] != stream_checksum(header):
            raise MtfError(reader.name, position, f"{stream_id.decode('latin-1')} stream header checksum",
                           f"{stream_checksum(header):#06x}", f"{struct.unpack_from('<H', header, 20)[0]:#06x}")
        if stream_id == b"SPAD":
            return streams, position + STREAM_HEADER + length
        streams.append((stream_id, position + STREAM_HEADER, length))
        position = (position + STREAM_HEADER + length + 3) & ~3
    raise MtfError(reader.name, offset, "stream list", "an SPAD stream ending the block", "none")


def _set_block(reader: ByteRangeReader, start: int, size: int) -> None:
    """That the set the caller placed at `start` (its SSET block, as the file's filemark list placed it
    when the file was catalogued) is still there: otherwise the file changed since, which proves no damage."""
    block = reader.read(start, COMMON_HEADER) if start + COMMON_HEADER <= size else b""
    if (len(block) < COMMON_HEADER or block[:4] != b"SSET"
            or struct.unpack_from("<H", block, 50)[0] != header_checksum(block)):
        raise SourceError(f"{reader.name}: no backup set begins at offset {start:#x} any more: the file changed "
                          "since it was planned")


def locate_data_streams(reader: ByteRangeReader, start: int = 0) -> list[DataStream]:
    """The page runs of every non-empty MQDA stream of the MSDA block(s) of one backup set, in file order:
    the first set of the file (`start` 0: walked from the media header), or the set whose SSET block is at
    `start` (BackupHeader.set_offset of a set appended WITH NOINIT: walked from there, so no other set's
    pages are read). The caller has the file's headers: reading them here again, once per set, would read
    every set's headers as many times as the file has sets."""
    size = reader.size()
    head = reader.read(0, min(size, 8)) if size else b""
    if head[:8] == COMPRESSED_MAGIC:
        raise NeedsServerHeaderOnly(f"{reader.name}: natively compressed backup (starts with MSSQLBAK): "
                                    "its pages can only be read by a SQL Server restoring it")
    if head[:4] != b"TAPE":
        raise MtfError(reader.name, 0, "media header", "'TAPE' (Microsoft Tape Format)", repr(head))
    if start:
        _set_block(reader, start, size)
    found: list[DataStream] = []
    offset, seen_data, blocks = start, False, 0
    for _ in range(MAX_BLOCKS):
        block = _block(reader, offset, size)
        kind = block[:4]
        if seen_data and kind != b"MSDA":
            return found
        if kind in (b"MSTL", b"MSLS", b"ESET"):
            break
        streams, next_offset = _block_streams(reader, offset, block, size)
        if kind == b"MSDA":
            seen_data = True
            found.extend(dataclasses.replace(_pages_of(reader, stream_offset, length), block=blocks)
                         for stream_id, stream_offset, length in streams if stream_id == b"MQDA" and length)
            blocks += 1
        if next_offset <= offset:
            raise MtfError(reader.name, offset, "block walk", "a next block past this one", f"{next_offset:#x}")
        offset = next_offset
    raise MtfError(reader.name, offset, "data pages", "an MSDA block before the log (MSTL) blocks",
                   f"{kind.decode('latin-1')}: not a full or differential backup, or damaged")


def _pages_of(reader: ByteRangeReader, offset: int, length: int) -> DataStream:
    if (length - STREAM_PREFIX) % PAGE:
        raise MtfError(reader.name, offset, "MQDA data stream", f"{STREAM_PREFIX} + a multiple of {PAGE} bytes",
                       f"{length} bytes")
    prefix = reader.read(offset, STREAM_PREFIX)
    if prefix != bytes(STREAM_PREFIX):
        raise MtfError(reader.name, offset, "MQDA data stream prefix", "00 00", prefix.hex(" "))
    return DataStream(offset + STREAM_PREFIX, (length - STREAM_PREFIX) // PAGE)


MAX_EXTENTS = 1 << 28  # 2^31 pages: SQL Server's largest data file (16 TB)
Marks = npt.NDArray[np.uint32 | np.uint64]


class _Seen:
    """Which pages of each file the scan has met and where, so that no page is met twice unnoticed.

    Per file, one u32 per extent: 0 = not met, `slow` (the largest value) = met page by page (then
    `pages` has them), else 1 + the position of the extent's first page, met whole (the fast path).
    Positions run on across the families of a backup set; past 2^32 - 2 pages (32 TiB) the arrays
    are widened to u64 rather than let a position wrap."""

    def __init__(self) -> None:
        self.extents: dict[int, Marks] = {}
        self.pages: dict[tuple[int, int], int] = {}
        self.dtype: type[np.uint32] | type[np.uint64] = np.uint32
        self.slow = int(np.iinfo(np.uint32).max)

    def _widen(self) -> None:
        slow = int(np.iinfo(np.uint64).max)
        for file_id, array in self.extents.items():
            wide = array.astype(np.uint64)
            wide[array == self.slow] = slow
            self.extents[file_id] = wide
        self.dtype, self.slow = np.uint64, slow

    def _array(self, file_id: int, needed: int, *, grow_far: bool) -> Marks | None:
        array = self.extents.get(file_id)
        have = 0 if array is None else len(array)
        if needed <= have:
            return array
        # A page id read from a page without a valid checksum may be anything: never grow far for it.
        if needed > MAX_EXTENTS or (not grow_far and needed > 2 * have + 4096):
            return None
        grown: Marks = np.zeros(max(needed, 2 * have, 1024), dtype=self.dtype)
        if array is not None:
            grown[:have] = array
        for (file, page) in self.pages:  # pages met before the array reached them
            if file == file_id and have <= page >> 3 < len(grown):
                grown[page >> 3] = self.slow
        self.extents[file_id] = grown
        return grown

    def page(self, file_id: int, page_id: int, position: int) -> int | None:
        """Record one page met at `position`; the position it was first met at if it was met before."""
        array = self._array(file_id, (page_id >> 3) + 1, grow_far=False)
        mark = int(array[page_id >> 3]) if array is not None else 0
        if mark not in (0, self.slow):
            return mark - 1 + (page_id & 7)
        first = self.pages.get((file_id, page_id))
        if first is not None:
            return first
        self.pages[(file_id, page_id)] = position
        if array is not None:
            array[page_id >> 3] = self.slow
        return None

    def met(self, file_id: int, page_id: int) -> int | None:
        """Where a page was met, without recording anything; None if it was not."""
        array = self.extents.get(file_id)
        if array is not None and page_id >> 3 < len(array):
            mark = int(array[page_id >> 3])
            if mark not in (0, self.slow):
                return mark - 1 + (page_id & 7)
        return self.pages.get((file_id, page_id))

    def extents_met(self, file_id: int, extents: npt.NDArray[np.int64],
                    positions: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Record whole extents of one file; a mask of those that need a page-by-page look."""
        if int(positions.max()) + 1 >= self.slow:
            self._widen()
        array = self._array(file_id, int(extents.max()) + 1, grow_far=True)
        if array is None:
            return np.ones(len(extents), dtype=bool)
        again: npt.NDArray[np.bool_] = array[extents] != 0
        if len(extents) > 1 and not bool(np.all(extents[1:] > extents[:-1])):  # out of order within the block
            again[:] = True
        fresh = ~again
        array[extents[fresh]] = (positions[fresh] + 1).astype(array.dtype)
        return again


@dataclass(frozen=True)
class _Misplaced:
    """What a formatted page that does not fit its slot would be found to be, if its slot is in use."""

    position: int
    protection: str  # how it counts once judged: "checksum", "torn" or "none" (see `protection`)
    problems: tuple[PageProblem, ...]  # its place first, then its type and file
    damage: PageProblem | None  # what its checksum or torn-page bits say


@dataclass
class _Pending:
    """A zero, unformatted or misplaced page whose slot names a page: a finding only if the PFS marks
    that page allocated."""

    offset: int
    file_id: int
    page_id: int
    header: PageHeader
    what: str
    misplaced: _Misplaced | None = None


@dataclass(frozen=True)
class _Block:
    """What the bulk checks found in one block of pages."""

    count: int
    computed: U32  # every page's checksum, as computed
    file_id: U32
    page_id: U32
    kind: U32
    torn: npt.NDArray[np.bool_]  # protected by torn-page bits rather than a checksum
    plain: npt.NDArray[np.bool_]  # per whole extent: every page verified, formatted, in its slot, known type
    extent_file: U32  # per whole extent: the file and extent number its first page names
    extent: npt.NDArray[np.int64]
    plain_count: int
    plain_torn: int
    plain_types: npt.NDArray[np.int64]
    plain_pfs: npt.NDArray[np.intp]


_SLOTS = np.tile(np.arange(EXTENT, dtype=np.uint32), READ_PAGES // EXTENT)


def _prepare(data: memoryview | bytes, count: int, sizes: npt.NDArray[np.int64] | None) -> _Block:
    """The bulk checks of `count` pages: arrays in, arrays out, no state of the scan touched."""
    words = np.frombuffer(data, dtype="<u4", count=count * PAGE // 4).reshape(count, SECTORS, -1)
    computed = page_checksums(words)
    head = np.ascontiguousarray(words[:, 0, :16])  # the header's first 64 bytes, page by page
    first, second, page_id, stored = head[:, 0], head[:, 1], head[:, 8], head[:, 15]
    file_id: U32 = head[:, 9] & np.uint32(0xFFFF)
    kind: U32 = (first >> np.uint32(8)) & np.uint32(0xFF)
    checksum = (second & FLAG_CHECKSUM) != 0
    verified = checksum & (computed == stored)
    torn = ((second & FLAG_TORN) != 0) & ~checksum
    if torn.any():
        ends = np.frombuffer(data, dtype=np.uint8, count=count * PAGE)[SECTOR - 1::SECTOR].reshape(count, SECTORS)
        verified |= torn & np.all((ends[:, 1:] & 3) == (stored & 3).astype(np.uint8)[:, None], axis=1)
    # In its slot: page id = extent start + slot (checked per extent below), in a file, known type.
    good = verified & ((first & 0xFF) == 1) & _KNOWN_TYPE[kind] & (file_id != 0) & ((page_id & 7) == _SLOTS[:count])
    if sizes is not None:
        good &= page_id < sizes[file_id]
    groups = count // EXTENT
    whole = groups * EXTENT
    key = ((file_id[:whole].astype(np.int64) << 32) | page_id[:whole]) >> 3  # (file, extent number)
    key = key.reshape(groups, EXTENT)
    plain = good[:whole].reshape(groups, EXTENT).all(axis=1) & np.all(key == key[:, :1], axis=1)
    plain_count = int(np.count_nonzero(plain))
    block = _Block(count, computed, file_id, page_id, kind, torn, plain, file_id[:whole:EXTENT],
                   (page_id[:whole:EXTENT] >> 3).astype(np.int64), plain_count, 0, np.zeros(256, np.int64),
                   np.zeros(0, np.intp))
    return _recount(block, plain) if plain_count else block


def _recount(block: _Block, plain: npt.NDArray[np.bool_]) -> _Block:
    pages = np.repeat(plain, EXTENT)
    whole = len(pages)
    kinds = block.kind[:whole][pages]
    return replace(block, plain=plain, plain_count=int(np.count_nonzero(plain)),
                   plain_torn=int(np.count_nonzero(block.torn[:whole][pages])),
                   plain_types=np.bincount(kinds, minlength=256),
                   plain_pfs=np.flatnonzero(pages & (block.kind[:whole] == TYPE_PFS)))


class _Together:
    """What the files (families) of one backup set know together: every page met in any of them, and
    every PFS page read in any of them. Positions count the set's pages in the order they are read,
    family after family, so one position names one place: a file and an offset."""

    def __init__(self) -> None:
        self.seen = _Seen()
        # (file id, PFS interval) -> allocated, per page; and the file the PFS page was read in.
        self.pfs: dict[tuple[int, int], tuple[npt.NDArray[np.bool_], str]] = {}
        self.firsts: list[int] = []  # the first position of every data stream read, in order
        self.places: list[tuple[str, int]] = []  # (file, offset of that stream's first page)
        self.blocks: list[int] = []  # the MSDA block of the set that stream lies in
        self.position = 0  # where the next family's pages start

    def stream(self, position: int, path: str, offset: int, block: int = 0) -> None:
        self.firsts.append(position)
        self.places.append((path, offset))
        self.blocks.append(block)

    def refreshed(self, first: int, position: int) -> bool:
        """Whether the page met at `position` re-sends the one met at `first` from a later MSDA block of
        the same file (DataStream.block)."""
        before, now = (bisect.bisect_right(self.firsts, at) - 1 for at in (first, position))
        return self.places[before][0] == self.places[now][0] and self.blocks[before] < self.blocks[now]

    def place(self, position: int) -> tuple[str, int]:
        at = bisect.bisect_right(self.firsts, position) - 1
        path, offset = self.places[at]
        return path, offset + (position - self.firsts[at]) * PAGE


class _Scan:
    """The running counts of one file's scan: whole blocks in bulk, odd extents page by page; what
    the file's backup set knows together (pages met, PFS pages) is shared with its other families."""

    def __init__(self, path: str, files: Mapping[int, int] | None, together: _Together) -> None:
        self.path = path
        self.files = files
        self.pages = self.checksummed = self.without = self.torn = self.zeroed = self.unformatted = self.stale = 0
        self.placed = 0
        self.bytes = 0
        self.by_type = np.zeros(256, dtype=np.int64)
        self.findings: list[PageFinding] = []
        self.together = together
        self.seen = self.together.seen
        self.position = self.together.position
        self.pending: list[_Pending] = []
        # File id -> size in pages, -1 for no such file: a lookup the bulk path can index.
        self.sizes = np.full(1 << 16, -1, dtype=np.int64)
        if files is not None:
            for file_id, size in files.items():
                self.sizes[file_id] = size

    def stream(self, stream: DataStream) -> None:
        self.together.stream(self.position, self.path, stream.offset, stream.block)

    def where(self, position: int) -> str:
        """Where a page met at `position` is: its offset, and its file when it is another of the set."""
        path, offset = self.together.place(position)
        return f"{offset:#x}" if path == self.path else f"{offset:#x} in {path}"

    def finding(self, offset: int, header: PageHeader, reason: str, stored: int | None = None,
                computed: int | None = None, name: str | None = None) -> None:
        self.findings.append(PageFinding(self.path, offset, name or header.name, header.object_id,
                                         header.index_id, reason, stored, computed))

    # The bulk path.

    def block(self, offset: int, data: memoryview, count: int) -> None:
        """Check `count` pages read at `offset`: the bulk checks, then what needs the scan's state."""
        self.merge(offset, data, _prepare(data, count, self.sizes if self.files is not None else None))

    def merge(self, offset: int, data: memoryview, block: _Block) -> None:
        """Take in one prepared block: the plain extents in bulk, every other extent page by page."""
        count = block.count
        self.bytes += count * PAGE
        plain = block.plain
        if block.plain_count:
            groups = np.flatnonzero(plain)
            again = self.seen_extents(block.extent_file[groups], block.extent[groups], groups)
            if again.any():  # met before: the page-by-page path says which pages, and where first
                plain = plain.copy()
                plain[groups[again]] = False
                block = _recount(block, plain)
        self.pages += EXTENT * block.plain_count
        self.placed += EXTENT * block.plain_count
        self.checksummed += EXTENT * block.plain_count - block.plain_torn
        self.without += block.plain_torn
        self.torn += block.plain_torn  # a plain page without a checksum is one whose torn-page bits held
        self.by_type += block.plain_types
        for at in block.plain_pfs:
            self.keep_pfs(int(block.file_id[at]), int(block.page_id[at]), data, int(at))
        for group in np.flatnonzero(~plain):
            self.group(offset, data, int(group) * EXTENT, EXTENT, block.computed)
        whole = len(plain) * EXTENT
        if whole < count:
            self.group(offset, data, whole, count - whole, block.computed)
        self.position += count

    def seen_extents(self, files: npt.NDArray[np.uint32], extents: npt.NDArray[np.int64],
                     groups: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
        positions = self.position + groups.astype(np.int64) * EXTENT
        if files[0] == files[-1] and bool(np.all(files == files[0])):  # one file: the usual case
            return self.seen.extents_met(int(files[0]), extents, positions)
        again = np.zeros(len(groups), dtype=bool)
        for file_id in np.unique(files):
            mine = files == file_id
            again[mine] = self.seen.extents_met(int(file_id), extents[mine], positions[mine])
        return again

    def keep_pfs(self, file_id: int, page_id: int, data: memoryview | bytes, at: int) -> None:
        if page_id == 1 or (page_id and page_id % PFS_INTERVAL == 0):
            start = at * PAGE + PFS_BYTES_AT
            bytemap = np.frombuffer(data, dtype=np.uint8, count=PFS_INTERVAL, offset=start)
            self.together.pfs[(file_id, page_id // PFS_INTERVAL)] = ((bytemap & PFS_ALLOCATED) != 0, self.path)

    # The page-by-page path: everything that makes a finding.

    def group(self, offset: int, data: memoryview, start: int, count: int, computed: U32) -> None:
        pages = [bytes(data[(start + slot) * PAGE:(start + slot + 1) * PAGE]) for slot in range(count)]
        headers = [decode_header(page) for page in pages]
        # The extent the group's formatted pages agree on: (file, first page of the extent).
        votes = Counter((h.file_id, h.page_id - slot) for slot, h in enumerate(headers)
                        if h.header_version == 1 and h.file_id != 0)
        expected, agreed = votes.most_common(1)[0] if votes else (None, 0)
        if agreed >= 2:
            self.placed += agreed
        # Which extent this is, for sure: two pages or more agree on it and no other extent has as many.
        settled = agreed >= 2 and (len(votes) == 1 or votes.most_common(2)[1][1] < agreed)
        for slot, (page, header) in enumerate(zip(pages, headers, strict=True)):
            self.page(offset + (start + slot) * PAGE, self.position + start + slot, page, header, slot,
                      expected, int(computed[start + slot]), data, start + slot, settled)

    def page(self, offset: int, position: int, page: bytes, header: PageHeader, slot: int,
             expected: tuple[int, int] | None, computed: int, data: memoryview, at: int,
             settled: bool) -> None:
        self.pages += 1
        fits = expected is not None and (header.file_id, header.page_id) == (expected[0], expected[1] + slot)
        if page == ZERO_PAGE:
            self.zeroed += 1
            self.pend(offset, expected, slot, header, "is all zeros")
            return
        if header.header_version != 1:
            if not fits:
                self.unformatted += 1  # stale bytes never formatted, unless the PFS says the page is in use
                self.pend(offset, expected, slot, header, f"is not formatted (header version "
                          f"{header.header_version}, page id {header.name})")
                return
        elif expected is not None and not fits:
            if settled:
                self.misplaced(offset, position, page, header, slot, expected, computed)
                return
            # Extents in a tie: which pages are out of place is not known, so none is taken for stale bytes.
            self.finding(offset, header, f"page out of place: slot {slot} of the extent of {expected[0]}:"
                         f"{expected[1]} holds page {header.name}")
        self.by_type[header.page_type] += 1
        if header.header_version == 1 and header.page_type not in PAGE_TYPES:
            self.finding(offset, header, f"unknown page type {header.page_type}")
        if header.file_id != 0:
            if (outside := self.outside(header)) is not None:
                self.finding(offset, header, outside)
            first = self.seen.page(header.file_id, header.page_id, position)
            if first is not None and not self.together.refreshed(first, position):
                self.finding(offset, header, f"page {header.name} seen twice: first at offset {self.where(first)}")
        if self.check(offset, page, header, computed) and fits and header.page_type == TYPE_PFS:
            self.keep_pfs(header.file_id, header.page_id, data, at)

    def misplaced(self, offset: int, position: int, page: bytes, header: PageHeader, slot: int,
                  expected: tuple[int, int], computed: int) -> None:
        """A formatted page whose header names another page than the one its extent's pages agree on.

        SQL Server copies whole extents: an unallocated page of an allocated extent is copied as it
        lies on disk, and may hold the bytes of any page that was there before (header version 1, any
        page id, a checksum that holds or not). So such a page is judged by the PFS once the whole set
        is read (`allocation`): what is wrong with it is a finding only if its slot is allocated. It is
        not recorded as met, lest the page it copies be taken for a page written twice."""
        problems: list[PageProblem] = [(f"page out of place: slot {slot} of the extent of {expected[0]}:{expected[1]} "
                                    f"holds page {header.name}", None, None)]
        if header.page_type not in PAGE_TYPES:
            problems.append((f"unknown page type {header.page_type}", None, None))
        if header.file_id != 0 and (outside := self.outside(header)) is not None:
            problems.append((outside, None, None))
        kind, damage = protection(page, header, computed)
        self.pending.append(_Pending(offset, expected[0], expected[1] + slot, header, "is out of place",
                                     _Misplaced(position, kind, tuple(problems), damage)))

    def outside(self, header: PageHeader) -> str | None:
        """Why the page's id is not a page of the database's files, if it is not."""
        if self.files is None:
            return None
        size = self.files.get(header.file_id)
        if size is None:
            return (f"file id {header.file_id} is not a file of the database "
                    f"(files {', '.join(str(f) for f in sorted(self.files))})")
        if header.page_id >= size:
            return f"page {header.name} lies past the end of file {header.file_id} ({size} pages)"
        return None

    def pend(self, offset: int, expected: tuple[int, int] | None, slot: int, header: PageHeader,
             what: str) -> None:
        if expected is not None:
            self.pending.append(_Pending(offset, expected[0], expected[1] + slot, header, what))

    def protected(self, kind: str) -> None:
        if kind == "checksum":
            self.checksummed += 1
        else:
            self.without += 1
        if kind == "torn":
            self.torn += 1

    def check(self, offset: int, page: bytes, header: PageHeader, computed: int) -> bool:
        kind, damage = protection(page, header, computed)
        self.protected(kind)
        if damage is not None:
            self.finding(offset, header, *damage)
        return damage is None

    def allocation(self) -> None:
        """Judge the zero, unformatted and misplaced pages by the PFS pages: once every family of the set is read."""
        for pending in self.pending:
            allocated = self.allocated(pending)
            if pending.misplaced is not None:
                self.judge_misplaced(pending, pending.misplaced, allocated)
            elif allocated is not None:
                self.finding(pending.offset, pending.header, f"{allocated} but {pending.what}",
                             name=f"{pending.file_id}:{pending.page_id}")

    def own_slot_in_use(self, pending: _Pending) -> bool:
        """Whether a misplaced page's own id lies at its slot's place in an extent and the PFS marks it allocated."""
        header = pending.header
        if header.file_id == 0 or header.page_id % EXTENT != pending.page_id % EXTENT:
            return False
        own = _Pending(pending.offset, header.file_id, header.page_id, header, pending.what)
        return self.allocated(own) is not None

    def allocated(self, pending: _Pending) -> str | None:
        """"page f:p is allocated (PFS page ...)" where a PFS page read in the set says so; else None
        (not allocated, or no PFS page of the set covers it)."""
        interval = pending.page_id // PFS_INTERVAL
        known = self.together.pfs.get((pending.file_id, interval))
        if known is None or not known[0][pending.page_id % PFS_INTERVAL]:
            return None
        read_in = "" if known[1] == self.path else f" in {known[1]}"
        return (f"page {pending.file_id}:{pending.page_id} is allocated "
                f"(PFS page {pending.file_id}:{PFS_INTERVAL * interval or 1}{read_in})")

    def judge_misplaced(self, pending: _Pending, misplaced: _Misplaced, allocated: str | None) -> None:
        """A page out of place in an allocated slot is damage, said with all that is wrong with it; in a
        slot not in use (or that no PFS page covers) it is an earlier page's bytes: counted, not checked."""
        header = pending.header
        if allocated is None and self.own_slot_in_use(pending):
            # Its own id is in use and at its place in an extent: the real page of an extent whose stale
            # pages outvoted it (they may hold any ids). Checked as the page it says it is.
            self.by_type[header.page_type] += 1
            self.protected(misplaced.protection)
            if misplaced.damage is not None:
                self.finding(pending.offset, header, *misplaced.damage)
            return
        if allocated is None:
            self.stale += 1
            return
        self.by_type[header.page_type] += 1
        self.protected(misplaced.protection)
        (place, _, _), *problems = misplaced.problems
        self.finding(pending.offset, header, f"{place}, and {allocated}")
        for reason, stored, computed in problems:
            self.finding(pending.offset, header, reason, stored, computed)
        other = self.seen.met(header.file_id, header.page_id) if header.file_id else None
        position = misplaced.position
        if other is not None and not self.together.refreshed(min(other, position), max(other, position)):
            self.finding(pending.offset, header, f"page {header.name} seen twice: "
                         f"{'first' if other < position else 'also'} at offset {self.where(other)}")
        if misplaced.damage is not None:
            self.finding(pending.offset, header, *misplaced.damage)

    def result(self) -> PageScan:
        """The file's counts and findings: after `allocation`, which needs the whole set read."""
        by_type = {int(kind): int(n) for kind, n in enumerate(self.by_type) if n}
        findings = tuple(sorted(self.findings, key=lambda finding: finding.offset))  # stable: per page, in order
        return PageScan(self.path, self.pages, self.checksummed, self.without, self.torn, self.zeroed,
                        self.unformatted, by_type, findings, self.bytes, self.placed, self.stale)


class _Into(Protocol):
    def read_into(self, offset: int, buffer: memoryview) -> int: ...


class _Copying:
    """read_into for a reader that only has read(): one copy more, same answers."""

    def __init__(self, reader: ByteRangeReader) -> None:
        self.reader = reader

    def read_into(self, offset: int, buffer: memoryview) -> int:
        data = self.reader.read(offset, len(buffer))
        buffer[:min(len(data), len(buffer))] = data[:len(buffer)]
        return len(data)


def _read(into: _Into, name: str, offset: int, count: int, buffer: bytearray) -> memoryview:
    """`count` pages from `offset` into `buffer`."""
    view = memoryview(buffer)[:count * PAGE]
    filled = into.read_into(offset, view)
    if filled != count * PAGE:  # a reader that answers short rather than refusing
        raise MtfError(name, offset, "data pages", f"{count * PAGE} bytes", f"{filled} bytes")
    return view


@contextmanager
def _sequential(reader: ByteRangeReader) -> Iterator[_Into]:
    """The reader's own sequential reader where it has one (one open file for the whole scan)."""
    opener = getattr(reader, "sequential", None)
    if opener is None:
        yield _Copying(reader)
        return
    with opener() as into:
        yield into


def _blocks(into: _Into, name: str, stream: DataStream, buffer: bytearray) -> Iterator[tuple[int, memoryview, int]]:
    """The stream's pages, READ_PAGES at a time, in order, each read into the same buffer."""
    for first in range(0, stream.pages, READ_PAGES):
        count = min(READ_PAGES, stream.pages - first)
        offset = stream.offset + first * PAGE
        yield offset, _read(into, name, offset, count, buffer), count


def _reads(streams: list[DataStream]) -> Iterator[tuple[DataStream, int, int]]:
    """Every read of the scan, in order: (its stream, the byte offset, the page count)."""
    for stream in streams:
        for first in range(0, stream.pages, READ_PAGES):
            yield stream, stream.offset + first * PAGE, min(READ_PAGES, stream.pages - first)


def _scan_inline(scan: _Scan, into: _Into, name: str, streams: list[DataStream]) -> None:
    buffer = bytearray(min(READ_PAGES, max((stream.pages for stream in streams), default=0)) * PAGE)
    for stream in streams:
        scan.stream(stream)
        # READ_PAGES is a multiple of EXTENT, so an extent never straddles two reads.
        for offset, data, count in _blocks(into, name, stream, buffer):
            scan.block(offset, data, count)


def _scan_overlapped(scan: _Scan, into: _Into, name: str, streams: list[DataStream]) -> None:
    """Read and check in WORKERS threads, merge in order in this one.

    Each worker reads its block (pread: the kernel's copy) and runs the bulk checks (numpy); both
    let go of the GIL, so on two cores the copy of block k+1 runs beside the checks of block k.
    Measured in bench/mssql_pages.py (warm cache, 1 GiB): 0.4-0.5x a plain read on one thread,
    0.8-1.0x so. Only `merge` (the scan's state, page-by-page checks) runs here, in read order, so
    findings and counts are those of the inline scan. A block's buffer is used again only after
    its merge: DEPTH buffers, at most DEPTH - 1 reads in flight."""
    sizes = scan.sizes if scan.files is not None else None
    buffers = [bytearray(READ_BYTES) for _ in range(DEPTH)]

    def job(index: int, offset: int, count: int) -> tuple[memoryview, _Block]:
        data = _read(into, name, offset, count, buffers[index % DEPTH])
        return data, _prepare(data, count, sizes)

    reads = enumerate(_reads(streams))
    pending: deque[tuple[DataStream, int, Future[tuple[memoryview, _Block]]]] = deque()
    pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="restoreproof-pages")
    try:
        current: DataStream | None = None
        while True:
            while len(pending) < DEPTH - 1 and (upcoming := next(reads, None)) is not None:
                index, (stream, offset, count) = upcoming
                pending.append((stream, offset, pool.submit(job, index, offset, count)))
            if not pending:
                return
            stream, offset, future = pending.popleft()
            data, block = future.result()
            if stream is not current:
                scan.stream(stream)
                current = stream
            scan.merge(offset, data, block)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # no reader left running on the file, also on error


class SetScan:
    """The files (families, stripes) of one backup set, scanned one after another as one backup.

    SQL Server spreads a striped backup's extents over its families: a PFS page read in one family
    says which pages of the others are allocated, and a page met in two families (each page is
    written once per backup) is damage. So the families share what was met (`_Seen`, positions
    running on from one family to the next) and the PFS pages read; the allocation rule is decided
    in `results`, once every family is read. Each family keeps its own counts and findings, named by
    its own file and offset. A family that raises is left out of the results; what was read of it
    before stays known to the others (the pages it holds are in the backup all the same)."""

    def __init__(self) -> None:
        self.together = _Together()
        self.scans: list[_Scan] = []
        self.done = False

    def add(self, reader: ByteRangeReader, files: Mapping[int, int] | None = None, start: int = 0,
            name: str | None = None) -> None:
        """Scan one family (of the set whose SSET block is at `start` in its file, the first set by default:
        see `locate_data_streams`), its findings named `name` (the file's by default); raises as
        `scan_pages` does (damaged structure, compressed, unreadable)."""
        if self.done:
            raise ValueError("a backup set's families are all added before its results are taken")
        scan = _Scan(name or reader.name, files, self.together)
        try:
            streams = locate_data_streams(reader, start)
            with _sequential(reader) as into:
                # Threads only pay where there is a second read to overlap and the reader allows it.
                if WORKERS > 1 and getattr(into, "concurrent", False) and sum(s.pages for s in streams) > READ_PAGES:
                    _scan_overlapped(scan, into, reader.name, streams)
                else:
                    _scan_inline(scan, into, reader.name, streams)
        finally:
            self.together.position = scan.position  # a position is never given to two pages, even on error
        self.scans.append(scan)

    def results(self) -> list[PageScan]:
        """One PageScan per family added, in the order added, the allocation rule decided over all."""
        if not self.done:
            for scan in self.scans:
                scan.allocation()
            self.done = True
        return [scan.result() for scan in self.scans]


def scan_set(readers: Sequence[ByteRangeReader], files: Mapping[int, int] | None = None) -> list[PageScan]:
    """Walk every data page of the families of one full or differential backup set, as one backup
    (see SetScan); one PageScan per family, in the order given. `files` as for scan_pages."""
    family = SetScan()
    for reader in readers:
        family.add(reader, files)
    return family.results()


def scan_pages(reader: ByteRangeReader, files: Mapping[int, int] | None = None) -> PageScan:
    """Walk every data page of a full or differential backup and verify what can be verified.

    `files`, when given, is the database's files as the backup lists them (file id -> size in
    pages): a page outside them is a finding. One file alone: a backup set of one family."""
    (result,) = scan_set([reader], files)
    return result
