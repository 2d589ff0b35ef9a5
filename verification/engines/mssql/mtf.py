"""Read SQL Server backup headers offline, from the Microsoft Tape Format (MTF) blocks of the file.

The media is read as MTF 1.00a lays it out, with the sizes the media itself states (the TAPE block's
soft filemark block size, in 512-byte units, and format logical block size): the media header (TAPE,
then a soft filemark, SFMB), then one or more backup sets (BACKUP ... WITH NOINIT appends), each
SSET, VOLB, MSCI (SQL Server's configuration, its MQCI stream), data (MSDA) or log (MSTL) blocks, the
closing configuration copy (MSLS), a filemark, ESET, ESET and a filemark. The last filemark of the
media lists, newest first, the byte offsets of every earlier one, which is how each set is found
without reading the data between (docs/sqlserver-mtf.md). Only the
media header, each set's head and each set's closing blocks are read, through a byte-range reader:
a few tens of KiB per set whatever the file's size, so object storage serves the same code. Every
descriptor block's header checksum is verified.

What proves damage, and what does not: a block or stream header whose checksum does not match, a
file that is not whole 512-byte sectors or does not end in a filemark (truncated), a structure
running past the end of the file. Anything else this reader does not know (a block type, a size, a
field value, a set it cannot locate, head and closing copies naming different backups) is
MtfUnsupported: an error naming the field, its offset and the SQL Server version that wrote the set,
never "corrupt". The configuration stream itself (mtf_config.py) has no checksum: what it holds
that is unknown is unsupported, too.

The head copy of the configuration is written before the data, the closing copy after it; for a
database written to while it was backed up the LSNs (and the finish date, only filled in at the end)
legitimately differ. The closing copy is taken as the set's (it is the one that knows the finish,
as RESTORE HEADERONLY does); the two must agree on which backup they describe (IDENTITY fields).

The configuration fields (what each is and how the corpus confirms it) are in mtf_config.py.
Copy-only (IsCopyOnly): MTF's SSET attributes carry a "copy set" bit (0x2, beside normal 0x4 and
differential 0x8), and the SCIN flags a bit 0x400; both are set on the three COPY_ONLY fulls of
../shared/testdata/mssql-real-world (one proven copy-only by the script that made it) and neither on
any of the 118 lab files. True where both say so, False where neither does, None where they disagree.
Damaged (IsDamaged): the ESET's count of corrupt files (MTF) above zero says so; zero is not proof of
the opposite (no damaged backup is in either corpus), so it stays None. HasBulkLoggedData is not found.
Encryption (HEADERONLY's KeyAlgorithm, EncryptorThumbprint, EncryptorType; FILELISTONLY's TDEThumbprint)
is not found either: no encrypted or TDE backup is in the corpus, and no public reader places it. The
header says only what the writing server's version (SSET) rules out (engines/mssql/encryption.py:
"not encrypted" for a server older than TDE, else "unknown", never "not encrypted").
"""


from __future__ import annotations

import dataclasses
import itertools
import struct
import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Protocol

from verification.engines.mssql.encryption import offline
from verification.engines.mssql.mtf_config import ConfigError, DatabaseFile, SetConfig, guid, identity_fields, parse
from verification.errors import SourceError
from verification.model import BackupEncryption

SECTOR = 512  # MTF's unit: every block size the media states is a multiple of it
HEAD_BYTES = 16 * 1024  # read ahead at the start of the file; a set's configuration block lies within it
TAIL_BYTES = 32 * 1024  # how far before a set's data filemark its closing configuration copy may lie
CLOSING_BYTES = 8 * 1024  # read ahead before that filemark: where SQL Server puts the copy
READ_CHUNK = 8 * 1024  # what is read where a structure lies past the bytes read ahead
COMMON_HEADER = 52
STREAM_HEADER = 22
COMPRESSED_MAGIC = b"MSSQLBAK"
# The descriptor blocks MTF 1.00a defines, and the four SQL Server adds (configuration, data, log, closing copy).
MTF_BLOCKS = {b"TAPE", b"SSET", b"VOLB", b"DIRB", b"FILE", b"CFIL", b"ESPB", b"ESET", b"EOTM", b"SFMB"}
DBLK_TYPES = MTF_BLOCKS | {b"MSCI", b"MSDA", b"MSTL", b"MSLS"}
RAID_BYTES = 26  # media set GUID (16), then family count at 20 and family number at 24, u16 each
TAPE_SOFT_FILEMARK = 64  # u16: the soft filemark block size, in sectors
TAPE_LOGICAL_BLOCK = 84  # u16: the format logical block size, in bytes
MAX_FILEMARKS = 1 + 2 * 65535  # the media header's and two per set: SSET numbers sets in 16 bits
MAX_FILEMARK_SECTORS = 128  # 64 KiB, SQL Server's largest BLOCKSIZE; larger is a layout not seen
SSET_ATTRIBUTES, SSET_NUMBER, SSET_VERSION = 52, 62, 93
SSET_GUID = 0x64  # BackupSetGUID, 16 bytes, in the SSET block (after MTF's own SSET fields)
SSET_COPY = 0x2  # MTF's "copy set" attribute
SCIN_COPY_ONLY = 0x400  # the configuration's flag set with it on every copy-only backup read
# SFMB: u32 entries used at +56, then the u64 list of earlier filemarks. SQL Server 2008 and later put
# the list's offset in the block (0x48) at +60 and the list there; 2005 starts the list at +60 itself
# (a filemark never lies at 0x48, so the two cannot be confused).
SFMB_USED, SFMB_AT, SFMB_LIST_OFFSET = 56, 60, 0x48
ESET_CORRUPT_FILES = 56
# What both configuration copies of a set must agree on: which backup of which database they describe,
# and what no statement can change while a backup runs. The rest is the closing copy's (_disagreement).
IDENTITY = ("database_name", "server_name", "backup_type", "database_creation", "backup_start",
            "database_version", "database_backup_lsn")
