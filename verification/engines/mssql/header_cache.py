"""What each backup file's header said, kept between runs, so a file is read once while it is unchanged.

A nightly run over a big repository reads the same thousands of headers every night (two GETs per
object in S3, two reads per file in a folder); almost all of them are the same files as the night
before. The cache keeps, per file, what catalog.read_file found (the parsed header, or why the file
is not read as a backup; a file holding several backup sets keeps every set's header), keyed by:

- the source's identity (a folder's path; an S3 endpoint, bucket and prefix) and the file's path;
- its fingerprint (Source.fingerprint: S3's ETag and size; a local file's size, times, inode and
  device), taken before the read and again after it, and kept only when both agree;
- the parser's version: a digest of the code that reads and stores headers (PARSER_VERSION), so an
  entry written by another restoreproof is never trusted; it is read again.

What is kept depends on how far the fingerprint can be trusted. Where it changes whenever the content
does (`reliable`: an ETag), everything is kept, damaged and unreadable files too: a file fixed or
damaged since has another fingerprint. Where it is metadata (a local file), only headers that were
read whole and well are kept; a damaged or stray file is read again every run, so a file repaired in
place without its size or times changing is never hidden behind an old verdict. Missing a change made
beneath the file system (bit rot) costs little for planning: the restore reads every byte and SQL
Server checks them, and the offline page check reads every page of the chain's full and
differential backups through their own headers; `mssql.header_cache: object-store` keeps local
folders out of the cache altogether.

One SQLite file in the state folder holds every source's entries: WAL mode and a busy timeout let
runs share it; each run forgets the entries of files its source no longer has, and sources not
planned for UNUSED_DAYS are forgotten whole. A cache that cannot be opened or written is a warning,
never a failed plan; an entry that does not parse is read again; a file that is not a database (or
a damaged one) is said, removed and made again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from verification import __version__
from verification.config import Settings
from verification.engines.mssql import catalog, encryption, mtf, mtf_config
from verification.engines.mssql.catalog import FileRead, Unreadable
from verification.engines.mssql.mtf import BackupHeader
from verification.sources.base import Fingerprint, Source

log = logging.getLogger(__name__)

CACHE_FILE = "mssql-header-cache.sqlite"
SCHEMA = 1  # the layout of the file's tables (the entries' own layout is in PARSER_VERSION)
PAYLOAD = 2  # the layout of an entry: 2 keeps the headers of every backup set of the file
UNUSED_DAYS = 30.0
BUSY_SECONDS = 10.0
# SQLite's words for a file that is not a database or is damaged: the only errors that remove it.
CORRUPT = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}
TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sources (id INTEGER PRIMARY KEY, identity TEXT NOT NULL UNIQUE, used REAL NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    source INTEGER NOT NULL, path TEXT NOT NULL, fingerprint TEXT NOT NULL, parser TEXT NOT NULL,
    payload TEXT NOT NULL, PRIMARY KEY (source, path)) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class _Stored:
    """An entry's payload: what read_file found, less what belongs to that one read (FileRead's count
    of bytes read and its flags)."""

    headers: list[BackupHeader]
    unreadable: Unreadable | None
    not_backup: bool


_PAYLOAD = TypeAdapter(_Stored)


def _parser_version() -> str:
    """A digest of the code whose output is kept: the MTF reader (with what it says of encryption), the
    catalog's reading of a file, and this module's storing of it. Any change to them is another version."""
    digest = hashlib.sha256(f"schema {SCHEMA} payload {PAYLOAD}".encode())
    for module in (mtf, mtf_config, encryption, catalog):
        try:
            digest.update(Path(str(module.__file__)).read_bytes())
        except (OSError, TypeError):  # no source to read (a frozen install): the release names it
            digest.update(f"{module.__name__} {__version__}".encode())
    try:
        digest.update(Path(__file__).read_bytes())
    except OSError:
        digest.update(f"{__name__} {__version__}".encode())
    return digest.hexdigest()[:20]


PARSER_VERSION = _parser_version()


def encode(result: FileRead) -> str:
    return _PAYLOAD.dump_json(_Stored(result.headers, result.unreadable, result.not_backup)).decode()


def decode(payload: str) -> FileRead | None:
    """The entry as read_file gave it (nothing read this time), or None when it does not parse."""
    try:
        stored = _PAYLOAD.validate_json(payload, strict=True)
    except ValidationError:
        return None
    if not stored.headers and stored.unreadable is None:
        return None  # read_file gives sets, why the file (or its end) is not read, or both
    return FileRead(headers=stored.headers, unreadable=stored.unreadable, not_backup=stored.not_backup, cached=True)


def cache_file(settings: Settings) -> Path:
    return settings.state_dir.expanduser() / CACHE_FILE


class HeaderCache:
    """The cache's entries for one source, for one scan: get() while walking, put() for each file read
    (from any thread), finish() once with every path listed. Inert when off or not to be had."""

    def __init__(self, file: Path | None, source: Source, mode: str = "on") -> None:
        self.file = file
        self.identity = source.identity()
        self.mode = mode
        self._db: sqlite3.Connection | None = None
        self._known: dict[str, tuple[str, str, str]] | None = None  # path -> fingerprint, parser, payload
        self._new: dict[str, tuple[str, str]] = {}  # path -> fingerprint, payload
        self._missed: set[str] = set()
        self._lock = threading.Lock()
        if file is not None and mode != "off":
            self._db = self._open(file)

    @classmethod
    def for_source(cls, settings: Settings, source: Source) -> HeaderCache:
        mode = settings.mssql.header_cache
        return cls(cache_file(settings) if mode != "off" else None, source, mode)

    @property
    def enabled(self) -> bool:
        return self._db is not None

    # -- what scan asks ----------------------------------------------------------------------------

    def get(self, path: str, fingerprint: Fingerprint | None) -> FileRead | None:
        """What the file's header said when it had this fingerprint, from this parser; else None."""
        if not self._accepts(fingerprint):
            return None
        assert fingerprint is not None
        known = self._entries().get(path)
        found = None
        if known is not None and known[0] == fingerprint.value and known[1] == PARSER_VERSION:
            found = decode(known[2])
            if found is None:
                log.warning("header cache %s: the entry of %s in %s does not parse; the file is read again",
                            self.file, path, self.identity)
        if found is None:
            self._missed.add(path)
        return found

    def lookup(self, path: str, fingerprint: Fingerprint | None) -> FileRead | None:
        """One entry by a query of its own, without loading the source's every entry (engine detection
        asks about a file or two)."""
        if self._db is None or not self._accepts(fingerprint):
            return None
        assert fingerprint is not None
        try:
            row = self._db.execute(
                "SELECT e.payload FROM entries e JOIN sources s ON s.id = e.source "
                "WHERE s.identity = ? AND e.path = ? AND e.fingerprint = ? AND e.parser = ?",
                (self.identity, path, fingerprint.value, PARSER_VERSION)).fetchone()
        except sqlite3.Error as exc:
            self._failed(exc, "read")
            return None
        return decode(row[0]) if row else None

    def put(self, path: str, before: Fingerprint | None, result: FileRead, after: Fingerprint | None) -> None:
        """Keep what a read found, if the file did not change during it and the fingerprint can vouch
        for that kind of result (module docstring)."""
        if self._db is None or not self._accepts(before) or before != after or not result.read:
            return
        assert before is not None
        if not before.reliable and (not result.headers or result.unreadable is not None):
            return  # a damaged or stray local file is read again every run, also one with whole sets in it
        payload = encode(result)
        with self._lock:  # scan's reading threads
            self._new[path] = (before.value, payload)

    def finish(self, listed: Iterable[str]) -> None:
        """Write what was read, forget the files no longer listed (and entries found stale and not
        replaced), and the sources unused for UNUSED_DAYS; then close."""
        if self._db is None:
            return
        paths = set(listed)
        gone = [path for path in self._known or {}
                if path not in paths or (path in self._missed and path not in self._new)]
        now = time.time()
        try:
            with _Transaction(self._db) as db:
                db.execute("INSERT INTO sources (identity, used) VALUES (?, ?) "
                           "ON CONFLICT (identity) DO UPDATE SET used = excluded.used", (self.identity, now))
                (source,) = db.execute("SELECT id FROM sources WHERE identity = ?", (self.identity,)).fetchone()
                db.executemany("DELETE FROM entries WHERE source = ? AND path = ?", [(source, path) for path in gone])
                db.executemany("INSERT OR REPLACE INTO entries (source, path, fingerprint, parser, payload) "
                               "VALUES (?, ?, ?, ?, ?)", [(source, path, value, PARSER_VERSION, payload)
                                                          for path, (value, payload) in self._new.items()])
                expired = now - UNUSED_DAYS * 86400
                db.execute("DELETE FROM entries WHERE source IN (SELECT id FROM sources WHERE used < ?)", (expired,))
                db.execute("DELETE FROM sources WHERE used < ?", (expired,))
        except sqlite3.Error as exc:
            self._failed(exc, "written")
        finally:
            self.close()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- plumbing ----------------------------------------------------------------------------------

    def _accepts(self, fingerprint: Fingerprint | None) -> bool:
        return fingerprint is not None and (fingerprint.reliable or self.mode == "on")

    def _entries(self) -> dict[str, tuple[str, str, str]]:
        """Every entry of this source, loaded by one query the first time."""
        if self._known is None:
            self._known = {}
            if self._db is not None:
                try:
                    self._known = {row[0]: (row[1], row[2], row[3]) for row in self._db.execute(
                        "SELECT e.path, e.fingerprint, e.parser, e.payload FROM entries e "
                        "JOIN sources s ON s.id = e.source WHERE s.identity = ?", (self.identity,))}
                except sqlite3.Error as exc:
                    self._failed(exc, "read")
        return self._known

    def _open(self, file: Path) -> sqlite3.Connection | None:
        try:
            return _connect(file)
        except sqlite3.Error as exc:
            if _corrupt(exc):
                return self._remake(file, exc)
            log.warning("header cache %s cannot be used (%s): headers are read from the files", file, exc)
        except OSError as exc:
            log.warning("header cache %s cannot be made (%s): headers are read from the files", file, exc)
        return None

    def _remake(self, file: Path, exc: sqlite3.Error) -> sqlite3.Connection | None:
        """A file that is not a database, or a damaged one: said, removed and made again (empty)."""
        log.warning("header cache %s is not a readable SQLite database (%s): removed and made again; its "
                    "headers are read from the files", file, exc)
        self.close()
        try:
            for leftover in (file, file.with_name(file.name + "-wal"), file.with_name(file.name + "-shm")):
                leftover.unlink(missing_ok=True)
            return _connect(file)
        except (sqlite3.Error, OSError) as again:
            log.warning("header cache %s cannot be made again (%s): headers are read from the files", file, again)
            return None

    def _failed(self, exc: sqlite3.Error, what: str) -> None:
        if _corrupt(exc) and self.file is not None:
            self._db = self._remake(self.file, exc)
            return
        log.warning("header cache %s could not be %s (%s): headers are read from the files", self.file, what, exc)
        self.close()


def _connect(file: Path) -> sqlite3.Connection:
    file.parent.mkdir(parents=True, exist_ok=True)
    # Backup paths and server names: the owner's to read, as the rest of the state folder.
    os.close(os.open(file, os.O_CREAT | os.O_WRONLY, 0o600))
    db = sqlite3.connect(file, timeout=BUSY_SECONDS, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")  # readers never wait for a writer
        db.execute("PRAGMA synchronous = NORMAL")  # a cache: a power cut may lose the last run's entries
        db.executescript(TABLES)
        found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if found is None or found[0] != str(SCHEMA):
            # Another layout (an older or newer restoreproof's): its entries cannot be read here.
            with _Transaction(db):
                db.execute("DROP TABLE IF EXISTS entries")
                db.execute("DROP TABLE IF EXISTS sources")
                for statement in filter(str.strip, TABLES.split(";")):
                    db.execute(statement)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
    except BaseException:
        db.close()
        raise
    return db


class _Transaction:
    """BEGIN IMMEDIATE (the write lock taken at once, waited for up to the busy timeout) ... COMMIT."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: type[BaseException] | None, *_: Any) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


def _corrupt(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorname", "") in CORRUPT
