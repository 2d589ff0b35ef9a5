"""Edit a real SQL Server backup the way a buggy writer, another tool or tampering would: a field
changed and the MTF block or stream header checksum recomputed, so that only structural checks
(or the chain rules) can tell. Shared by the MTF reader's and the chain planner's tests."""

from __future__ import annotations

import struct

import pytest

from verification.engines.mssql.mtf import (
    BackupHeader,
    MtfError,
    MtfUnsupported,
    header_checksum,
    read_backup_header,
    stream_checksum,
)


class StrictBytes:
    """A byte-range reader that refuses what object storage refuses: empty and out-of-range reads."""

    def __init__(self, name: str, data: bytes) -> None:
        self.name, self.data = name, bytes(data)

    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, length: int) -> bytes:
        if length <= 0 or offset < 0 or offset + length > len(self.data):
            raise AssertionError(f"read({offset}, {length}) outside a {len(self.data)}-byte object")
        return self.data[offset:offset + length]


def resize_stream(backup: Backup, stream: int, length: int) -> None:
    """Resize a stream and move the SPAD after it so that the block still ends where it did."""
    spad = min(at for at in backup.streams(b"SPAD") if at > stream)
    end = spad + 22 + struct.unpack_from("<Q", backup.data, spad + 8)[0]
    header = bytes(backup.data[spad:spad + 22])
    backup.stream_length(stream, length)
    moved = (stream + 22 + length + 3) & ~3
    backup.data[moved:moved + 22] = header
    backup.stream_length(moved, end - moved - 22)


class Backup:
    """A copy of the real file, edited in place, checksums recomputed after every edit."""

    def __init__(self, original: bytes) -> None:
        self.data = bytearray(original)

    def streams(self, tag: bytes) -> list[int]:
        """Offsets of the stream headers with this id whose header checksum is valid."""
        found, at = [], self.data.find(tag)
        while at >= 0:
            header = bytes(self.data[at:at + 22])
            if len(header) == 22 and struct.unpack_from("<H", header, 20)[0] == stream_checksum(header):
                found.append(at)
            at = self.data.find(tag, at + 1)
        return found

    def fix_block(self, offset: int) -> None:
        struct.pack_into("<H", self.data, offset + 50, header_checksum(bytes(self.data[offset:offset + 52])))

    def fix_stream(self, offset: int) -> None:
        struct.pack_into("<H", self.data, offset + 20, stream_checksum(bytes(self.data[offset:offset + 22])))

    def rename_block(self, offset: int, tag: bytes) -> None:
        self.data[offset:offset + 4] = tag
        self.fix_block(offset)

    def rename_stream(self, offset: int, tag: bytes) -> None:
        self.data[offset:offset + 4] = tag
        self.fix_stream(offset)

    def stream_length(self, offset: int, length: int) -> None:
        struct.pack_into("<Q", self.data, offset + 8, length)
        self.fix_stream(offset)

    def chunk(self, copy: int, tag: bytes, nth: int = 0) -> int:
        """Offset of a chunk of the head (0) or trailer (1) configuration stream."""
        mqci = self.streams(b"MQCI")[copy]
        start, end = mqci + 22, mqci + 22 + struct.unpack_from("<Q", self.data, mqci + 8)[0]
        position, seen = start, []
        while position < end:
            if self.data[position:position + 4] == tag:
                seen.append(position)
            position += struct.unpack_from("<I", self.data, position + 4)[0]
        return seen[nth]

    def put(self, offset: int, fmt: str, *values: object) -> None:
        struct.pack_into(fmt, self.data, offset, *values)

    def in_both_copies(self, tag: bytes, relative: int, fmt: str, *values: object, nth: int = 0) -> None:
        for copy in (0, 1):
            self.put(self.chunk(copy, tag, nth) + relative, fmt, *values)

    def header(self, name: str = "backup.trn") -> BackupHeader:
        return read_backup_header(StrictBytes(name, self.data))

    def error(self, name: str = "backup.trn") -> str:
        """The message of the damage the reader proves (never an unknown layout)."""
        with pytest.raises(MtfError) as caught:
            self.header(name)
        assert not isinstance(caught.value, MtfUnsupported), str(caught.value)
        return str(caught.value)

    def unsupported(self, name: str = "backup.trn") -> str:
        """The message of a layout the reader does not know, without its closing sentence (who wrote it)."""
        with pytest.raises(MtfUnsupported) as caught:
            self.header(name)
        message = str(caught.value)
        writer = caught.value.writer or "a SQL Server version not yet read"
        assert message.endswith(f"a layout restoreproof does not know (written by {writer}), not proof of damage")
        return message[:message.rindex(": a layout restoreproof does not know")]