IDENTITY_EXTENDED = ("family_guid", "recovery_fork_guid", "binding_id", "differential_base_guid",
                     "differential_base_lsn", "collation_id")
# Writers whose layout real samples prove (the two corpora); any other is read by the same rules.
PROVEN_WRITERS = {(10, 50): "SQL Server 2008 R2", (13, 0): "SQL Server 2016"}


class MtfError(SourceError):
    """The file is damaged: a checksum, a truncation or a structure past its end proves it. The message
    names the file, the offset and what was expected."""

    def __init__(self, name: str, offset: int, what: str, expected: str, found: str) -> None:
        super().__init__(f"{name}: {what} at offset {offset:#x}: expected {expected}, found {found}")
        self.name, self.offset, self.expected, self.found = name, offset, expected, found


class MtfTruncated(MtfError):
    """The file ends before a structure it began: truncated (or, where zeros end it, still being written)."""


class MtfUnsupported(MtfError):
    """A layout this reader does not know: an error naming the field, its offset and the writer, never damage."""

    def __init__(self, name: str, offset: int, what: str, expected: str, found: str, writer: str | None) -> None:
        super().__init__(name, offset, what, expected, found)
        self.writer = writer
        self.args = (f"{self.args[0]}{self.closing()}",)

    def closing(self) -> str:
        """The sentence that ends the message: who wrote the layout, and that it proves nothing."""
        writer = self.writer or "a SQL Server version not yet read"
        return f": a layout restoreproof does not know (written by {writer}), not proof of damage"


class NeedsServerHeaderOnly(SourceError):
    """A natively compressed backup: its headers can only be read by RESTORE HEADERONLY in a server."""


class ByteRangeReader(Protocol):
    name: str

    def size(self) -> int: ...

    def read(self, offset: int, length: int) -> bytes: ...


