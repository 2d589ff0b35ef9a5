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
  = extent start + slot. A database's second data file follows the first in the same stream
  (file 3 in sql2008-backups/db1).
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
  0x3C m_tornBits u32: the checksum when flag 0x200 is set.
The checksum (published by several authors; confirmed: every formatted, checksummed page of the
corpus matches): the page as 16 sectors of 128 little-endian u32 words, m_tornBits counted as 0;
each sector's words XORed together, rotated left by 15 - sector index, and the 16 results XORed.

Torn-page bits (flag 0x100 without 0x200) appear on no formatted page of the corpus: such pages
are counted as torn-page protected but their bits are not checked yet.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field

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

PAGE = 8192
SECTOR = 512
EXTENT = 8
PAGE_HEADER = 96
STREAM_PREFIX = 2  # the bytes before the first page of an MQDA stream (00 00 in every corpus file)
CHECKSUM_AT = 0x3C
FLAG_CHECKSUM = 0x200
FLAG_TORN = 0x100
READ_PAGES = 128  # pages read at once: 1 MiB
ZERO_PAGE = bytes(PAGE)
MAX_BLOCKS = 1 << 20  # a bound on the block walk, far above any real file's block count

# Page types documented for SQL Server (Paul Randal, "Anatomy of a page"), and 101, seen in the
# corpus only as page 0:0 at the end of a data stream.
PAGE_TYPES = {1: "data", 2: "index", 3: "text mix", 4: "text tree", 7: "sort", 8: "GAM", 9: "SGAM",
              10: "IAM", 11: "PFS", 13: "boot", 14: "server config", 15: "file header",
              16: "differential map", 17: "bulk-logged map", 18: "deallocated during sort",
              19: "unlinked reorganisation", 20: "bulk-load preallocated", 101: "backup filler"}


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
    view = memoryview(page)
    checksum = 0
    for sector in range(PAGE // SECTOR):
        folded = _xor_words(view[sector * SECTOR:(sector + 1) * SECTOR])
        if sector == 0:  # the stored checksum counts as zero: XOR it back out
            folded ^= struct.unpack_from("<I", page, CHECKSUM_AT)[0]
        shift = 15 - sector
        checksum ^= ((folded << shift) | (folded >> (32 - shift))) & 0xFFFFFFFF
    return checksum


@dataclass(frozen=True)
class PageFinding:
    """One thing wrong with one page: where it is in the backup file and what it says it is."""

    path: str
    offset: int
    page: str  # "file:page" as the page's header names it
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


@dataclass(frozen=True)
class DataStream:
    offset: int  # of the first page
    pages: int


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


def locate_data_streams(reader: ByteRangeReader) -> list[DataStream]:
    """The page runs of every non-empty MQDA stream of the MSDA block(s), in file order."""
    size = reader.size()
    head = reader.read(0, min(size, 8)) if size else b""
    if head[:8] == COMPRESSED_MAGIC:
        raise NeedsServerHeaderOnly(f"{reader.name}: natively compressed backup (starts with MSSQLBAK): "
                                    "its pages can only be read by a SQL Server restoring it")
    if head[:4] != b"TAPE":
        raise MtfError(reader.name, 0, "media header", "'TAPE' (Microsoft Tape Format)", repr(head))
    found: list[DataStream] = []
    offset, seen_data = 0, False
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
            found.extend(_pages_of(reader, stream_offset, length)
                         for stream_id, stream_offset, length in streams if stream_id == b"MQDA" and length)
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


class _Scan:
    """The running counts of one file's scan; one page at a time, in extent groups."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pages = self.checksummed = self.without = self.torn = self.zeroed = self.unformatted = 0
        self.by_type: Counter[int] = Counter()
        self.findings: list[PageFinding] = []
        self.first_seen: dict[tuple[int, int], int] = {}

    def finding(self, offset: int, header: PageHeader, reason: str, stored: int | None = None,
                computed: int | None = None) -> None:
        self.findings.append(PageFinding(self.path, offset, header.name, header.object_id, header.index_id,
                                         reason, stored, computed))

    def group(self, first_offset: int, pages: list[bytes]) -> None:
        headers = [decode_header(page) for page in pages]
        # The extent the group's formatted pages agree on: (file, first page of the extent).
        votes = Counter((h.file_id, h.page_id - slot) for slot, h in enumerate(headers)
                        if h.header_version == 1 and h.file_id != 0)
        expected = votes.most_common(1)[0][0] if votes else None
        for slot, (page, header) in enumerate(zip(pages, headers, strict=True)):
            self.page(first_offset + slot * PAGE, page, header, slot, expected)

    def page(self, offset: int, page: bytes, header: PageHeader, slot: int,
             expected: tuple[int, int] | None) -> None:
        self.pages += 1
        if page == ZERO_PAGE:
            self.zeroed += 1
            return
        fits = expected is not None and (header.file_id, header.page_id) == (expected[0], expected[1] + slot)
        if header.header_version != 1:
            if not fits:
                self.unformatted += 1  # stale bytes never formatted: nothing of the header is meaningful
                return
        elif expected is not None and not fits:
            self.finding(offset, header, f"page out of place: slot {slot} of the extent of "
                         f"{expected[0]}:{expected[1]} holds page {header.name}")
        self.by_type[header.page_type] += 1
        if header.header_version == 1 and header.page_type not in PAGE_TYPES:
            self.finding(offset, header, f"unknown page type {header.page_type}")
        if header.file_id != 0:
            key = (header.file_id, header.page_id)
            if key in self.first_seen:
                self.finding(offset, header, f"page {header.name} seen twice: first at offset "
                             f"{self.first_seen[key]:#x}")
            else:
                self.first_seen[key] = offset
        self.check(offset, page, header)

    def check(self, offset: int, page: bytes, header: PageHeader) -> None:
        if header.has_checksum:
            self.checksummed += 1
            computed = page_checksum(page)
            if computed != header.stored_checksum:
                self.finding(offset, header, "checksum mismatch", header.stored_checksum, computed)
        else:
            self.without += 1
            if header.has_torn_bits:
                self.torn += 1

    def result(self) -> PageScan:
        return PageScan(self.path, self.pages, self.checksummed, self.without, self.torn, self.zeroed,
                        self.unformatted, dict(sorted(self.by_type.items())), tuple(self.findings))


def scan_pages(reader: ByteRangeReader) -> PageScan:
    """Walk every data page of a full or differential backup and verify what can be verified."""
    scan = _Scan(reader.name)
    for stream in locate_data_streams(reader):
        for first in range(0, stream.pages, READ_PAGES):
            count = min(READ_PAGES, stream.pages - first)
            offset = stream.offset + first * PAGE
            data = reader.read(offset, count * PAGE)
            if len(data) != count * PAGE:  # a reader that answers short rather than refusing
                raise MtfError(reader.name, offset, "data pages", f"{count * PAGE} bytes", f"{len(data)} bytes")
            # READ_PAGES is a multiple of EXTENT, so a group never straddles two reads.
            for group in range(0, count, EXTENT):
                pages = [data[at * PAGE:(at + 1) * PAGE] for at in range(group, min(group + EXTENT, count))]
                scan.group(offset + group * PAGE, pages)
    return scan.result()
