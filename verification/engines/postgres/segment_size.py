"""The cluster's WAL segment size, read from its backups, never assumed.

`initdb --wal-segsize` makes segments of any power of two from 1 MiB to 1 GiB, and a segment's name
depends on it (timeline, LSN >> 32, (LSN & 0xFFFFFFFF) // size). pgBackRest records, per backup, the
start and stop LSN and the segment PostgreSQL named for each (pg_walfile_name), so every such pair
admits only the sizes under which that LSN lies in that segment; all pairs together nearly always
leave one. They leave several only when every pair's segment number within its 4 GiB log is 0; the
long page header at the start of an archived segment (XLogLongPageHeaderData.xlp_seg_size) then
tells, where reading it is cheap (a plain, gzip or bzip2 copy, not encrypted). Only then, and only
when it fits the backups and the archive's segment names, is postgres.wal_segment_size used, and the
plan says so.

A stanza upgraded into a new cluster (pg_upgrade, or dump and restore into one made with another
`--wal-segsize`) holds clusters of different sizes, one archive id each: the size is told per cluster,
from its own backups, archive header and names, never from another's.
"""

from __future__ import annotations

import bz2
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from verification.engines.postgres.wal import SEGMENT_RE, parse_lsn
from verification.model import BackupSet

SIZES = tuple(1 << bits for bits in range(20, 31))  # PostgreSQL's legal sizes: 1 MiB .. 1 GiB
RULE = "wal-segment-size"
UNKNOWN = "wal-segment-size-unknown"  # the problem code of a plan refused for want of it
# XLogLongPageHeaderData: magic, info, tli, pageaddr, rem_len (padded to 24), sysid, seg_size, blcksz.
LONG_HEADER = "HHIQI4xQII"
LONG_HEADER_BYTES = struct.calcsize("<" + LONG_HEADER)
XLP_LONG_HEADER = 0x0002
# Compressed bytes read to reach a segment's first page: a gzip copy needs a few, a bzip2 copy its
# first block (900 kB of segment, compressed).
HEADER_READ = {"": LONG_HEADER_BYTES, ".gz": 64 * 1024, ".bz2": 1024 * 1024}


@dataclass(frozen=True)
class SegmentSize:
    """What the plan uses: `bytes` None when nothing tells the size and the setting does not fit the
    backups (the plan is then refused). `detail` is the chain rule's text."""

    bytes: int | None
    detail: str
    # The setting differs from the size the repository proves (and is not used).
    setting_ignored: bool = False
    # The setting was used because the repository cannot tell.
    setting_used: bool = False


@dataclass(frozen=True)
class HeaderRead:
    """An archived segment's long page header: the size it states (None: unreadable), and why."""

    file: str
    size: int | None
    why: str = ""


def mib(size: int) -> str:
    return f"{size} bytes ({size // (1024 * 1024)} MiB)" if size >= 1024 * 1024 else f"{size} bytes"