@dataclass(frozen=True)
class BackupHeader:
    """The RESTORE HEADERONLY facts recoverable offline, for one backup set of a file."""

    path: str
    database_name: str
    server_name: str
    backup_type: str  # full, diff, log
    first_lsn: int
    last_lsn: int
    checkpoint_lsn: int
    database_backup_lsn: int
    database_version: int
    software_version: tuple[int, int]
    database_creation: datetime | None
    backup_start: datetime | None
    backup_finish: datetime | None
    media_set_guid: str
    family_count: int
    family_number: int
    flags: int
    size_bytes: int
    files: tuple[DatabaseFile, ...] = ()
    bytes_read: int = field(default=0, compare=False)
    backup_set_guid: str | None = None
    recovery_model: str | None = None  # FULL, BULK_LOGGED, SIMPLE
    differential_base_lsn: int | None = None  # differentials only
    differential_base_guid: str | None = None  # differentials only: the base full's backup_set_guid
    recovery_fork_guid: str | None = None  # RecoveryForkID: the fork the backup was taken on
    fork_point_lsn: int | None = None  # where that fork branched off parent_fork_guid, if it did
    parent_fork_guid: str | None = None
    family_guid: str | None = None
    binding_id: str | None = None
    log_chain_origin_lsn: int | None = None  # the LSN the database's log chain began at; None under SIMPLE
    compatibility_level: int | None = None
    sort_order: int | None = None
    unicode_locale_id: int | None = None
    unicode_comparison_style: int | None = None
    collation: str | None = None
    collation_id: str | None = None  # the 5 raw bytes, hex: the collation whatever its name
    software_build: int | None = None
    # HEADERONLY's Position: the set's number on its media (RESTORE ... WITH FILE = n), and where the
    # set lies in the file: from its SSET block to the end of its last filemark.
    position: int = 1
    set_offset: int = 0
    set_end: int = 0
    is_copy_only: bool | None = None  # from the file (module docstring); None where its two marks disagree
    # Not located in the offline header (see the module docstring): None means unknown. A reader that
    # knows (RESTORE HEADERONLY in a server) may fill them in.
    is_damaged: bool | None = None
    has_bulk_logged_data: bool | None = None
    # Whether the backup is encrypted, as far as the header tells (engines/mssql/encryption.py); None
    # where it was not asked (a header made by hand).
    encryption: BackupEncryption | None = None

    @property
    def begins_log_chain(self) -> bool | None:
        """HEADERONLY's BeginsLogChain: a log backup that starts where the database's log chain began."""
        if self.backup_type != "log":
            return False
        if self.log_chain_origin_lsn is None:
            return None
        return self.first_lsn == self.log_chain_origin_lsn

    @property
    def writer(self) -> str:
        """The SQL Server version that wrote the set, as its SSET block and configuration say."""
        return writer_name(self.software_version, self.software_build)

    @property
    def layout_proven(self) -> bool:
        """Whether real samples of this writer's version prove the layout read (PROVEN_WRITERS)."""
        return self.software_version in PROVEN_WRITERS

    @property
    def is_differential(self) -> bool:
        return self.backup_type == "diff"

    @property
    def has_checksums(self) -> bool:
        # Seen in the corpus: 0x10 set where the backup was taken WITH CHECKSUM.
        return bool(self.flags & 0x10)

    @property
    def is_empty_log(self) -> bool:
        """A log backup whose first and last LSN are equal restores nothing."""
        return self.backup_type == "log" and self.first_lsn == self.last_lsn


def writer_name(version: tuple[int, int], build: int | None = None) -> str:
    """"SQL Server 13.0.4001 (SQL Server 2016)": the version an SSET names, its build where known."""
    number = f"{version[0]}.{version[1]}" + (f".{build}" if build else "")
    known = PROVEN_WRITERS.get(version)
    return f"SQL Server {number}" + (f" ({known})" if known else "")


def stream_checksum(header: bytes) -> int:
    """The 22-byte stream header ends with the XOR of its first ten u16 words."""
    words: tuple[int, ...] = struct.unpack_from("<10H", header, 0)
    checksum = 0
    for word in words:
        checksum ^= word
    return checksum


def header_checksum(block: bytes) -> int:
    words: tuple[int, ...] = struct.unpack_from("<25H", block, 0)
    checksum = 0
    for word in words:
        checksum ^= word
    return checksum


class _Image:
    """The parts of one file read so far, addressed by file offset, and who wrote it once known."""

    def __init__(self, reader: ByteRangeReader) -> None:
        self.reader, self.name, self.size = reader, reader.name, reader.size()
        self.windows: list[tuple[int, bytes]] = []
        self.bytes_read = 0
        self.writer: str | None = None

    def load(self, offset: int, length: int) -> None:
        """Read [offset, offset + length), clipped to the file, but for what is already held: never a
        zero-length or out-of-range read (object storage answers those with an error)."""
        start, end = max(0, offset), min(self.size, offset + length)
        for at, data in self.windows:  # trim what a window already holds at either end
            if at <= start < at + len(data):
                start = at + len(data)
            if at < end <= at + len(data):
                end = at
        if start >= end:
            return
        self.windows.append((start, self.reader.read(start, end - start)))
        self.bytes_read += end - start
        self._merge()

    def _merge(self) -> None:
        merged: list[tuple[int, bytes]] = []
        for at, data in sorted(self.windows):
            if merged and at <= merged[-1][0] + len(merged[-1][1]):
                last_at, last = merged[-1]
                merged[-1] = (last_at, last + data[last_at + len(last) - at:])
            else:
                merged.append((at, data))
        self.windows = merged

    def get(self, offset: int, length: int) -> bytes:
        """The bytes at offset, read on demand (a whole READ_CHUNK about them) where not yet held: the
        reads planned ahead are what a set usually needs, never a limit on where a structure may lie."""
        if offset < 0 or offset + length > self.size:
            raise MtfTruncated(self.name, offset, "structure", f"{length} bytes within the file",
                           f"the end of the file at {self.size:#x}: the file is truncated")
        for at, data in self.windows:
            if at <= offset and offset + length <= at + len(data):
                return data[offset - at:offset - at + length]
        start = offset // READ_CHUNK * READ_CHUNK
        self.load(start, max(READ_CHUNK, offset + length - start))
        return self.get(offset, length)

    def unsupported(self, offset: int, what: str, expected: str, found: str) -> MtfUnsupported:
        return MtfUnsupported(self.name, offset, what, expected, found, self.writer)


