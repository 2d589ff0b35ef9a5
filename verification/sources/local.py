"""Backups in a local (or mounted) folder."""

from __future__ import annotations

import os
import pwd
import time
from datetime import UTC, datetime
from io import RawIOBase
from pathlib import Path

from verification.errors import SourceError, SourcePermissionError
from verification.model import IncompleteUpload
from verification.sources.base import Fingerprint

# A file changed less than this long ago gives no fingerprint (LocalSource.fingerprint).
SETTLED_SECONDS = 60.0


def denied(path: Path, verb: str) -> SourcePermissionError:
    """What a permission refused names: the path, who asked, and the fix. A repository made by its
    tool's defaults is private to that tool's user (pgBackRest's 0750 folders and 0640 files), so the
    user restoreproof runs as is the usual cause."""
    uid = os.geteuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = "no name"
    return SourcePermissionError(
        f"cannot {verb} {path}: permission denied to uid {uid} ({user}); give that user read access to the "
        "repository (its owner's group, or an ACL: setfacl -R -m u:USER:rX), or run restoreproof as the "
        "repository's owner", str(path))


class LocalSource:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.exists():
            raise SourceError(f"source {self.root} does not exist")
        if not self.root.is_dir():
            raise SourceError(f"source {self.root} is not a folder")
        self._root = str(self.root)
        self._inside = self._root.rstrip(os.sep) + os.sep

    def describe(self) -> str:
        return str(self.root)

    def incomplete_uploads(self) -> list[IncompleteUpload]:
        return []  # a folder has no multipart uploads

    def identity(self) -> str:
        return f"file://{self.root}"

    def fingerprint(self, path: str) -> Fingerprint | None:
        """Size, modification and change times (nanoseconds), inode and device, as the backup tools
        that skip unchanged files compare them (borg's and restic's files caches).

        The change time (ctime) is set by the kernel on every write, truncation, rename or utime()
        and cannot be set back from user space, so a rewrite that keeps the size and puts the old
        modification time back (cp -p, rsync -t, a restore from tape) still changes it. What no local
        fingerprint can see is a change made beneath the file system: bits rotting on the medium, a
        write to the raw block device, a network or FUSE file system that does not keep ctime. So it
        is not `reliable`.

        None for a file changed less than SETTLED_SECONDS ago: times have the file system's clock
        tick (a few milliseconds; 2 s on FAT), so a file written again within the tick of a read
        would keep every value (git's "racily clean" entries); a backup still being written is one
        of those too. The margin also covers a file server's clock being a little off ours."""
        try:
            found = self._path(path).stat()
        except OSError:
            return None
        if time.time() - found.st_ctime < SETTLED_SECONDS:
            return None
        return Fingerprint(f"size={found.st_size};mtime={found.st_mtime_ns};ctime={found.st_ctime_ns};"
                           f"ino={found.st_ino};dev={found.st_dev}", reliable=False)

    def _path(self, path: str) -> Path:
        # os.path and a prefix test rather than pathlib's resolve() and `in parents`: the same answer
        # in a third of the time, and this runs several times per file a scan reads.
        resolved = os.path.realpath(os.path.join(self._root, path))
        # Names come from repository files; never let one point outside the source.
        if resolved != self._root and not resolved.startswith(self._inside):
            raise SourceError(f"path {path!r} leaves the source {self.root}")
        return Path(resolved)

    def exists(self, path: str) -> bool:
        file = self._path(path)
        try:
            return file.exists()
        except PermissionError as exc:
            raise denied(file, "reach") from exc

    def is_dir(self, path: str) -> bool:
        file = self._path(path)
        try:
            return file.is_dir()
        except PermissionError as exc:
            raise denied(file, "reach") from exc

    def list_dir(self, path: str) -> list[str]:
        folder = self._path(path)
        try:
            return sorted(entry.name for entry in folder.iterdir())
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []
        except PermissionError as exc:
            raise denied(folder, "list") from exc

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes:
        file = self._path(path)
        try:
            with file.open("rb") as handle:
                handle.seek(offset)
                return handle.read() if length is None else handle.read(length)
        except FileNotFoundError as exc:
            raise SourceError(f"{file} does not exist") from exc
        except PermissionError as exc:
            raise denied(file, "read") from exc

    def open_binary(self, path: str) -> RawIOBase:
        """The file opened for reading, unbuffered, told it will be read from start to end; the caller
        closes it. One handle for a whole scan keeps the kernel's read-ahead going across reads."""
        file = self._path(path)
        try:
            handle = file.open("rb", buffering=0)
        except FileNotFoundError as exc:
            raise SourceError(f"{file} does not exist") from exc
        except PermissionError as exc:
            raise denied(file, "read") from exc
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        return handle

    def size(self, path: str) -> int:
        file = self._path(path)
        try:
            return file.stat().st_size
        except PermissionError as exc:
            raise denied(file, "reach") from exc

    def modified(self, path: str) -> datetime | None:
        """When the file was last written (for a WAL archive: about when the segment was archived)."""
        try:
            return datetime.fromtimestamp(self._path(path).stat().st_mtime, UTC)
        except OSError:
            return None
