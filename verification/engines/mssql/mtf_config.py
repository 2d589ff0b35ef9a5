"""SQL Server's configuration stream (MQCI) of a backup set: what RESTORE HEADERONLY and FILELISTONLY say.

The stream is SQL Server's own, inside an MTF block, and no public document describes it: the offsets
below were found on the corpus (how each is confirmed is below). It carries no checksum
of its own, so a value it holds that this reader does not know is never proof of damage: every refusal
here is a layout restoreproof does not know (ConfigError), which the caller reports as unsupported.

The fields beyond the LSNs and dates were found by comparing the 118
MTF files of the corpus (../shared/testdata/mssql-backups) against what is known of them; no public
reader documents them.
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
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from datetime import datetime

BACKUP_TYPES = {"D": "full", "I": "diff", "L": "log"}
FILE_TYPES = {1: "D", 2: "L"}  # SFIN +0x1c, as FILELISTONLY's Type; other codes are not in the corpus
SCIN_BYTES = 0x70  # the fixed part of the set's configuration chunk, up to its two name pointers
SCIN_FULL_BYTES = 0x120  # the SCIN fields up to DifferentialBaseGUID (2008 R2 and 2016 write more)
SFIN_BYTES = 0x38  # the fixed part of a database file's chunk, up to its two name pointers
# Collation names the corpus confirms: SQL sort ids, and Windows collations by LCID.
SQL_SORT_ORDERS = {52: "SQL_Latin1_General_CP1_CI_AS"}
WINDOWS_COLLATIONS = {0x409: "Latin1_General"}


class ConfigError(Exception):
    """The configuration stream holds what this reader does not know: what, expected and found."""

    def __init__(self, what: str, expected: str, found: str) -> None:
        super().__init__(f"{what}: expected {expected}, found {found}")
        self.what, self.expected, self.found = what, expected, found


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


@dataclass
class SetConfig:
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


def chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """The stream is a run of (tag, u32 size, body) chunks that fills it exactly, as in every
    backup SQL Server wrote in the corpus; anything else is refused, never silently cut short."""
    found = []
    position = 0
    while position < len(data):
        if position + 8 > len(data):
            raise ConfigError("MQCI configuration stream", "well-formed chunks",
                              f"{len(data) - position} byte(s) after the last chunk, at +{position:#x}")
        tag, size = data[position:position + 4], struct.unpack_from("<I", data, position + 4)[0]
        if size < 8 or position + size > len(data):
            raise ConfigError("MQCI configuration stream", "well-formed chunks",
                              f"chunk {tag!r} at +{position:#x} claims {size} bytes, "
                              f"{len(data) - position} left in the stream")
        found.append((tag, data[position:position + size]))
        position += size
    return found


def _utf16(chunk: bytes, pointer_at: int) -> str:
    size, offset = struct.unpack_from("<HH", chunk, pointer_at)
    if offset + size > len(chunk):
        raise ConfigError("MQCI configuration stream", "well-formed chunks",
                          f"{chunk[:4]!r} string at +{offset:#x} ({size} bytes) runs past its {len(chunk)}-byte chunk")
    # A name that is not valid UTF-16 is still named (U+FFFD marks the damage) rather than refused.
    return chunk[offset:offset + size].decode("utf-16le", "replace")


def parse(data: bytes) -> SetConfig:
    """The set's configuration from the stream's bytes."""
    return parse_chunks(chunks(data))


def parse_chunks(found: list[tuple[bytes, bytes]]) -> SetConfig:
    scin = next((c for tag, c in found if tag == b"SCIN"), None)
    if scin is None:
        raise ConfigError("MQCI configuration stream", "an SCIN chunk", "none")
    if len(scin) < SCIN_BYTES:
        raise ConfigError("SCIN chunk", f"at least {SCIN_BYTES} bytes", f"{len(scin)} bytes")
    kind = chr(scin[0x57])
    if kind not in BACKUP_TYPES:
        raise ConfigError("SCIN backup type", "D, I or L", repr(kind))
    return SetConfig(
        database_name=_utf16(scin, 0x68), server_name=_utf16(scin, 0x6C), backup_type=BACKUP_TYPES[kind],
        first_lsn=decode_lsn(scin[0x20:0x2A]), last_lsn=decode_lsn(scin[0x2A:0x34]),
        checkpoint_lsn=decode_lsn(scin[0x34:0x3E]), database_backup_lsn=decode_lsn(scin[0x3E:0x48]),
        database_version=struct.unpack_from("<H", scin, 0x5E)[0],
        database_creation=decode_mtf_date(scin[0x48:0x4D]), backup_start=decode_mtf_date(scin[0x4D:0x52]),
        backup_finish=decode_mtf_date(scin[0x52:0x57]), flags=struct.unpack_from("<I", scin, 0x08)[0],
        files=_files(found), extended=_scin_extended(scin) if len(scin) >= SCIN_FULL_BYTES else {},
    )


def identity_fields(data: bytes) -> dict[str, object] | None:
    """Whose backup a configuration stream describes (names, creation, type, LSNs, finish), also where
    the rest of it is not known (a backup type not read, such as a file backup's): enough to place the
    file with its database. None where not even that much is whole."""
    try:
        scin = next((c for tag, c in chunks(data) if tag == b"SCIN"), None)
        if scin is None or len(scin) < SCIN_BYTES:
            return None
        kind = chr(scin[0x57])
        return {"database_name": _utf16(scin, 0x68), "server_name": _utf16(scin, 0x6C),
                "database_creation": decode_mtf_date(scin[0x48:0x4D]),
                "backup_type": BACKUP_TYPES.get(kind, f"type {kind!r}"),
                "first_lsn": decode_lsn(scin[0x20:0x2A]), "last_lsn": decode_lsn(scin[0x2A:0x34]),
                "backup_finish": decode_mtf_date(scin[0x52:0x57])}
    except (ConfigError, ValueError, IndexError, struct.error):
        return None


def _files(found: list[tuple[bytes, bytes]]) -> tuple[DatabaseFile, ...]:
    short = next((c for tag, c in found if tag == b"SFIN" and len(c) < SFIN_BYTES), None)
    if short is not None:  # a database file the set lists but that cannot be read is never dropped
        raise ConfigError("SFIN chunk", f"at least {SFIN_BYTES} bytes", f"{len(short)} bytes")
    filegroups = {struct.unpack_from("<I", c, 0x0C)[0]: _utf16(c, 0x10) for tag, c in found
                  if tag == b"SFGI" and len(c) >= 0x14}
    return tuple(
        DatabaseFile(file_id=struct.unpack_from("<H", c, 0x14)[0], logical_name=_utf16(c, 0x30),
                     physical_name=_utf16(c, 0x34), size_bytes=struct.unpack_from("<Q", c, 0x28)[0],
                     type_code=struct.unpack_from("<I", c, 0x1C)[0], filegroup_id=struct.unpack_from("<I", c, 0x24)[0],
                     filegroup=filegroups.get(struct.unpack_from("<I", c, 0x24)[0]))
        for tag, c in found if tag == b"SFIN"
    )


def guid(raw: bytes) -> str | None:
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
    """The SCIN fields past its names' pointers (offsets confirmed on the corpus: the module docstring)."""
    def u32(at: int) -> int:
        return int(struct.unpack_from("<I", scin, at)[0])

    return {
        "software_build": int(struct.unpack_from("<H", scin, 0x18)[0]),
        "sort_order": scin[0x58], "compatibility_level": scin[0x5B],
        "unicode_locale_id": u32(0x74), "unicode_comparison_style": u32(0x78),
        "binding_id": guid(scin[0x7C:0x8C]), "recovery_fork_guid": guid(scin[0x9C:0xAC]),
        "fork_point_lsn": _lsn(scin[0xAC:0xB6]), "parent_fork_guid": guid(scin[0xB8:0xC8]),
        "collation_id": scin[0xD8:0xDD].hex(), "collation": collation_name(scin[0xD8:0xDD]),
        "family_guid": guid(scin[0xE0:0xF0]), "recovery_model": recovery_model(u32(0xF4)),
        "log_chain_origin_lsn": _lsn(scin[0xF8:0x102]),
        "differential_base_lsn": _lsn(scin[0x104:0x10E]), "differential_base_guid": guid(scin[0x110:0x120]),
    }