def _check_block(image: _Image, offset: int, expected: set[bytes] | None = None) -> bytes:
    """The 52-byte block header at offset: its checksum proves it whole; a whole block of a kind
    not expected there is a layout not known, not damage."""
    if offset + COMMON_HEADER > image.size:
        raise MtfTruncated(image.name, offset, "descriptor block", "a complete 52-byte header",
                       f"end of data (file is {image.size} bytes: truncated?)")
    block = image.get(offset, COMMON_HEADER)
    kind = block[:4]
    stored, computed = struct.unpack_from("<H", block, 50)[0], header_checksum(block)
    if stored != computed:
        raise MtfError(image.name, offset, f"{kind.decode('latin-1')} block header checksum",
                       f"{computed:#06x}", f"{stored:#06x}")
    if expected is not None and kind not in expected:
        raise image.unsupported(offset, "descriptor block", "/".join(sorted(k.decode() for k in expected)),
                                repr(kind))
    return block


def _streams(image: _Image, block_offset: int, block: bytes) -> tuple[dict[bytes, tuple[int, int]], int]:
    """Streams of a DBLK: {id: (data offset, length)} and the offset of the next DBLK."""
    first = struct.unpack_from("<H", block, 8)[0]
    if block[:4] == b"SFMB":  # no streams: the next block follows the filemark
        return {}, block_offset + first
    streams: dict[bytes, tuple[int, int]] = {}
    position = block_offset + first
    for _ in range(64):
        header = image.get(position, STREAM_HEADER)
        stream_id, length = header[:4], struct.unpack_from("<Q", header, 8)[0]
        stored, computed = struct.unpack_from("<H", header, 20)[0], stream_checksum(header)
        if stored != computed:
            raise MtfError(image.name, position, f"{stream_id.decode('latin-1')} stream header checksum",
                           f"{computed:#06x}", f"{stored:#06x}")
        if stream_id == b"SPAD":
            return streams, position + STREAM_HEADER + length
        streams[stream_id] = (position + STREAM_HEADER, length)
        position = (position + STREAM_HEADER + length + 3) & ~3
    raise image.unsupported(block_offset, "stream list", "an SPAD stream ending the block", "none")


def _configuration(image: _Image, offset: int, stream: tuple[int, int]) -> SetConfig:
    try:
        return parse(image.get(*stream))
    except ConfigError as exc:
        raise image.unsupported(offset, exc.what, exc.expected, exc.found) from None


@dataclass(frozen=True)
class _Media:
    """The media header: the media set and family, and the block sizes every set on it is laid out in."""

    media_set_guid: str
    family_count: int
    family_number: int
    filemark_bytes: int
    logical_block_bytes: int
    filemark: int  # offset of the media header's own soft filemark


def _media(image: _Image) -> _Media:
    head = image.get(0, min(8, image.size)) if image.size else b""
    if head[:8] == COMPRESSED_MAGIC:
        raise NeedsServerHeaderOnly(f"{image.name}: natively compressed backup (starts with MSSQLBAK): its headers "
                                    "can only be read by RESTORE HEADERONLY inside a SQL Server target")
    if head[:4] != b"TAPE":
        raise MtfError(image.name, 0, "media header", "'TAPE' (Microsoft Tape Format)", repr(head))
    tape = _check_block(image, 0)
    streams, filemark = _streams(image, 0, tape)
    if b"RAID" not in streams:
        raise image.unsupported(0, "TAPE block", "a RAID stream (media set)", "none")
    if streams[b"RAID"][1] < RAID_BYTES:
        raise image.unsupported(0, "RAID stream", f"at least {RAID_BYTES} bytes", f"{streams[b'RAID'][1]} bytes")
    raid = image.get(*streams[b"RAID"])
    sectors, logical = (struct.unpack_from("<H", image.get(at, 2))[0] for at in (TAPE_SOFT_FILEMARK,
                                                                                  TAPE_LOGICAL_BLOCK))
    if not 1 <= sectors <= MAX_FILEMARK_SECTORS:
        raise image.unsupported(TAPE_SOFT_FILEMARK, "TAPE soft filemark block size",
                                f"1 to {MAX_FILEMARK_SECTORS} sectors of {SECTOR} bytes", str(sectors))
    if not logical or logical % SECTOR:
        raise image.unsupported(TAPE_LOGICAL_BLOCK, "TAPE format logical block size",
                                f"a multiple of {SECTOR} bytes", str(logical))
    _check_block(image, filemark, {b"SFMB"})
    return _Media(str(uuid.UUID(bytes_le=raid[:16])), struct.unpack_from("<H", raid, 20)[0],
                  struct.unpack_from("<H", raid, 24)[0], sectors * SECTOR, logical, filemark)


