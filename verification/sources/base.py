"""The interface every backup source implements."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from io import RawIOBase
from threading import Lock
from typing import Protocol

from verification.model import IncompleteUpload


def excluded(path: str, patterns: Sequence[str]) -> str | None:
    """The first configured pattern that matches a source-relative path, or None."""
    return next((pattern for pattern in patterns if fnmatchcase(path, pattern)), None)


@dataclass(frozen=True)
class Fingerprint:
    """What tells one version of a file's content from another, known without reading the file.

    `reliable`: the value changes whenever the content does (an S3 ETag: S3 makes a new one for every
    object written). A fingerprint that is not reliable is metadata a change could keep (a local
    file's size and times: see LocalSource.fingerprint), so what was found in a file's bytes may be
    kept against it only where being wrong costs little."""

    value: str
    reliable: bool


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

    def incomplete_uploads(self) -> list[IncompleteUpload]:
        """Object storage's unfinished multipart uploads under the source ([] for a folder)."""
        ...

    def identity(self) -> str:
        """What names this source and no other, the same from run to run (a key for caches): a
        folder's resolved path, an object store's endpoint, bucket and prefix."""
        ...

    def fingerprint(self, path: str) -> Fingerprint | None:
        """The file's content version, without reading it; None when the source cannot say (a file
        that is gone: its read will say why)."""
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

    def sequential(self) -> SequentialReader:
        """A reader for one long scan from start to end: one open handle where the source is local
        files (the kernel reads ahead across reads, and no memory is allocated per read)."""
        return SequentialReader(self)


class SequentialReader:
    """Reads of one file into a caller's buffer; close() (or `with`) when done.

    Reads are positional (pread) on one handle, so several threads may read through it at once
    (`concurrent`): the page scan reads block k+1 while block k is checked."""

    def __init__(self, file: SourceFile) -> None:
        self.file = file
        opener = getattr(file.source, "open_binary", None)
        self.handle: RawIOBase | None = opener(file.path) if opener is not None else None
        self._counting = Lock()

    @property
    def concurrent(self) -> bool:
        """Whether read_into may be called from several threads at once (a local file's pread)."""
        return self.handle is not None

    def read_into(self, offset: int, buffer: memoryview) -> int:
        """Fill `buffer` from `offset`; the number of bytes read (fewer only at the end of the file)."""
        if self.handle is None:
            data = self.file.read(offset, len(buffer))
            buffer[:len(data)] = data
            return len(data)
        descriptor = self.handle.fileno()
        filled = 0
        while filled < len(buffer):
            got = os.preadv(descriptor, [buffer[filled:]], offset + filled)
            if not got:
                break
            filled += got
        with self._counting:  # += is not atomic across threads
            self.file.bytes_read += filled
        return filled

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()

    def __enter__(self) -> SequentialReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
