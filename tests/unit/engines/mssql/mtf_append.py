"""Build one backup file holding several backup sets, as `BACKUP ... WITH NOINIT` leaves it, from real
single-set backups, following the Microsoft Tape Format (MTF 1.00a). No public sample of such a file
exists; docs/sqlserver-mtf-appended-sets.md says how this is done, which fields are rewritten and what
is not known.

A file is a media header (TAPE, then a soft filemark SFMB) and, per set, SSET ... MSLS, SFMB, ESET,
ESET, SFMB. Every SFMB lists the byte offsets of the filemarks before it, newest first, so the last
SFMB of the file locates every set without a scan.

Every field rewritten lies past the 52-byte common block header; the header checksum covers only its
first 50 bytes, so the checksums SQL Server wrote stay valid and no block header changes at all.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from verification.engines.mssql.mtf import header_checksum, stream_checksum

HEADER = 52  # MTF common block header
STREAM = 22  # MTF stream header
TAPE_FAMILY_ID = 52  # u32 Media Family ID
TAPE_SOFT_FILEMARK = 64  # u16, in 512-byte units
TAPE_LOGICAL_BLOCK = 84  # u16 format logical block size, bytes
SSET_SET_NUMBER = 62  # u16 Data Set Number (RESTORE HEADERONLY's Position)
SSET_ADDRESS = 80  # u64 Physical Block Address: the SSET's own byte offset
SFMB_ENTRIES, SFMB_USED, SFMB_ARRAY = 52, 56, 72  # u32 capacity, u32 used, u64 offsets newest first
ESET_PREVIOUS = 60  # u64: 0 in the first ESET, the first ESET's byte offset in the second
ESET_SET_NUMBER = 78  # u16 Data Set Number
# The first ESET's TSMP stream (a media based catalog set map): media family id, entry count, then
# one entry for this set: u16 length, u16 data set number, ..., u64 physical block address of the SSET.
SET_MAP_FAMILY_ID, SET_MAP_SET_NUMBER, SET_MAP_ADDRESS = 0x00, 0x0A, 0x14


@dataclass(frozen=True)
class SetLayout:
    """One backup set: from its SSET to the end of its closing SFMB, in file offsets."""

    start: int
    end: int
    filemark: int  # the SFMB before the ESETs
    esets: tuple[int, int]
    set_map: int | None  # offset of the first ESET's TSMP stream data


def _u16(data: bytes | bytearray, at: int) -> int:
    value: int = struct.unpack_from("<H", data, at)[0]
    return value


def _u32(data: bytes | bytearray, at: int) -> int:
    value: int = struct.unpack_from("<I", data, at)[0]
    return value


def _u64(data: bytes | bytearray, at: int) -> int:
    value: int = struct.unpack_from("<Q", data, at)[0]
    return value


def soft_filemark_size(data: bytes) -> int:
    _block(data, 0, b"TAPE")
    return _u16(data, TAPE_SOFT_FILEMARK) * 512


def logical_block_size(data: bytes) -> int:
    _block(data, 0, b"TAPE")
    return _u16(data, TAPE_LOGICAL_BLOCK)


def _block(data: bytes, at: int, kind: bytes) -> None:
    """Refuse unless a `kind` block with a valid header checksum starts at `at`."""
    found = bytes(data[at:at + HEADER])
    if len(found) < HEADER or found[:4] != kind:
        raise ValueError(f"expected an MTF {kind.decode()} block at {at:#x}, found {found[:4]!r}")
    if _u16(found, 50) != header_checksum(found):
        raise ValueError(f"the {kind.decode()} block at {at:#x} has a wrong header checksum")


def _streams(data: bytes, block: int) -> tuple[dict[bytes, int], int]:
    """The block's streams (id -> offset of the stream header) and the offset where the block ends,
    the end of its SPAD stream."""
    found: dict[bytes, int] = {}
    at = block + _u16(data, block + 8)
    while True:
        header = bytes(data[at:at + STREAM])
        if len(header) < STREAM or _u16(header, 20) != stream_checksum(header):
            raise ValueError(f"no valid stream header at {at:#x} in the block at {block:#x}")
        found.setdefault(header[:4], at)
        if header[:4] == b"SPAD":
            return found, at + STREAM + _u64(header, 8)
        at = (at + STREAM + _u64(header, 8) + 3) & ~3


def media_set_guid(data: bytes) -> bytes:
    """The media set GUID: the first 16 bytes of the TAPE block's RAID stream."""
    streams, _ = _streams(data, 0)
    if b"RAID" not in streams:
        raise ValueError("the TAPE block has no RAID stream (no media set GUID)")
    return bytes(data[streams[b"RAID"] + STREAM:streams[b"RAID"] + STREAM + 16])