def _filemark_list(image: _Image, filemark: int) -> tuple[int, int]:
    """(entries used, offset of the list within the block) of the filemark block at `filemark`."""
    used, at = struct.unpack_from("<II", image.get(filemark + SFMB_USED, 8))
    return int(used), SFMB_LIST_OFFSET if at == SFMB_LIST_OFFSET else SFMB_AT


def _end_problem(image: _Image, media: _Media) -> MtfError | None:
    """What keeps the file's end from being a closing filemark (truncated, or zeros where a copy in
    progress has not written yet), or None: the end lists every set."""
    if image.size % SECTOR:
        return MtfTruncated(image.name, image.size, "end of file", f"a size in whole {SECTOR}-byte blocks",
                            f"{image.size} bytes ({image.size % SECTOR} past a block boundary): the file is truncated")
    last = image.size - media.filemark_bytes
    if last <= media.filemark:
        return MtfTruncated(image.name, image.size, "end of file", "a backup set after the media header",
                            f"{image.size} bytes: the file is truncated")
    # One read for the end of the file: the last filemark and, in the same read, the last set's closing
    # blocks (its closing copy, a filemark, two ESETs) that _closing will want.
    tail = CLOSING_BYTES + 8 * media.filemark_bytes
    image.load(image.size - tail, tail)
    if not any(image.get(last, media.filemark_bytes)):
        return image.unsupported(last, "end of file", "a closing soft filemark (SFMB)",
                                 f"{media.filemark_bytes} zero bytes: still being written (a copy in progress sizes "
                                 "the file first), or padded in a way restoreproof does not know")
    kind = image.get(last, 4)
    if kind != b"SFMB":
        return MtfTruncated(image.name, last, "descriptor block", "SFMB",
                            f"{kind!r}: the file is truncated or was never closed")
    return None


def _filemarks(image: _Image, media: _Media) -> list[int]:
    """Every filemark of the media, oldest first, from the list the last one carries (the end is whole:
    _end_problem): the media header's, then two per set (after its data, after its end-of-set blocks)."""
    last = image.size - media.filemark_bytes
    marks = [last]
    # A filemark lists as many earlier ones as its block holds (55 in 512 bytes, 503 in 4096): once
    # more sets are appended, the oldest listed filemark's own list goes on from there.
    while marks[0] != media.filemark and len(marks) <= MAX_FILEMARKS:
        earlier = _earlier_filemarks(image, media, marks[0])
        if not earlier or earlier[0] < media.filemark or any(
                b <= a or b % SECTOR for a, b in itertools.pairwise([*earlier, marks[0]])):
            marks = [*earlier, *marks]  # said as found, below: never followed into what it does not point at
            break
        marks = [*earlier, *marks]
    if marks[0] != media.filemark or len(marks) % 2 == 0 or any(
            b <= a or b % SECTOR for a, b in itertools.pairwise(marks)):
        raise image.unsupported(last + SFMB_USED, "SFMB list of earlier filemarks",
                                f"increasing sector offsets from the media header's filemark at {media.filemark:#x}, "
                                "then two per backup set", ", ".join(f"{m:#x}" for m in marks))
    return marks


def _earlier_filemarks(image: _Image, media: _Media, filemark: int) -> list[int]:
    """The filemarks the one at `filemark` lists, oldest first."""
    _check_block(image, filemark, {b"SFMB"})
    used, at = _filemark_list(image, filemark)
    if at + 8 * used > media.filemark_bytes:
        raise image.unsupported(filemark + SFMB_USED, "SFMB list of earlier filemarks",
                                f"a list within the {media.filemark_bytes}-byte filemark",
                                f"{used} entries at +{at:#x}")
    return [*reversed(struct.unpack_from(f"<{used}Q", image.get(filemark + at, 8 * used)))] if used else []


@dataclass(frozen=True)
class _SetHead:
    version: tuple[int, int]
    attributes: int
    number: int
    backup_set_guid: str | None
    config: SetConfig
    config_offset: int  # of the head copy's block: the closing copy lies past it


