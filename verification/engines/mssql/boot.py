"""Read a database's boot page (page 1:9, type 13) out of a full or differential backup, offline.

The boot page holds SQL Server's DBINFO structure: what DBCC DBINFO and DBCC PAGE (db, 1, 9, 3)
print. From it we report what the source server recorded: the last clean DBCC CHECKDB
(dbi_dbccLastKnownGood), the database's versions, name, id, creation date and compatibility level.

Where the page is: in the data stream of the backup (pages.locate_data_streams), in slot 1 of the
extent of file 1 that starts at page 8. Every corpus stream (../shared/testdata/mssql-backups)
carries its extents in ascending (file, page) order, so the walk stops at the first extent past
that one; a striped backup carries the page in one family only, and the others answer None.
A log backup has no data stream: locate_data_streams raises MtfError for it, as for page
verification (deliberately not None: "no data stream" could also be damage, and the caller knows
from the header which files are fulls and differentials).

The checksum of the page is verified first (pages.page_checksum). A page whose checksum does not
match is not decoded: its BootPage says "mismatch" and leaves every field None (the page verifier
reports the mismatch itself). A page without a checksum (flag 0x200 clear) is decoded, and says so.

The page body is one record (slot 0 at offset 0x60, the only slot): 4 bytes of record header
(status bytes, then the end of its fixed part: 1444 in version 661, 1620 in version 852), then
DBINFO. Offsets below are from the start of that record.
Published layouts: OrcaMDF (Mark Rasmussen, src/OrcaMDF.Core/Engine/Pages/BootPage.cs, 2008:
version, create version, name) and the UGTS notes on the 2008 R2 boot page (as carried by the
sdl::db boot_page.h reader: crdate, dbid, 0x13A "value 0x64"). Each is confirmed on the corpus,
on the 40 boot pages of version 661 (2008 R2) and the 4 of version 852 (2016):
  0x04 dbi_version u16: equals the backup header's DatabaseVersion in every file.
  0x06 dbi_createVersion u16: <= dbi_version; 661 in restoretimeclean2016, a database restored
       from the 2008 R2 RestoreTimeClean backup, and 852 in the database created on 2016.
  0x2C dbi_crdate datetime: within a second of the header's DatabaseCreationDate in 28 pages; where
       the database came to the backing-up server by attach or restore the two differ, either way
       (db1: 2016-08-30 in the page, 2017-02-06 in the header; restoretimeclean2016: 19:58:43 in the
       page, 19:20:02 in the header), so it is reported as the page has it, never checked against it.
  0x34 dbi_dbname nchar(128): equals the header's database name, ignoring case (passwd.bak: "StripeTest"
       in the page, "stripetest" in the header), over the length in bytes held at 0x134 (a u32; not in
       the published layouts, which say "value 6" of a 3-letter name): the bytes after it are not
       cleared, 0x20 bytes where the name was never longer, "estripe" after "StripeTest" in
       passwd.bak, restored from a database first named "restoretimestripe".
  0x138 dbi_dbid u16.
  0x13A dbi_cmptlevel u16: 100 in every 661 page; 130 in the database created on 2016, 100 in the
       one restored there from 2008 R2 (a restore keeps the level): the published "0x64" is the level.
  0x28C dbi_dbccLastKnownGood datetime, version 661 only. No published layout places it; the corpus
       does: the only plausible datetimes of a 661 record (8 bytes at an even offset, under a day of
       ticks, days in 1998-2025; db1's 0x17C, "2019-12-16 00:00", is zero ticks then the u32 at
       0x180, later than the backup) are 0x14 (follows the last log backup: see
       OlaMsFilter/Simple, whose second full carries the time of the log backup before it), 0x2C,
       0x2A4 (the creation date of the database it was first made as) and 0x28C, which holds
       2017-03-04 21:43:04.740, 21:43:04.983 and 21:43:05.033 in db1, db2 and db3: one run across
       three databases, in database id order, months before their backups; 1900-01-01 (zero, never
       ran) in the other 661 pages. In version 852 the neighbouring fields are where they were in
       661 (an LSN at 0x280, a datetime at 0x2A4), so 0x28C is likely the same field there too, but
       every 852 page of the corpus holds zero there, which cannot tell the field from an unused
       one: in version 852 (and any version not listed) the date is not read and says so (unread).
SQL Server's datetime is 8 bytes: a u32 count of 1/300 s since midnight, then an i32 count of days
since 1900-01-01 (this order, ticks first, gives the header's creation dates; the other does not).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import datetime, timedelta

from verification.engines.mssql.mtf import ByteRangeReader, MtfError
from verification.engines.mssql.pages import PAGE, PAGE_HEADER, decode_header, locate_data_streams, page_checksum

BOOT_FILE, BOOT_PAGE, BOOT_TYPE = 1, 9, 13
EXTENT = 8
RECORD = PAGE_HEADER  # slot 0: the record follows the page header
SLOT_COUNT_AT = 0x16
FLAG_CHECKSUM = 0x200
TICKS_PER_DAY = 300 * 86400
EPOCH = datetime(1900, 1, 1)

# Offsets from the start of the record (see the module docstring for what confirms each).
VERSION_AT, CREATE_VERSION_AT, CRDATE_AT, NAME_AT, NAME_BYTES, NAME_LENGTH_AT, DBID_AT = (
    0x04, 0x06, 0x2C, 0x34, 256, 0x134, 0x138)
# dbi_version -> (end of the record's fixed part, offset of dbi_dbccLastKnownGood or None where unconfirmed)
LAYOUTS: dict[int, tuple[int, int | None]] = {661: (1444, 0x28C), 852: (1620, None)}
FIELDS = ("dbi_dbname", "dbi_dbid", "dbi_crdate", "dbi_cmptlevel", "dbi_dbccLastKnownGood")
CHECKDB = "dbi_dbccLastKnownGood"


@dataclass(frozen=True)
class BootPage:
    """What the boot page of one backup file says; None where it was not (or could not be) read.

    unread names the DBINFO fields not decoded: all of them when the checksum does not match or the
    version's layout is unknown, dbi_dbccLastKnownGood alone where its place is not confirmed for the
    version. last_known_good is None with CHECKDB not in unread: the source never recorded a clean
    CHECKDB (1900-01-01).
    """

    path: str
    source: int  # file offset of the page in the backup
    checksum: str  # "valid", "mismatch" (nothing decoded) or "absent" (the page carries none)
    stored_checksum: int
    computed_checksum: int
    version: int | None = None
    create_version: int | None = None
    name: str | None = None
    database_id: int | None = None
    created: datetime | None = None
    compatibility_level: int | None = None
    last_known_good: datetime | None = None
    unread: tuple[str, ...] = ()

    @property
    def checkdb_never_ran(self) -> bool:
        return self.last_known_good is None and CHECKDB not in self.unread and self.version is not None


def decode_datetime(raw: bytes) -> datetime | None:
    """SQL Server's datetime: ticks of 1/300 s (u32), then days since 1900-01-01 (i32). None if out of range."""
    ticks, days = struct.unpack("<Ii", raw)
    if ticks >= TICKS_PER_DAY or not 0 <= days <= 2958463:  # 9999-12-31, the type's last day
        return None
    # Milliseconds rounded as SQL Server shows them: 1 tick = 3.33 ms -> .003, 2 ticks -> .007.
    return EPOCH + timedelta(days=days, milliseconds=(ticks * 10 + 1) // 3)


def read_boot_page(reader: ByteRangeReader, start: int = 0) -> BootPage | None:
    """The boot page of a full or differential backup (the set whose SSET block is at `start` in its file,
    the first set by default: pages.locate_data_streams); None if this file does not carry it (a stripe)."""
    found = _find(reader, start)
    if found is None:
        return None
    offset, page = found
    header = decode_header(page)
    stored, computed = header.stored_checksum, page_checksum(page)
    if not header.flag_bits & FLAG_CHECKSUM:
        return _decode(reader.name, offset, page, "absent", stored, computed)
    if stored != computed:
        return BootPage(reader.name, offset, "mismatch", stored, computed, unread=FIELDS)
    return _decode(reader.name, offset, page, "valid", stored, computed)


def _find(reader: ByteRangeReader, start: int) -> tuple[int, bytes] | None:
    for stream in locate_data_streams(reader, start):
        for first in range(0, stream.pages, EXTENT):
            count = min(EXTENT, stream.pages - first)
            offset = stream.offset + first * PAGE
            data = reader.read(offset, count * PAGE)
            if len(data) != count * PAGE:
                raise MtfError(reader.name, offset, "data pages", f"{count * PAGE} bytes", f"{len(data)} bytes")
            extents = set()
            for slot in range(count):
                page = data[slot * PAGE:(slot + 1) * PAGE]
                header = decode_header(page)
                if header.header_version != 1 or header.file_id == 0:
                    continue  # never-formatted bytes, zeroed pages and backup filler
                if (header.file_id, header.page_id, header.page_type) == (BOOT_FILE, BOOT_PAGE, BOOT_TYPE):
                    return offset + slot * PAGE, page
                extents.add((header.file_id, header.page_id - slot))
            if extents and min(extents) > (BOOT_FILE, BOOT_PAGE - BOOT_PAGE % EXTENT):
                return None  # past the boot page's extent: extents come in ascending order
    return None


def _decode(path: str, offset: int, page: bytes, checksum: str, stored: int, computed: int) -> BootPage:
    record = page[RECORD:]
    version, create_version = struct.unpack_from("<HH", record, VERSION_AT)
    layout = LAYOUTS.get(version)
    slots = struct.unpack_from("<H", page, SLOT_COUNT_AT)[0]
    slot0 = struct.unpack_from("<H", page, PAGE - 2)[0]
    fixed_end = struct.unpack_from("<H", record, 2)[0]
    if layout is None or (slots, slot0, fixed_end) != (1, RECORD, layout[0]):
        # A layout we have not confirmed: even the version is only what OrcaMDF and the corpus agree on.
        return BootPage(path, offset, checksum, stored, computed, version, create_version, unread=FIELDS)
    unread = []
    length = struct.unpack_from("<I", record, NAME_LENGTH_AT)[0]
    name = None
    if 0 < length <= NAME_BYTES and length % 2 == 0:
        name = record[NAME_AT:NAME_AT + length].decode("utf-16-le", errors="replace")
    else:
        unread.append("dbi_dbname")
    database_id, level = struct.unpack_from("<HH", record, DBID_AT)
    created = decode_datetime(record[CRDATE_AT:CRDATE_AT + 8])
    if created is None:
        unread.append("dbi_crdate")
    checkdb_at = layout[1]
    last_good = None
    if checkdb_at is None:
        unread.append(CHECKDB)
    else:
        raw = record[checkdb_at:checkdb_at + 8]
        last_good = decode_datetime(raw)
        if raw == bytes(8):  # 1900-01-01 00:00:00: never ran
            last_good = None
        elif last_good is None:
            unread.append(CHECKDB)
    return BootPage(path, offset, checksum, stored, computed, version, create_version, name, database_id,
                    created, level, last_good, tuple(unread))