def filemarks(data: bytes) -> list[int]:
    """Every SFMB of the file in file order, read from the list the final SFMB keeps."""
    size = soft_filemark_size(data)
    final = len(data) - size
    _block(data, final, b"SFMB")
    used = _u32(data, final + SFMB_USED)
    marks = [*reversed(struct.unpack_from(f"<{used}Q", data, final + SFMB_ARRAY)), final]
    for mark in marks:
        _block(data, mark, b"SFMB")
    if marks != sorted(set(marks)):
        raise ValueError(f"the final SFMB's filemark list is not in file order: {[hex(m) for m in marks]}")
    return marks


def set_layouts(data: bytes) -> list[SetLayout]:
    """Each set: it follows the filemark that ends the media header or the set before it."""
    size, marks = soft_filemark_size(data), filemarks(data)
    if len(marks) % 2 == 0:
        raise ValueError(f"{len(marks)} filemarks: not a media header filemark plus two per set")
    layouts = []
    for before, filemark, closing in zip(marks[0:-1:2], marks[1::2], marks[2::2], strict=True):
        start = before + size
        _block(data, start, b"SSET")
        first = filemark + size
        _block(data, first, b"ESET")
        streams, second = _streams(data, first)
        _block(data, second, b"ESET")
        if _streams(data, second)[1] != closing:
            raise ValueError(f"the second ESET at {second:#x} does not end at the SFMB at {closing:#x}")
        set_map = streams[b"TSMP"] + STREAM if b"TSMP" in streams else None
        layouts.append(SetLayout(start, closing + size, filemark, (first, second), set_map))
    return layouts


def set_ranges(data: bytes) -> list[tuple[int, int]]:
    return [(layout.start, layout.end) for layout in set_layouts(data)]


def truncate_after(data: bytes, count: int) -> bytes:
    """The file as it was when its `count`-th set had just been written."""
    layouts = set_layouts(data)
    if not 1 <= count <= len(layouts):
        raise ValueError(f"the file holds {len(layouts)} sets, not {count}")
    return bytes(data[:layouts[count - 1].end])


def _write_filemark_list(out: bytearray, mark: int, earlier: list[int]) -> None:
    """The list only grows when a set moves later in a file, so it covers the entries copied with it."""
    capacity = _u32(out, mark + SFMB_ENTRIES)
    if len(earlier) > capacity:
        raise ValueError(f"the SFMB at {mark:#x} holds {capacity} filemark entries, {len(earlier)} are needed")
    struct.pack_into("<I", out, mark + SFMB_USED, len(earlier))
    struct.pack_into(f"<{len(earlier)}Q", out, mark + SFMB_ARRAY, *reversed(earlier))


def _check_same_media(first: bytes, later: bytes, number: int, adopt_media: bool) -> None:
    for what, read in (("soft filemark size", soft_filemark_size), ("format logical block size", logical_block_size)):
        if read(later) != read(first):
            raise ValueError(f"input {number} has {what} {read(later)}, the first input {read(first)}: "
                             "SQL Server appends only to media written with its own")
    if not adopt_media and media_set_guid(later) != media_set_guid(first):
        raise ValueError(f"input {number} belongs to media set {media_set_guid(later).hex()}, the first input "
                         f"to {media_set_guid(first).hex()}: pass adopt_media=True to put its sets on the first's media")


def _place(out: bytearray, source: bytes, layout: SetLayout, position: int, marks: list[int], family: bytes) -> None:
    """Copy one set to the end of `out` as set number `position` and rewrite its position fields."""
    size, base = soft_filemark_size(source), len(out)
    shift = base - layout.start
    out += source[layout.start:layout.end]
    struct.pack_into("<H", out, base + SSET_SET_NUMBER, position)
    struct.pack_into("<Q", out, base + SSET_ADDRESS, base)
    first, second = (eset + shift for eset in layout.esets)
    for eset in (first, second):
        struct.pack_into("<H", out, eset + ESET_SET_NUMBER, position)
    struct.pack_into("<Q", out, second + ESET_PREVIOUS, first)
    if layout.set_map is not None:
        at = layout.set_map + shift
        out[at + SET_MAP_FAMILY_ID:at + SET_MAP_FAMILY_ID + 4] = family
        struct.pack_into("<H", out, at + SET_MAP_SET_NUMBER, position)
        struct.pack_into("<Q", out, at + SET_MAP_ADDRESS, base)
    for mark in (layout.filemark + shift, layout.end - size + shift):
        _write_filemark_list(out, mark, marks)
        marks.append(mark)


def append_sets(first: bytes, *more: bytes, adopt_media: bool = False) -> bytes:
    """One file holding the sets of `first`, then those of each of `more`, numbered on: the media
    header is `first`'s. `adopt_media` puts sets of another media set on `first`'s media (its media
    family id in their set maps); each set's own configuration (MSCI/MQCI) stays as written."""
    out, marks = bytearray(first), filemarks(first)
    position = len(set_layouts(first))
    family = bytes(first[TAPE_FAMILY_ID:TAPE_FAMILY_ID + 4])
    for number, later in enumerate(more, start=2):
        _check_same_media(first, later, number, adopt_media)
        for layout in set_layouts(later):
            position += 1
            _place(out, later, layout, position, marks, family)
    return bytes(out)