def _set_head(image: _Image, start: int) -> _SetHead:
    """The SSET block at the start of a set and the configuration (MSCI) after it."""
    _check_block(image, start, {b"SSET"})
    sset = image.get(start, SSET_GUID)
    version = (sset[SSET_VERSION], sset[SSET_VERSION + 1])
    image.writer = writer_name(version)
    seen, offset = [b"SSET"], start
    _, offset = _streams(image, start, sset[:COMMON_HEADER])
    # Each block's successor lies past its header, so the walk always advances; it ends at the
    # configuration block or past the set's head.
    while offset + COMMON_HEADER <= start + HEAD_BYTES:
        block = _check_block(image, offset)
        kind = block[:4]
        if kind not in DBLK_TYPES:
            raise image.unsupported(offset, "descriptor block", "a block type MTF or SQL Server defines", repr(kind))
        seen.append(kind)
        streams, next_offset = _streams(image, offset, block)
        if kind == b"MSCI":
            if b"MQCI" not in streams:
                raise image.unsupported(offset, "MSCI block", "an MQCI stream", "none")
            return _SetHead(version, struct.unpack_from("<I", sset, SSET_ATTRIBUTES)[0],
                            struct.unpack_from("<H", sset, SSET_NUMBER)[0],
                            guid(image.get(start + SSET_GUID, 16)), _configuration(image, offset, streams[b"MQCI"]),
                            offset)
        offset = next_offset
    raise image.unsupported(offset, "backup set header", f"an MSCI block in the set's first {HEAD_BYTES} bytes",
                            f"blocks {', '.join(k.decode() for k in seen)}")


def _closing(image: _Image, media: _Media, after: int, closing: int, end: int) -> tuple[SetConfig, int]:
    """The closing configuration copy, the last MSLS/MSCI block before the set's data filemark (and
    after the head copy), and the count of corrupt files its end-of-set block records."""
    low = max(after + SECTOR, closing - TAIL_BYTES)
    image.load(max(low, closing - CLOSING_BYTES), end + media.filemark_bytes - max(low, closing - CLOSING_BYTES))
    _check_block(image, closing, {b"SFMB"})
    _check_block(image, closing + media.filemark_bytes, {b"ESET"})
    corrupt_files = struct.unpack_from("<I", image.get(closing + media.filemark_bytes + ESET_CORRUPT_FILES, 4))[0]
    _check_block(image, end, {b"SFMB"})
    for offset in range(closing - SECTOR, low - 1, -SECTOR):
        if image.get(offset, 4) in (b"MSLS", b"MSCI"):
            block = _check_block(image, offset)
            streams, _ = _streams(image, offset, block)
            if b"MQCI" in streams:
                return _configuration(image, offset, streams[b"MQCI"]), corrupt_files
    raise image.unsupported(closing, "closing configuration copy",
                            f"an MSLS/MSCI block with MQCI in the {TAIL_BYTES} bytes before the set's filemark", "none")


def _disagreement(head: SetConfig, tail: SetConfig) -> tuple[str, object, object, str] | None:
    """Where the closing copy departs from the head copy more than a busy database explains, as
    (field, head value, closing value, the rule): the log only grows, files keep their names and may
    only grow (no file can be added, removed or shrunk while a backup runs), a log backup starts
    where it started; a full or differential spans its checkpoint (FirstLSN <= CheckpointLSN <=
    LastLSN on every backup of the corpus)."""
    for name in IDENTITY:
        if getattr(head, name) != getattr(tail, name):
            return name, getattr(head, name), getattr(tail, name), "the same backup"
    for name in IDENTITY_EXTENDED:
        if head.extended.get(name) != tail.extended.get(name):
            return name, head.extended.get(name), tail.extended.get(name), "the same backup"
    if [_file_shape(f) for f in head.files] != [_file_shape(f) for f in tail.files] or any(
            t.size_bytes < h.size_bytes for h, t in zip(head.files, tail.files, strict=True)):
        return "files", head.files, tail.files, "the same files, none smaller"
    for name in ("last_lsn", "checkpoint_lsn"):
        if getattr(tail, name) < getattr(head, name):
            return name, getattr(head, name), getattr(tail, name), "an LSN at or after the head copy's"
    if tail.backup_type == "log" and tail.first_lsn != head.first_lsn:
        return "first_lsn", head.first_lsn, tail.first_lsn, "the LSN the log backup started at"
    if tail.backup_type != "log" and not tail.first_lsn <= tail.checkpoint_lsn <= tail.last_lsn:
        return "first_lsn", head.first_lsn, tail.first_lsn, (
            f"FirstLSN <= CheckpointLSN {tail.checkpoint_lsn} <= LastLSN {tail.last_lsn}")
    return None


def _file_shape(file: DatabaseFile) -> tuple[object, ...]:
    return file.file_id, file.logical_name, file.physical_name, file.type_code, file.filegroup_id


def _copy_only(attributes: int, *flags: int) -> bool | None:
    """Copy-only where the set block and every configuration copy say so, not where none does, else unknown."""
    marks = {bool(attributes & SSET_COPY), *(bool(f & SCIN_COPY_ONLY) for f in flags)}
    return marks.pop() if len(marks) == 1 else None


