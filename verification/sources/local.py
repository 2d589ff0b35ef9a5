"""Backups in a local (or mounted) folder."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from io import RawIOBase
from pathlib import Path

from verification.errors import SourceError
from verification.model import IncompleteUpload


class LocalSource:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.exists():
            raise SourceError(f"source {self.root} does not exist")
        if not self.root.is_dir():
            raise SourceError(f"source {self.root} is not a folder")

    def describe(self) -> str:
        return str(self.root)

    def incomplete_uploads(self) -> list[IncompleteUpload]:
        return []  # a folder has no multipart uploads

    def _path(self, path: str) -> Path:
        resolved = (self.root / path).resolve()
        # Names come from repository files; never let one point outside the source.
        if resolved != self.root and self.root not in resolved.parents:
            raise SourceError(f"path {path!r} leaves the source {self.root}")
        return resolved

    def exists(self, path: str) -> bool:
        return self._path(path).exists()

    def is_dir(self, path: str) -> bool:
        return self._path(path).is_dir()

    def list_dir(self, path: str) -> list[str]:
        folder = self._path(path)
        try:
            return sorted(entry.name for entry in folder.iterdir())
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []
        except PermissionError as exc:
            raise SourceError(f"cannot list {folder}: permission denied") from exc

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        file = self._path(path)
        try:
            with file.open("rb") as handle:
                handle.seek(offset)
                return handle.read() if length is None else handle.read(length)
        except FileNotFoundError as exc:
            raise SourceError(f"{file} does not exist") from exc
        except PermissionError as exc:
            raise SourceError(f"cannot read {file}: permission denied") from exc

    def open_binary(self, path: str) -> RawIOBase:
        """The file opened for reading, unbuffered, told it will be read from start to end; the caller
        closes it. One handle for a whole scan keeps the kernel's read-ahead going across reads."""
        file = self._path(path)
        try:
            handle = file.open("rb", buffering=0)
        except FileNotFoundError as exc:
            raise SourceError(f"{file} does not exist") from exc
        except PermissionError as exc:
            raise SourceError(f"cannot read {file}: permission denied") from exc
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        return handle

    def size(self, path: str) -> int:
        return self._path(path).stat().st_size

    def modified(self, path: str) -> datetime | None:
        """When the file was last written (for a WAL archive: about when the segment was archived)."""
        try:
            return datetime.fromtimestamp(self._path(path).stat().st_mtime, UTC)
        except OSError:
            return None
