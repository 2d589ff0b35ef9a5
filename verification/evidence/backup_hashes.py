"""SHA-256 of the backup files a restore read, in the format `sha256sum -c` checks.

The hashes are taken through the same `Source` the restore reads, so an auditor can later run
`sha256sum -c backup-files.sha256` in the repository and see that the files are the ones restored.

Where a source serves reads better in parallel (object storage: its `parallel_reads`, s3.threads),
files are hashed that many at once, each by one thread from start to end: a chain's thousand small
WAL and backup objects then cost their requests' latency once per thread, not once per file. The
hashes and their order are the same as one file after the other. The first file that cannot be
hashed stops the others at once: no file not yet started is read, and those being read stop at
their next chunk, so an expired or rewritten object is said in the time of one chunk, not of the
whole chain's reads.

The pipeline hashes alongside the restore (the same files, read-only, and no server needed): `stop`
ends the hashing early when the verification is interrupted, and nothing half-read is written.
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
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


class _Stopped(Exception):
    """A file's hashing stopped because another file could not be hashed (never raised to a caller)."""


@dataclass(frozen=True)
class FileHash:
    """One file's path (relative to its source), size in bytes and SHA-256 (lowercase hex)."""

    path: str
    size: int
    sha256: str


class HashingStopped(SourceError):
    """The hashing was stopped before it was done (the verification was interrupted)."""


def hash_source_file(source: ReadableSource, path: str, chunk_bytes: int = CHUNK_BYTES,
                     stop: threading.Event | None = None, interrupt: threading.Event | None = None) -> FileHash:
    """Read one file of the source to its end and hash it; SourceError names the file when it cannot.
    `stop`, once set (another file could not be hashed), ends the read at the next chunk (after the
    first: a file started is read enough to say whether it can be read at all); `interrupt`, once set
    (the verification was interrupted), ends it at once with HashingStopped."""
    digest = hashlib.sha256()
    size = 0
    try:
        expected = source.size(path)
        while True:
            if interrupt is not None and interrupt.is_set():
                raise HashingStopped(f"hashing of {source.describe()} stopped at {path}: the verification was "
                                     "interrupted")
            if stop is not None and size and stop.is_set():
                raise _Stopped(path)
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
    `parallel_reads`, 1 for a folder). A file that cannot be hashed raises at once, and as one by one
    would: no file is started after it; with several threads, those being read stop at their next
    chunk, and of the files that could not be hashed the first in the order given is named. Once
    `stop` is set (the verification interrupted), HashingStopped is raised."""
    interrupt = stop
    workers = min(threads or int(getattr(source, "parallel_reads", 1) or 1), len(paths))
    if workers <= 1:
        return [hash_source_file(source, path, interrupt=interrupt) for path in paths]
    failed = threading.Event()

    def one(path: str) -> FileHash:
        if failed.is_set():
            raise _Stopped(path)  # taken from the queue after a failure: not read
        try:
            return hash_source_file(source, path, stop=failed, interrupt=interrupt)
        except _Stopped:
            raise
        except BaseException:
            # Set by the thread that failed, before it takes another file: none is started after it.
            failed.set()
            raise

    pool = ThreadPoolExecutor(workers, thread_name_prefix="restoreproof-hash")
    futures: list[Future[FileHash]] = [pool.submit(one, path) for path in paths]
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
    finally:
        failed.set()  # nothing more is read after a failure (or an interrupt); a no-op once all are done
        pool.shutdown(wait=True, cancel_futures=True)
    failures = [error for future in futures if not future.cancelled()
                and (error := future.exception()) is not None and not isinstance(error, _Stopped)]
    if failures:
        raise failures[0]
    return [future.result() for future in futures]


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
