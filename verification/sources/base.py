"""The interface every backup source implements."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Protocol


def excluded(path: str, patterns: Sequence[str]) -> str | None:
    """The first configured pattern that matches a source-relative path, or None."""
    return next((pattern for pattern in patterns if fnmatchcase(path, pattern)), None)


class Source(Protocol):
    """A read-only tree of backup files, addressed by '/'-separated relative paths."""

    def describe(self) -> str:
        """How to name this source in messages and reports (a path or a URL)."""
        ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[str]:
        """Names (not paths) of the entries directly under `path`, sorted; [] when it is missing."""
        ...

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes: ...

    def size(self, path: str) -> int: ...

    def modified(self, path: str) -> datetime | None:
        """The file's modification time, None when the source does not know it."""
        ...


class SourceFile:
    """One file of a source as a byte-range reader (what the SQL Server header reader consumes)."""

    def __init__(self, source: Source, path: str) -> None:
        self.source = source
        self.path = path
        self.name = path
        self.bytes_read = 0

    def size(self) -> int:
        return self.source.size(self.path)

    def read(self, offset: int, length: int) -> bytes:
        data = self.source.read_bytes(self.path, offset, length)
        self.bytes_read += len(data)
        return data
