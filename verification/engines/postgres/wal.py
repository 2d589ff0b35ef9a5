"""WAL segment names and LSNs: the arithmetic PostgreSQL uses, so plans can name missing files."""

from __future__ import annotations

import re
from dataclasses import dataclass

SEGMENT_RE = re.compile(r"^[0-9A-F]{24}$")
LSN_RE = re.compile(r"^([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})$")


def parse_lsn(text: str) -> int:
    """'0/A000088' -> 167772296."""
    match = LSN_RE.match(text.strip())
    if not match:
        raise ValueError(f"not a PostgreSQL LSN: {text!r}")
    return (int(match.group(1), 16) << 32) | int(match.group(2), 16)


def format_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


@dataclass(frozen=True, order=True)
class Segment:
    timeline: int
    number: int  # the segment's index from the start of WAL: log * segments_per_log + seg

    def name(self, segment_size: int) -> str:
        per_log = segments_per_log(segment_size)
        return f"{self.timeline:08X}{self.number // per_log:08X}{self.number % per_log:08X}"


def segments_per_log(segment_size: int) -> int:
    return 0x100000000 // segment_size


def timeline_of(name: str) -> int:
    """The timeline a segment name states: its first 8 digits, whatever the segment size."""
    if not SEGMENT_RE.match(name):
        raise ValueError(f"not a WAL segment file name: {name!r}")
    return int(name[0:8], 16)


def parse_segment(name: str, segment_size: int) -> Segment:
    if not SEGMENT_RE.match(name):
        raise ValueError(f"not a WAL segment file name: {name!r}")
    timeline, log, seg = int(name[0:8], 16), int(name[8:16], 16), int(name[16:24], 16)
    per_log = segments_per_log(segment_size)
    if seg >= per_log:
        raise ValueError(f"WAL segment {name} is out of range for {segment_size}-byte segments")
    return Segment(timeline, log * per_log + seg)


def segment_of_lsn(lsn: int, timeline: int, segment_size: int) -> Segment:
    return Segment(timeline, lsn // segment_size)