def _read_set(image: _Image, media: _Media, opened: int, closing: int, end: int, number: int) -> BackupHeader:
    start = opened + media.filemark_bytes
    _check_block(image, opened, {b"SFMB"})
    head = _set_head(image, start)
    tail, corrupt_files = _closing(image, media, head.config_offset, closing, end)
    image.writer = writer_name(head.version, tail.extended.get("software_build"))  # type: ignore[arg-type]
    if head.number != number:
        raise image.unsupported(start + SSET_NUMBER, "SSET data set number", f"{number}, the set's place on the media",
                                str(head.number))
    if (disagreement := _disagreement(head.config, tail)) is not None:
        name, head_value, tail_value, rule = disagreement
        raise image.unsupported(closing, f"closing configuration copy ({name})",
                                f"{rule} ({head_value} in the head copy)", f"{tail_value}")
    return BackupHeader(
        path=image.name, database_name=tail.database_name, server_name=tail.server_name,
        backup_type=tail.backup_type, first_lsn=tail.first_lsn, last_lsn=tail.last_lsn,
        checkpoint_lsn=tail.checkpoint_lsn, database_backup_lsn=tail.database_backup_lsn,
        database_version=tail.database_version, software_version=head.version,
        database_creation=tail.database_creation, backup_start=tail.backup_start,
        backup_finish=tail.backup_finish, media_set_guid=media.media_set_guid, family_count=media.family_count,
        family_number=media.family_number, flags=tail.flags, size_bytes=image.size, files=tail.files,
        backup_set_guid=head.backup_set_guid, encryption=offline(head.version), position=number,
        set_offset=start, set_end=end + media.filemark_bytes,
        is_copy_only=_copy_only(head.attributes, head.config.flags, tail.flags),
        is_damaged=True if corrupt_files else None,
        **tail.extended,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class MediaRead:
    """What a file's media holds: its whole backup sets, in position order, and why the rest of the
    file (if any) could not be read: a set cut short or damaged after the sets read, or a layout not
    known. A file whose end is whole reads with no problem; one whose end is not still gives the sets
    before the one its end cuts (an append that failed, or a copy cut short, loses no earlier set)."""

    headers: list[BackupHeader]
    problem: MtfError | None = None
    # Whose backup the set the problem lies in was, from that set's own head, where it could be read.
    identity: TrailerIdentity | None = None
    # The set the problem lies in (its position), where a set begins there; None: the file's end.
    set_number: int | None = None


def read_media(reader: ByteRangeReader) -> MediaRead:
    """Every whole backup set of the file (a media header it cannot read raises, as read_backup_headers)."""
    image = _Image(reader)
    image.load(0, HEAD_BYTES)
    media = _media(image)
    if (ending := _end_problem(image, media)) is not None:
        found = _walk_sets(image, media, ending)
        return dataclasses.replace(found, headers=[_with_bytes_read(h, image.bytes_read) for h in found.headers])
    marks = _filemarks(image, media)
    headers: list[BackupHeader] = []
    problem: MediaRead | None = None
    for n in range(len(marks) // 2):
        try:
            headers.append(_read_set(image, media, marks[2 * n], marks[2 * n + 1], marks[2 * n + 2], n + 1))
        except MtfError as exc:  # the other sets are found by the filemark list all the same
            start = marks[2 * n] + media.filemark_bytes
            problem = problem or MediaRead([], _in_set(exc, n + 1, start, len(marks) > 3),
                                           _head_identity(image, start), n + 1)
    read = [_with_bytes_read(h, image.bytes_read) for h in headers]
    return MediaRead(read) if problem is None else dataclasses.replace(problem, headers=read)


def read_backup_headers(reader: ByteRangeReader) -> list[BackupHeader]:
    """Every backup set of the file, in position order; a file with any set not whole raises."""
    found = read_media(reader)
    if found.problem is not None:
        raise found.problem
    return found.headers


def _walk_sets(image: _Image, media: _Media, ending: MtfError) -> MediaRead:
    """The sets of a file whose end holds no closing filemark, found from the media header forward:
    block after block by their stream lengths (the data streams are stepped over, not read), each
    set's filemarks where its blocks lead to them. The walk stops at the first set it cannot read
    whole; that set (or, where no set begins after the whole ones, the end itself) is the problem."""
    headers: list[BackupHeader] = []
    opened = media.filemark
    while True:
        start, number = opened + media.filemark_bytes, len(headers) + 1
        try:
            _check_block(image, start, {b"SSET"})
        except MtfError:  # no whole set begins here (the end, zeros not yet written, bytes past the last set)
            return MediaRead(headers, ending)
        try:
            closing = _next_filemark(image, start)
            end = _next_filemark(image, closing + media.filemark_bytes)
            headers.append(_read_set(image, media, opened, closing, end, number))
        except MtfError as exc:
            # Running into the end (or the zeros ending a file being written) is what the end says;
            # a checksum that does not match on the way is damage of its own.
            problem = ending if isinstance(exc, (MtfTruncated, MtfUnsupported)) else exc
            return MediaRead(headers, _in_set(problem, number, start, number > 1), _head_identity(image, start),
                             number)
        opened = end


def _next_filemark(image: _Image, offset: int) -> int:
    """The first filemark (SFMB) at or after the block at offset, block by block."""
    while True:
        block = _check_block(image, offset)
        if block[:4] == b"SFMB":
            return offset
        # Any other block is stepped over by its streams, as MTF lays every block out; what the set
        # holds is judged when it is read (_read_set).
        _, next_offset = _streams(image, offset, block)
        offset = next_offset


def _in_set(exc: MtfError, number: int, start: int, several: bool) -> MtfError:
    """The error, saying which backup set of the file it lies in where the file holds others."""
    if several:
        closing = exc.closing() if isinstance(exc, MtfUnsupported) else ""
        said = str(exc.args[0]).removesuffix(closing)
        exc.args = (f"{said} (in backup set {number}, which begins at offset {start:#x}; the file's other whole "
                    f"sets are read){closing}",)
    return exc


def _head_identity(image: _Image, start: int) -> TrailerIdentity | None:
    """Who the set whose SSET block is at start belongs to, by its head copy (the first configuration
    block after it)."""
    try:
        return _identity_at(image, range(start, min(start + HEAD_BYTES, image.size), SECTOR))
    except (SourceError, ValueError, IndexError, struct.error):
        return None


def _with_bytes_read(header: BackupHeader, bytes_read: int) -> BackupHeader:
    values = {f.name: getattr(header, f.name) for f in fields(header)}
    return BackupHeader(**{**values, "bytes_read": bytes_read})


def read_backup_header(reader: ByteRangeReader) -> BackupHeader:
    """The backup set of a file that holds one (read_backup_headers reads every set of any file)."""
    headers = read_backup_headers(reader)
    if len(headers) != 1:
        raise ValueError(f"{reader.name}: holds {len(headers)} backup sets; read them with read_backup_headers")
    return headers[0]


@dataclass(frozen=True)
class TrailerIdentity:
    """Who a damaged backup belongs to, from the closing configuration copy at the end of the file,
    when only its head is damaged: enough to name the database and the LSNs that are lost."""

    database_name: str
    server_name: str
    database_creation: datetime | None
    backup_type: str
    first_lsn: int
    last_lsn: int
    backup_finish: datetime | None


def read_trailer_identity(reader: ByteRangeReader) -> TrailerIdentity | None:
    """The identity in the last closing copy of a file whose header could not be read, or None. Found
    by its own checksummed blocks near the end (the copy, or the last filemark's list of where the
    set's data ended), so nothing of the damaged head is relied on."""
    try:
        image = _Image(reader)
        end = image.size // SECTOR * SECTOR
        found = _copy_before(image, end)
        if found is None and (data_mark := _last_data_filemark(image, end)) is not None:
            found = _copy_before(image, data_mark)
    except (SourceError, ValueError, IndexError, struct.error):
        return None
    return found


def _copy_before(image: _Image, end: int) -> TrailerIdentity | None:
    """Whose backup the last configuration copy (MSLS/MSCI with MQCI) in the TAIL_BYTES before end
    names, or None."""
    low = max(0, end - TAIL_BYTES)
    image.load(low, end - low)
    return _identity_at(image, range(end - SECTOR, low - 1, -SECTOR))


def _identity_at(image: _Image, offsets: range) -> TrailerIdentity | None:
    """The identity the first configuration copy at one of `offsets` names; every block checked whole.
    A copy whose stream says more than the reader knows (a file backup's type) still names it."""
    for offset in offsets:
        if image.get(offset, 4) in (b"MSLS", b"MSCI"):
            streams, _ = _streams(image, offset, _check_block(image, offset))
            if b"MQCI" in streams and (found := identity_fields(image.get(*streams[b"MQCI"]))) is not None:
                return TrailerIdentity(**found)  # type: ignore[arg-type]
    return None


def _last_data_filemark(image: _Image, end: int) -> int | None:
    """Where the last set's data ended, as the last filemark in the file's tail lists it."""
    for offset in range(end - SECTOR, max(0, end - TAIL_BYTES) - 1, -SECTOR):
        if image.get(offset, 4) == b"SFMB":
            _check_block(image, offset)
            used, at = _filemark_list(image, offset)
            return int(struct.unpack_from("<Q", image.get(offset + at, 8))[0]) if used else None
    return None