def fitting(segment: str, lsn: int) -> set[int]:
    """The sizes under which pg_walfile_name(lsn) is `segment` (its timeline aside). PostgreSQL names
    the segment holding the byte before the LSN (XLByteToPrevSeg): an LSN on a boundary is the end of
    the previous segment."""
    if not SEGMENT_RE.match(segment) or lsn <= 0:
        return set()
    log, seg = int(segment[8:16], 16), int(segment[16:24], 16)
    found = set()
    for size in SIZES:
        number = (lsn - 1) // size
        per_log = 0x100000000 // size
        if (number // per_log, number % per_log) == (log, seg):
            found.add(size)
    return found


def backup_pairs(backups: Sequence[BackupSet]) -> list[tuple[str, str, str]]:
    """(backup label, segment, LSN text) for each start and stop pgBackRest recorded."""
    pairs = []
    for backup in backups:
        for segment, lsn in ((backup.start_wal, backup.start_lsn), (backup.stop_wal, backup.stop_lsn)):
            if segment and lsn:
                pairs.append((backup.label, segment, lsn))
    return pairs


def from_backups(backups: Sequence[BackupSet]) -> tuple[set[int], str]:
    """The sizes every recorded (segment, LSN) pair admits, and what they are."""
    pairs = backup_pairs(backups)
    if not pairs:
        return set(SIZES), "no backup records a WAL position (backup-lsn-start/stop)"
    allowed = set(SIZES)
    for _, segment, lsn in pairs:
        try:
            allowed &= fitting(segment, parse_lsn(lsn))
        except ValueError:
            allowed = set()
    label, segment, lsn = pairs[-1]
    said = f"{len(pairs)} WAL position(s) the backups record (e.g. {label}: {lsn} in {segment})"
    return allowed, said


def from_names(names: Sequence[str]) -> set[int]:
    """The sizes under which every one of `names` is a segment name: a size of S bytes numbers at most
    4 GiB / S segments per log, so a segment part past that rules S (and every larger size) out."""
    highest = max((int(name[16:24], 16) for name in names if SEGMENT_RE.match(name)), default=0)
    return {size for size in SIZES if highest < 0x100000000 // size}


def read_header(data: bytes) -> int | None:
    """xlp_seg_size from a segment's first bytes, when they are a long page header whose page address
    agrees with it; None otherwise."""
    if len(data) < LONG_HEADER_BYTES:
        return None
    for order in "<>":
        _, info, tli, pageaddr, _, _, size, block = struct.unpack_from(order + LONG_HEADER, data)
        if (info & XLP_LONG_HEADER and tli > 0 and size in SIZES and pageaddr % size == 0
                and block in (1 << b for b in range(10, 16))):
            return int(size)
    return None


def first_bytes(data: bytes, ext: str) -> bytes:
    """The start of a segment from the start of its archived copy (.gz, .bz2 or plain)."""
    if ext == ".gz":
        return zlib.decompressobj(wbits=31).decompress(data, LONG_HEADER_BYTES)
    if ext == ".bz2":
        try:
            return bz2.BZ2Decompressor().decompress(data, LONG_HEADER_BYTES)
        except (OSError, EOFError):
            return b""
    return data


def header_size(file: str, ext: str, read: Callable[[int], bytes]) -> HeaderRead:
    """The size an archived segment's header states; `read(n)` gives its first n bytes."""
    if ext not in HEADER_READ:
        return HeaderRead(file, None, f"{ext} compression is not read here")
    try:
        size = read_header(first_bytes(read(HEADER_READ[ext]), ext))
    except zlib.error as exc:
        return HeaderRead(file, None, f"does not decompress ({exc})")
    return HeaderRead(file, size, "" if size else "its first bytes are not a WAL long page header")


def decide(backups: Sequence[BackupSet], setting: int, header: Callable[[], HeaderRead | None],
           names: Sequence[str] = ()) -> SegmentSize:
    """One cluster's segment size: its backups', else its archived segment header's (when it fits the
    backups), else the setting's (when it fits them and the archive's segment `names`, and said), else
    none."""
    allowed, said = from_backups(backups)
    if not allowed:
        said += " fit no segment size together (damaged or foreign backup.info entries?)"
        allowed = set(SIZES)
    if len(allowed) == 1:
        size = next(iter(allowed))
        return SegmentSize(size, f"{mib(size)}, from the backups: the only size that fits {said}"
                           + _setting(setting, size), setting_ignored=setting != size)
    ranges = f"sizes {mib(min(allowed))} to {mib(max(allowed))}"
    read = header()
    if read is not None and read.size is not None and read.size in allowed:
        return SegmentSize(read.size, f"{mib(read.size)}, from the long page header of the archived segment "
                                      f"{read.file}; the backups allow {ranges} ({said})"
                                      + _setting(setting, read.size), setting_ignored=setting != read.size)
    why = ("no archived segment to read" if read is None else f"{read.file}: {read.why}" if read.size is None
           else f"{read.file} states {mib(read.size)}, which the backups do not allow")
    if setting in allowed and setting in from_names(names):
        return SegmentSize(setting, f"{mib(setting)}, from the setting postgres.wal_segment_size: the repository "
                                    f"cannot tell ({said} allow {ranges}; header: {why})", setting_used=True)
    unfit = ("does not fit them" if setting not in allowed else
             "does not fit the archive's segment names (one numbers more segments per log than it allows)")
    return SegmentSize(None, f"the WAL segment size cannot be told: {said} allow {ranges}, header: {why}; and "
                             f"postgres.wal_segment_size ({mib(setting)}) {unfit}: set it to the "
                             f"cluster's (SHOW wal_segment_size)")


def _setting(setting: int, size: int) -> str:
    return "" if setting == size else f"; postgres.wal_segment_size ({mib(setting)}) ignored"
