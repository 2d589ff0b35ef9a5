"""Read SQL Server backup headers offline, from the Microsoft Tape Format (MTF) blocks of the file.

Only the head (TAPE, SFMB, SSET, VOLB, MSCI with its MQCI configuration stream) and the trailer
(the closing MQCI copy, which alone carries the finish date, then ESET) are read, through a
byte-range reader: at most HEAD_BYTES + TAIL_BYTES per file whatever its size, so object storage
can serve the same code. Every descriptor block's header checksum is verified.

Layout facts (offsets, chunk tags) are those documented in docs and seen in real files written by
SQL Server 2008 R2 and 2016; see tests/unit/engines/mssql/test_mtf.py.

The fields beyond the LSNs and dates were found by comparing the 118 MTF files of the corpus
(../shared/testdata/mssql-backups) against what is known of them; no public reader documents them.
Each is confirmed as follows (tests/unit/engines/mssql/test_mtf.py asserts every one):
- BackupSetGUID, SSET +0x64: each file's is unique, and every differential's DifferentialBaseGUID
  equals the BackupSetGUID of the full it was taken on (23 differentials, 9 databases).
- DifferentialBaseLSN/GUID, SCIN +0x104/+0x110: set on differentials only; the LSN equals the base
  full's CheckpointLSN (DatabaseBackupLSN), the GUID its BackupSetGUID.
- RecoveryForkID, SCIN +0x9c, and the fork it branched from, +0xac (LSN) and +0xb8 (GUID): every backup
  of one database shares the fork; the two databases restored from another one's backups
  (restoretimeclean2016 from RestoreTimeClean's, passwd.bak's from RestoreTimeStripe's) carry a new fork
  whose parent is the source database's fork, at an LSN that is the LastLSN of a source log backup.
- FamilyGUID, SCIN +0xe0: kept by a restored database (equal to the source's first fork), while
  BindingID, SCIN +0x7c, changes on restore.
- Recovery model, from the database status word at SCIN +0xf4 (the sysdatabases bits: 8 "trunc. log
  on chkpt." is SIMPLE, 4 "select into/bulkcopy" BULK_LOGGED, neither FULL): bit 8 is set exactly on
  the databases that have no log backups and no log-chain origin (SimpleRecovery, detachattach,
  testlastbackup); every database with log backups has neither bit. BULK_LOGGED is not in the corpus.
- Log-chain origin, SCIN +0xf8: the LSN the current log chain began at (0 under SIMPLE); the first log
  backup of each chain (StopAt_1, RestoreTimeClean_1, RestoreTimeStripe_1, the Ola layout's first
  logs) starts exactly there, which is BeginsLogChain.
- CompatibilityLevel, SCIN +0x5b: 100 on every 2008 R2 database, 130 on the 2016 one, 100 on the 2008 R2
  database restored on 2016. SortOrder +0x58, UnicodeLocaleId +0x74, UnicodeComparisonStyle +0x78,
  SoftwareVersionBuild +0x18 (4000 for the SQL2008R2SP2 instance, i.e. 10.50.4000).
- Collation, SCIN +0xd8: 4-byte collation info (LCID and comparison flags, laid out as MS-TDS's
  COLLATION) and the SQL sort id; named here only where the corpus confirms the name (LCID 1033 with
  sort id 52 is SQL_Latin1_General_CP1_CI_AS, whose SortOrder 52 HEADERONLY reports; sort id 0 is a
  Windows collation, Latin1_General_<flags>), else None with the raw bytes kept.
- Per database file (SFIN): type at +0x1c (1 data, 2 log: every .mdf/.ndf is 1, every .ldf 2),
  filegroup id at +0x24 (1 for data files, 0 for logs, as FILELISTONLY's FileGroupID), the filegroup's
  name from the SFGI chunk with that id (+0x0c, name at +0x10), allocated size in bytes at +0x28.
Not found (no corpus file has them, and the published HEADERONLY Flags bits are not the SCIN flags:
0x200 is set on every file, copy-only or not): IsCopyOnly, IsDamaged, HasBulkLoggedData. They are
None here: unknown, never False.
Encryption (HEADERONLY's KeyAlgorithm, EncryptorThumbprint, EncryptorType; FILELISTONLY's TDEThumbprint)
is not found either: no encrypted or TDE backup is in the corpus, and no public reader places it. The
header says only what the writing server's version (SSET) rules out (engines/mssql/encryption.py:
"not encrypted" for a server older than TDE, else "unknown", never "not encrypted").
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from verification.engines.mssql.encryption import offline
from verification.errors import SourceError
from verification.model import BackupEncryption

BLOCK = 512
HEAD_BYTES = 16 * 1024
TAIL_BYTES = 32 * 1024
COMMON_HEADER = 52
STREAM_HEADER = 22
COMPRESSED_MAGIC = b"MSSQLBAK"
DBLK_TYPES = {b"TAPE", b"SSET", b"VOLB", b"DIRB", b"FILE", b"CFIL", b"ESPB", b"ESET", b"EOTM", b"SFMB",
              b"MSCI", b"MSDA", b"MSTL", b"MSLS"}
BACKUP_TYPES = {"D": "full", "I": "diff", "L": "log"}
RAID_BYTES = 26  # media set GUID (16), then family count at 20 and family number at 24, u16 each
SSET_GUID = 0x64  # BackupSetGUID, 16 bytes, in the SSET block (after MTF's own SSET fields)
SCIN_FULL_BYTES = 0x120  # the SCIN fields up to DifferentialBaseGUID (2008 R2 and 2016 write more)
FILE_TYPES = {1: "D", 2: "L"}  # SFIN +0x1c, as FILELISTONLY's Type; other codes are not in the corpus
# Collation names the corpus confirms: SQL sort ids, and Windows collations by LCID.
SQL_SORT_ORDERS = {52: "SQL_Latin1_General_CP1_CI_AS"}
WINDOWS_COLLATIONS = {0x409: "Latin1_General"}


class MtfError(SourceError):
    """The file is not a readable MTF backup; the message names the file, the offset and what was expected."""

    def __init__(self, name: str, offset: int, what: str, expected: str, found: str) -> None:
        super().__init__(f"{name}: {what} at offset {offset:#x}: expected {expected}, found {found}")
        self.name, self.offset, self.expected, self.found = name, offset, expected, found


class NeedsServerHeaderOnly(SourceError):
    """A natively compressed backup: its headers can only be read by RESTORE HEADERONLY in a server."""


class ByteRangeReader(Protocol):
    name: str

    def size(self) -> int: ...

    def read(self, offset: int, length: int) -> bytes: ...


@dataclass(frozen=True)
class DatabaseFile:
    """One database file as RESTORE FILELISTONLY lists it (size: allocated bytes, FILELISTONLY's Size)."""

    file_id: int
    logical_name: str
    physical_name: str
    size_bytes: int
    type_code: int = 0
    filegroup_id: int = 0
    filegroup: str | None = None

    @property
    def file_type(self) -> str | None:
        """D (data) or L (log), as FILELISTONLY's Type; None for a kind the corpus does not show."""
        return FILE_TYPES.get(self.type_code)


@dataclass(frozen=True)
class BackupHeader:
    """The RESTORE HEADERONLY facts recoverable offline, for the one backup set in a file."""

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
    # Not located in the offline header (see the module docstring): None means unknown. A reader that
    # knows (RESTORE HEADERONLY in a server) may fill them in.
    is_copy_only: bool | None = None
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


def decode_lsn(raw: bytes) -> int:
    """10 bytes (u32 VLF sequence, u32 block, u16 slot) -> the decimal form RESTORE HEADERONLY prints."""
    vlf, block, slot = struct.unpack("<IIH", raw)
    return int(vlf) * 10**15 + int(block) * 10**5 + int(slot)


def decode_mtf_date(raw: bytes) -> datetime | None:
    """5-byte big-endian bit field: 14 bits year, 4 month, 5 day, 5 hour, 6 minute, 6 second."""
    value = int.from_bytes(raw, "big")
    if value == 0:
        return None  # not filled in (the head copy of the finish date)
    second, value = value & 63, value >> 6
    minute, value = value & 63, value >> 6
    hour, value = value & 31, value >> 5
    day, value = value & 31, value >> 5
    month, year = value & 15, value >> 4
    try:
        return datetime(year, month, day, hour, minute, second)  # SQL Server writes local server time
    except ValueError:
        return None


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
    """The bytes read from one file: its head and its tail, addressed by file offset."""

    def __init__(self, reader: ByteRangeReader) -> None:
        self.name = reader.name
        self.size = reader.size()
        # Never a zero-length or out-of-range read: object storage answers those with an error.
        self.head = reader.read(0, min(HEAD_BYTES, self.size)) if self.size else b""
        tail_start = max(len(self.head), (self.size - TAIL_BYTES) // BLOCK * BLOCK)
        self.tail_start = tail_start
        self.tail = reader.read(tail_start, self.size - tail_start) if tail_start < self.size else b""
        self.bytes_read = len(self.head) + len(self.tail)

    def get(self, offset: int, length: int) -> bytes:
        if offset + length <= len(self.head):
            return self.head[offset:offset + length]
        if offset >= self.tail_start and offset + length <= self.tail_start + len(self.tail):
            return self.tail[offset - self.tail_start:offset - self.tail_start + length]
        raise MtfError(self.name, offset, "read outside the file's head and trailer",
                       f"a header within the first {HEAD_BYTES} or last {TAIL_BYTES} bytes",
                       f"a structure {length} bytes long")


def _check_block(image: _Image, offset: int, expected: set[bytes] | None = None) -> bytes:
    try:
        block = image.get(offset, COMMON_HEADER)
    except MtfError:
        raise MtfError(image.name, offset, "descriptor block", "a complete 52-byte header",
                       f"end of data (file is {image.size} bytes: truncated?)") from None
    kind = block[:4]
    if expected is not None and kind not in expected:
        raise MtfError(image.name, offset, "descriptor block", "/".join(sorted(k.decode() for k in expected)),
                       repr(kind))
    stored = struct.unpack_from("<H", block, 50)[0]
    computed = header_checksum(block)
    if stored != computed:
        raise MtfError(image.name, offset, f"{kind.decode('latin-1')} block header checksum",
                       f"{computed:#06x}", f"{stored:#06x}")
    return block


def _streams(image: _Image, block_offset: int, block: bytes) -> tuple[dict[bytes, tuple[int, int]], int]:
    """Streams of a DBLK: {id: (data offset, length)} and the offset of the next DBLK."""
    first = struct.unpack_from("<H", block, 8)[0]
    if first >= BLOCK:  # no streams (SFMB): the next block follows directly
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
    raise MtfError(image.name, block_offset, "stream list", "an SPAD stream ending the block", "none")


class _Malformed(Exception):
    """Inside a configuration stream: what is wrong, said relative to the stream's start."""


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """The stream is a run of (tag, u32 size, body) chunks that fills it exactly, as in every
    backup SQL Server wrote in the corpus; anything else is damage, never silently cut short."""
    chunks = []
    position = 0
    while position < len(data):
        if position + 8 > len(data):
            raise _Malformed(f"{len(data) - position} byte(s) after the last chunk, at +{position:#x}")
        tag, size = data[position:position + 4], struct.unpack_from("<I", data, position + 4)[0]
        if size < 8 or position + size > len(data):
            raise _Malformed(f"chunk {tag!r} at +{position:#x} claims {size} bytes, "
                             f"{len(data) - position} left in the stream")
        chunks.append((tag, data[position:position + size]))
        position += size
    return chunks


def _utf16(chunk: bytes, pointer_at: int) -> str:
    size, offset = struct.unpack_from("<HH", chunk, pointer_at)
    if offset + size > len(chunk):
        raise _Malformed(f"{chunk[:4]!r} string at +{offset:#x} ({size} bytes) runs past its {len(chunk)}-byte chunk")
    # A name that is not valid UTF-16 is still named (U+FFFD marks the damage) rather than refused.
    return chunk[offset:offset + size].decode("utf-16le", "replace")


@dataclass
class _SetInfo:
    database_name: str
    server_name: str
    backup_type: str
    first_lsn: int
    last_lsn: int
    checkpoint_lsn: int
    database_backup_lsn: int
    database_version: int
    database_creation: datetime | None
    backup_start: datetime | None
    backup_finish: datetime | None
    flags: int
    files: tuple[DatabaseFile, ...]
    extended: dict[str, object] = field(default_factory=dict)  # the SCIN fields past SCIN_BYTES, by name


SCIN_BYTES = 0x70  # the fixed part of the set's configuration chunk, up to its two name pointers
SFIN_BYTES = 0x38  # the fixed part of a database file's chunk, up to its two name pointers


def _parse_mqci(image: _Image, offset: int, data: bytes) -> _SetInfo:
    try:
        return _parse_chunks(image, offset, _chunks(data))
    except _Malformed as exc:
        raise MtfError(image.name, offset, "MQCI configuration stream", "well-formed chunks", str(exc)) from None


def _parse_chunks(image: _Image, offset: int, chunks: list[tuple[bytes, bytes]]) -> _SetInfo:
    scin = next((c for tag, c in chunks if tag == b"SCIN"), None)
    if scin is None:
        raise MtfError(image.name, offset, "MQCI configuration stream", "an SCIN chunk", "none")
    if len(scin) < SCIN_BYTES:
        raise MtfError(image.name, offset, "SCIN chunk", f"at least {SCIN_BYTES} bytes", f"{len(scin)} bytes")
    kind = chr(scin[0x57])
    if kind not in BACKUP_TYPES:
        raise MtfError(image.name, offset, "SCIN backup type", "D, I or L", repr(kind))
    short = next((c for tag, c in chunks if tag == b"SFIN" and len(c) < SFIN_BYTES), None)
    if short is not None:  # a database file the set lists but that cannot be read is never dropped
        raise MtfError(image.name, offset, "SFIN chunk", f"at least {SFIN_BYTES} bytes", f"{len(short)} bytes")
    filegroups = {struct.unpack_from("<I", c, 0x0C)[0]: _utf16(c, 0x10) for tag, c in chunks
                  if tag == b"SFGI" and len(c) >= 0x14}
    files = tuple(
        DatabaseFile(file_id=struct.unpack_from("<H", c, 0x14)[0], logical_name=_utf16(c, 0x30),
                     physical_name=_utf16(c, 0x34), size_bytes=struct.unpack_from("<Q", c, 0x28)[0],
                     type_code=struct.unpack_from("<I", c, 0x1C)[0], filegroup_id=struct.unpack_from("<I", c, 0x24)[0],
                     filegroup=filegroups.get(struct.unpack_from("<I", c, 0x24)[0]))
        for tag, c in chunks if tag == b"SFIN"
    )
    return _SetInfo(
        database_name=_utf16(scin, 0x68), server_name=_utf16(scin, 0x6C), backup_type=BACKUP_TYPES[kind],
        first_lsn=decode_lsn(scin[0x20:0x2A]), last_lsn=decode_lsn(scin[0x2A:0x34]),
        checkpoint_lsn=decode_lsn(scin[0x34:0x3E]), database_backup_lsn=decode_lsn(scin[0x3E:0x48]),
        database_version=struct.unpack_from("<H", scin, 0x5E)[0],
        database_creation=decode_mtf_date(scin[0x48:0x4D]), backup_start=decode_mtf_date(scin[0x4D:0x52]),
        backup_finish=decode_mtf_date(scin[0x52:0x57]), flags=struct.unpack_from("<I", scin, 0x08)[0],
        files=files, extended=_scin_extended(scin) if len(scin) >= SCIN_FULL_BYTES else {},
    )


def _guid(raw: bytes) -> str | None:
    return str(uuid.UUID(bytes_le=raw)) if any(raw) else None


def _lsn(raw: bytes) -> int | None:
    return decode_lsn(raw) if any(raw) else None


def recovery_model(status: int) -> str:
    """The database status word's recovery bits (sysdatabases.status: 8 trunc. log on chkpt., 4 select
    into/bulkcopy), as SQL Server 2000 exposed the recovery model and the backup still records it."""
    if status & 8:
        return "SIMPLE"
    return "BULK_LOGGED" if status & 4 else "FULL"


def collation_name(raw: bytes) -> str | None:
    """A name for the 5 collation bytes (MS-TDS COLLATION: LCID in 20 bits, then ignore case, accent,
    kana and width, binary, binary2, UTF-8, a reserved bit, a 4-bit version; then the SQL sort id),
    only where the corpus confirms it; None otherwise (the raw bytes are kept beside it)."""
    info, sort_id = struct.unpack_from("<I", raw, 0)[0], raw[4]
    if sort_id:
        return SQL_SORT_ORDERS.get(sort_id)
    base = WINDOWS_COLLATIONS.get(info & 0xFFFFF)
    if base is None or info >> 24:  # binary, UTF-8 or versioned (_100_, _140_) collations: not in the corpus
        return None
    # ColFlags in MS-TDS order: fIgnoreCase, fIgnoreAccent, fIgnoreKana, fIgnoreWidth (bits 20 to 23).
    ignore_case, ignore_accent, ignore_kana, ignore_width = ((info >> bit) & 1 for bit in (20, 21, 22, 23))
    return (base + ("_CI" if ignore_case else "_CS") + ("_AI" if ignore_accent else "_AS")
            + ("" if ignore_kana else "_KS") + ("" if ignore_width else "_WS"))


def _scin_extended(scin: bytes) -> dict[str, object]:
    """The SCIN fields past its names' pointers (offsets confirmed on the corpus: module docstring)."""
    def u32(at: int) -> int:
        return int(struct.unpack_from("<I", scin, at)[0])

    return {
        "software_build": int(struct.unpack_from("<H", scin, 0x18)[0]),
        "sort_order": scin[0x58], "compatibility_level": scin[0x5B],
        "unicode_locale_id": u32(0x74), "unicode_comparison_style": u32(0x78),
        "binding_id": _guid(scin[0x7C:0x8C]), "recovery_fork_guid": _guid(scin[0x9C:0xAC]),
        "fork_point_lsn": _lsn(scin[0xAC:0xB6]), "parent_fork_guid": _guid(scin[0xB8:0xC8]),
        "collation_id": scin[0xD8:0xDD].hex(), "collation": collation_name(scin[0xD8:0xDD]),
        "family_guid": _guid(scin[0xE0:0xF0]), "recovery_model": recovery_model(u32(0xF4)),
        "log_chain_origin_lsn": _lsn(scin[0xF8:0x102]),
        "differential_base_lsn": _lsn(scin[0x104:0x10E]), "differential_base_guid": _guid(scin[0x110:0x120]),
    }


def _check_end(image: _Image) -> None:
    """A complete backup file is whole 512-byte blocks and ends with a soft filemark (SFMB)."""
    if image.size % BLOCK:
        raise MtfError(image.name, image.size, "end of file", f"a size in whole {BLOCK}-byte blocks",
                       f"{image.size} bytes ({image.size % BLOCK} past a block boundary): the file is truncated")
    _check_block(image, image.size - BLOCK, {b"SFMB"})


def _trailer(image: _Image) -> _SetInfo:
    """The closing MQCI copy and the end-of-set block after it, searched backwards in the tail."""
    _check_end(image)
    end_of_set = None
    # In a small file head and tail meet, and the trailer may sit in the bytes read as the head.
    lowest = 0 if image.tail_start <= len(image.head) else image.tail_start
    for offset in range((image.size - BLOCK) // BLOCK * BLOCK, lowest - 1, -BLOCK):
        kind = image.get(offset, 4)
        if kind == b"ESET" and end_of_set is None:
            _check_block(image, offset)
            end_of_set = offset
        elif kind in (b"MSLS", b"MSCI") and end_of_set is not None:
            block = _check_block(image, offset)
            streams, _ = _streams(image, offset, block)
            if b"MQCI" in streams:
                data_offset, length = streams[b"MQCI"]
                return _parse_mqci(image, offset, image.get(data_offset, length))
    if end_of_set is None:
        raise MtfError(image.name, image.size, "end of backup set", f"an ESET block in the last {TAIL_BYTES} bytes",
                       "none: the file is truncated or was never closed")
    raise MtfError(image.name, end_of_set, "closing configuration copy", "an MSLS/MSCI block with MQCI before ESET",
                   "none")


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
    """The identity in the trailer of a file whose header could not be read, or None."""
    try:
        info = _trailer(_Image(reader))
    except (SourceError, ValueError, IndexError, struct.error):
        return None
    return TrailerIdentity(info.database_name, info.server_name, info.database_creation, info.backup_type,
                           info.first_lsn, info.last_lsn, info.backup_finish)


def read_backup_header(reader: ByteRangeReader) -> BackupHeader:
    image = _Image(reader)
    if image.head[:8] == COMPRESSED_MAGIC:
        raise NeedsServerHeaderOnly(f"{image.name}: natively compressed backup (starts with MSSQLBAK): its headers "
                                    "can only be read by RESTORE HEADERONLY inside a SQL Server target")
    if image.head[:4] != b"TAPE":
        raise MtfError(image.name, 0, "media header", "'TAPE' (Microsoft Tape Format)", repr(image.head[:8]))

    tape = _check_block(image, 0)  # its tag was checked above
    streams, offset = _streams(image, 0, tape)
    if b"RAID" not in streams:
        raise MtfError(image.name, 0, "TAPE block", "a RAID stream (media set)", "none")
    if streams[b"RAID"][1] < RAID_BYTES:
        raise MtfError(image.name, 0, "RAID stream", f"at least {RAID_BYTES} bytes", f"{streams[b'RAID'][1]} bytes")
    raid = image.get(*streams[b"RAID"])
    media = str(uuid.UUID(bytes_le=raid[:16]))
    family_count, family_number = struct.unpack_from("<H", raid, 20)[0], struct.unpack_from("<H", raid, 24)[0]

    seen = [b"TAPE"]
    version: tuple[int, int] | None = None
    backup_set_guid: str | None = None
    # Each block's successor lies past its header (at least a stream header, or a whole block for
    # SFMB), so the walk always advances and ends at the MSCI block or past the head.
    while offset < len(image.head):
        block = _check_block(image, offset, DBLK_TYPES)
        kind = block[:4]
        seen.append(kind)
        streams, next_offset = _streams(image, offset, block)
        if kind == b"SSET":
            major, minor = image.get(offset + 93, 2)
            version = (major, minor)
            backup_set_guid = _guid(image.get(offset + SSET_GUID, 16))
        elif kind == b"MSCI":
            if b"MQCI" not in streams:
                raise MtfError(image.name, offset, "MSCI block", "an MQCI stream", "none")
            head_info = _parse_mqci(image, offset, image.get(*streams[b"MQCI"]))
            break
        offset = next_offset
    else:
        raise MtfError(image.name, offset, "backup set header", f"an MSCI block in the first {HEAD_BYTES} bytes",
                       f"blocks {', '.join(k.decode() for k in seen)}")
    if version is None:
        raise MtfError(image.name, 0, "backup set", "an SSET block", "none")
    tail_info = _trailer(image)
    # The two copies agree on everything but the finish date, filled in only at the end. A
    # difference is damage, or a file holding several backup sets (BACKUP ... NOINIT).
    for name in ("database_name", "server_name", "backup_type", "first_lsn", "last_lsn", "checkpoint_lsn",
                 "database_backup_lsn", "database_version", "database_creation", "backup_start", "flags", "files",
                 "extended"):
        head_value, tail_value = getattr(head_info, name), getattr(tail_info, name)
        if head_value != tail_value:
            raise MtfError(image.name, image.size, f"closing configuration copy ({name})",
                           f"{head_value} as in the head copy",
                           f"{tail_value} (damaged, or several backup sets in one file, which is not supported)")
    info = tail_info  # the trailer copy is the complete one (finish date, final LSNs)
    return BackupHeader(
        path=image.name, database_name=info.database_name, server_name=info.server_name,
        backup_type=info.backup_type, first_lsn=info.first_lsn, last_lsn=info.last_lsn,
        checkpoint_lsn=info.checkpoint_lsn, database_backup_lsn=info.database_backup_lsn,
        database_version=info.database_version, software_version=version,
        database_creation=info.database_creation, backup_start=info.backup_start,
        backup_finish=info.backup_finish, media_set_guid=media, family_count=family_count,
        family_number=family_number, flags=info.flags, size_bytes=image.size, files=info.files,
        bytes_read=image.bytes_read, backup_set_guid=backup_set_guid, encryption=offline(version),
        **info.extended,  # type: ignore[arg-type]
    )
