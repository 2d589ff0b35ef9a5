"""SHA-256 of the backup files a restore read, in the format `sha256sum -c` checks.

The hashes are taken through the same `Source` the restore reads, so an auditor can later run
`sha256sum -c backup-files.sha256` in the repository and see that the files are the ones restored.

Where a source serves reads better in parallel (object storage: its `parallel_reads`, s3.threads),
files are hashed that many at once, each by one thread from start to end: a chain's thousand small
WAL and backup objects then cost their requests' latency once per thread, not once per file. The
hashes and their order are the same as one file after the other.

The pipeline hashes alongside the restore (the same files, read-only, and no server needed): `stop`
ends the hashing early when the verification is interrupted, and nothing half-read is written.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from verification.errors import SourceError

# Large enough that object storage sees few requests, small enough to keep memory flat.
CHUNK_BYTES = 8 * 1024 * 1024


class ReadableSource(Protocol):
    """The part of `verification.sources.base.Source` hashing needs (every Source has it)."""

    def describe(self) -> str: ...

    def read_bytes(self, path: str, offset: int = 0, length: int | None = None) -> bytes: ...

    def size(self, path: str) -> int: ...


@dataclass(frozen=True)
class FileHash:
    """One file's path (relative to its source), size in bytes and SHA-256 (lowercase hex)."""

    path: str
    size: int
    sha256: str


class HashingStopped(SourceError):
    """The hashing was stopped before it was done (the verification was interrupted)."""


def hash_source_file(source: ReadableSource, path: str, chunk_bytes: int = CHUNK_BYTES,
                     stop: threading.Event | None = None) -> FileHash:
    """Read one file of the source to its end and hash it; SourceError names the file when it cannot."""
    digest = hashlib.sha256()
    size = 0
    try:
        expected = source.size(path)
        while True:
            if stop is not None and stop.is_set():
                raise HashingStopped(f"hashing of {source.describe()} stopped at {path}: the verification was "
                                     "interrupted")
            chunk = source.read_bytes(path, size, chunk_bytes)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
    except HashingStopped:
        raise
    except SourceError as exc:
        raise SourceError(f"cannot hash backup file {path} in {source.describe()}: {exc}") from exc
    except OSError as exc:
        # Sources raise plain OSError from stat() and friends; the message must still name the file.
        reason = exc.strerror or type(exc).__name__
        raise SourceError(f"cannot hash backup file {path} in {source.describe()}: {reason}") from exc
    if size != expected:
        # The file grew or shrank while it was read: the hash would describe no real state of it.
        raise SourceError(f"backup file {path} in {source.describe()} changed while it was hashed "
                          f"({expected} bytes before, {size} bytes read)")
    return FileHash(path=path, size=size, sha256=digest.hexdigest())


def hash_source_files(source: ReadableSource, paths: list[str], threads: int | None = None,
                      stop: threading.Event | None = None) -> list[FileHash]:
    """SHA-256 and size of each file, in the order given; `threads` files at once (default: the source's
    `parallel_reads`, 1 for a folder). A file that cannot be hashed raises as it would one by one:
    the first such file in the order given, and no file after it is started. Once `stop` is set,
    HashingStopped is raised."""
    workers = min(threads or int(getattr(source, "parallel_reads", 1) or 1), len(paths))
    if workers <= 1:
        return [hash_source_file(source, path, stop=stop) for path in paths]
    pool = ThreadPoolExecutor(workers, thread_name_prefix="restoreproof-hash")
    futures: list[Future[FileHash]] = [pool.submit(hash_source_file, source, path, CHUNK_BYTES, stop)
                                       for path in paths]
    try:
        return [future.result() for future in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # after a failure: nothing more is read


def _escape(path: str) -> tuple[str, str]:
    # GNU sha256sum's convention: a name holding a backslash or newline is escaped and its line starts with '\'.
    if "\\" not in path and "\n" not in path and "\r" not in path:
        return "", path
    return "\\", path.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _unescape(text: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        following = next(chars, "")
        replacement = {"\\": "\\", "n": "\n", "r": "\r"}.get(following)
        if replacement is None:
            raise ValueError(f"unknown escape \\{following} in a file name")
        out.append(replacement)
    return "".join(out)


def render_sha256sums(hashes: list[FileHash]) -> str:
    """'<hex>  <path>' lines, as `sha256sum` writes them (text mode, two spaces)."""
    lines = []
    for item in hashes:
        prefix, name = _escape(item.path)
        lines.append(f"{prefix}{item.sha256}  {name}\n")
    return "".join(lines)


def parse_sha256sums(text: str) -> dict[str, str]:
    """path -> SHA-256 (lowercase hex) from `sha256sum` output; ValueError names the bad line.

    Both the text (two spaces) and binary (' *') separators are accepted; blank lines are skipped.
    """
    hashes: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        escaped = line.startswith("\\")
        body = line[1:] if escaped else line
        digest, separator, name = body[:64], body[64:66], body[66:]
        if (len(digest) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digest)
                or separator not in ("  ", " *") or not name):
            raise ValueError(f"line {number} is not '<sha256>  <path>'")
        try:
            path = _unescape(name) if escaped else name
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
        if path in hashes and hashes[path] != digest.lower():
            raise ValueError(f"line {number}: {path} is listed twice with different hashes")
        hashes[path] = digest.lower()
    return hashes
