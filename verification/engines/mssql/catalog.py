"""Catalog a tree of SQL Server backup files by their headers alone.

Any layout (flat, Ola Hallengren's <server>/<db>/FULL|DIFF|LOG, anything else) and any file
extension: every file is opened and its header decides what it is. File names and the dates in
them are never trusted. A file holds one backup set or several (BACKUP ... WITH NOINIT appends them:
each has its position, RESTORE ... WITH FILE = n). Sets are grouped by media set and position (one
file per family: the families of a striped set share both), and sets into databases by (server,
database name, creation date). What a file's header said may come from a header cache
(header_cache.py) instead, while the file's fingerprint is unchanged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from verification.engines.mssql.mtf import (
    COMPRESSED_MAGIC,
    BackupHeader,
    MediaRead,
    MtfError,
    MtfUnsupported,
    NeedsServerHeaderOnly,
    TrailerIdentity,
    read_media,
    read_trailer_identity,
)
from verification.errors import ArchivedObjectError, SourcePermissionError
from verification.model import SystemIdentifier, set_name
from verification.sources.base import Fingerprint, Source, SourceFile, excluded

if TYPE_CHECKING:
    from verification.engines.mssql.header_cache import HeaderCache

log = logging.getLogger(__name__)

MAX_DEPTH = 12
# Where a file is taken to be a backup whatever its first bytes say: the extensions SQL Server shops
# (and Ola Hallengren's DatabaseBackup) give backups, and the folders that solution puts them in.
# A file there that is not a readable backup is a damaged backup, never an ignorable stray.
BACKUP_EXTENSIONS = (".bak", ".trn", ".dif", ".diff", ".bck")
BACKUP_FOLDERS = {"FULL", "DIFF", "LOG", "FULL_COPY_ONLY", "LOG_COPY_ONLY"}
FIRST_BYTES = 16


def looks_like_backup(path: str) -> bool:
    parts = path.split("/")
    return path.lower().endswith(BACKUP_EXTENSIONS) or any(p.upper() in BACKUP_FOLDERS for p in parts[:-1])


def describe_bytes(data: bytes) -> str:
    """First bytes as hex and as text, so a reader can tell a zip, a text file or zeros at a glance."""
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in data)
    return f"{data.hex(' ')} ({text!r})" if data else "nothing (an empty file)"


def shares_file(header: BackupHeader) -> bool:
    """Whether the set's file holds other backup sets too: a set after the first, or one ending before
    the file does (a header made without its range, set_end 0, tells by its position alone).
    A file of one set ends where its set does, the zero padding of a large soft filemark included."""
    return header.position > 1 or 0 < header.set_end < header.size_bytes


def header_name(header: BackupHeader) -> str:
    """The set's file as a person is told it (model.set_name): "a.bak", or "a.bak (set 2)" where the
    file holds several sets. Paths in structured fields stay paths."""
    return set_name(header.path, header.position, shares_file(header))


@dataclass
class MediaSet:
    """One backup set: the files (families) of one media set, at one position on it."""

    media_set_guid: str
    family_count: int
    families: dict[int, BackupHeader] = field(default_factory=dict)
    # Further files holding a family already read (a copy of the same backup): never restored, but
    # their pages are verified like any backup's where every backup is asked for.
    copy_headers: list[BackupHeader] = field(default_factory=list)

    @property
    def copies(self) -> list[str]:
        return [header.path for header in self.copy_headers]

    @property
    def header(self) -> BackupHeader:
        return self.families[min(self.families)]

    @property
    def missing_families(self) -> list[int]:
        return [n for n in range(1, self.family_count + 1) if n not in self.families]

    @property
    def complete(self) -> bool:
        return not self.missing_families

    @property
    def files(self) -> list[str]:
        return [self.families[n].path for n in sorted(self.families)]

    @property
    def names(self) -> list[str]:
        """Its files as messages name them (header_name): with the set's position where a file holds several."""
        return [header_name(self.families[n]) for n in sorted(self.families)]

    @property
    def copy_names(self) -> list[str]:
        return [header_name(header) for header in self.copy_headers]

    @property
    def finish(self) -> datetime:
        header = self.header
        return as_utc(header.backup_finish or header.backup_start)

    @property
    def start(self) -> datetime:
        return as_utc(self.header.backup_start)

    def describe(self) -> str:
        h = self.header
        return f"{h.backup_type} backup of {h.database_name} ({', '.join(self.names)})"


def as_utc(value: datetime | None) -> datetime:
    # SQL Server writes local server time with no zone; restoreproof reads it as UTC.
    if value is None:
        return datetime.min.replace(tzinfo=UTC)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


@dataclass
class DatabaseCatalog:
    server: str
    database: str
    # A database dropped and created again under the same name has unrelated LSNs: another catalog.
    created: datetime | None = None
    sets: list[MediaSet] = field(default_factory=list)

    def of_type(self, kind: str) -> list[MediaSet]:
        return [s for s in self.sets if s.header.backup_type == kind]


@dataclass
class Unreadable:
    path: str
    reason: str
    # "needs-server": natively compressed, readable only by RESTORE HEADERONLY in a target.
    # "corrupt": a backup (by its first bytes, extension or folder) that is truncated or damaged.
    # "unsupported": a backup laid out in a way the reader does not know: no proof of damage.
    # "not-a-backup": any other file, named with its first bytes; "excluded": matched a pattern.
    # "archived": an object in an archive storage class, not restored: never read.
    kind: str
    # Whose backup it was, when the trailer of a damaged file could still be read.
    identity: TrailerIdentity | None = None


@dataclass
class Catalog:
    databases: list[DatabaseCatalog]
    unreadable: list[Unreadable]
    not_backups: list[str]
    bytes_read: int = 0
    files_read: int = 0
    # Files whose header came from the header cache (nothing read of them).
    files_cached: int = 0

    def display_name(self, db: DatabaseCatalog) -> str:
        """The database name, qualified by server and then creation date only where needed to be unique."""
        same_name = [d for d in self.databases if d.database == db.database]
        if len(same_name) == 1:
            return db.database
        name = db.database
        if len({d.server for d in same_name}) > 1:
            name = f"{db.server}/{name}"
        if sum(1 for d in same_name if d.server == db.server) > 1:
            name += f" (created {db.created:%Y-%m-%d %H:%M:%S})" if db.created else " (creation unknown)"
        return name


def system_identifier(db: DatabaseCatalog) -> SystemIdentifier | None:
    """The database as its backups' headers name it: the FamilyGUID all its backup sets share (kept by
    a database for its life, across restores); else, where they disagree or none carries one, the
    server, name and creation date the catalog groups them by. None where not even those are known."""
    guids = {m.header.family_guid for m in db.sets if m.header.family_guid}
    if len(guids) == 1:
        return SystemIdentifier(guids.pop(), "FamilyGUID of its backup headers")
    if db.created is None:
        return None
    return SystemIdentifier(f"{db.server}/{db.database} created {db.created.isoformat()}",
                            "server name, database name and creation date of its backup headers")


def walk(source: Source, folder: str = "", depth: int = 0, exclude: Sequence[str] = (),
         denied: list[Unreadable] | None = None) -> list[str]:
    """Every file under `folder`. A folder below the source's own that this user may not enter (a
    mount's lost+found, another team's folder) is put in `denied`, never the end of the walk: it may
    hold backups, so it keeps the run from passing, and the databases beside it are still judged;
    excluded (its path matching a pattern), it is said as such and has no effect."""
    paths: list[str] = []
    for name in source.list_dir(folder):
        path = f"{folder}/{name}" if folder else name
        try:
            if not source.is_dir(path):
                paths.append(path)
            elif depth < MAX_DEPTH:
                paths.extend(walk(source, path, depth + 1, exclude, denied))
        except SourcePermissionError as exc:
            if denied is not None:
                denied.append(_not_entered(path, exc, exclude))
    return paths


def _not_entered(path: str, exc: SourcePermissionError, exclude: Sequence[str]) -> Unreadable:
    if (pattern := excluded(path, exclude) or excluded(f"{path}/", exclude)) is not None:
        return Unreadable(path, f"folder {path} (not readable by this user) excluded by the pattern {pattern!r}",
                          "excluded")
    return Unreadable(path, f"{exc}; or, if it holds no backups, exclude it (exclude: ['{path}'])", "permission")


@dataclass
class FileRead:
    """What reading one file found: the header of each backup set it holds (position order), or why
    it is not read as a backup."""

    headers: list[BackupHeader] = field(default_factory=list)
    unreadable: Unreadable | None = None
    not_backup: bool = False
    bytes_read: int = 0
    read: bool = True
    cached: bool = False  # taken from the header cache, not from the file


def read_file(source: Source, path: str) -> FileRead:
    """What one file's header says (its head and trailer read; the trailer alone where the head is
    not a backup's, to tell a damaged backup from a stray file)."""
    reader = SourceFile(source, path)
    try:
        magic = reader.read(0, FIRST_BYTES)
    except ArchivedObjectError as exc:  # exists, and nothing can read it until it is restored
        return FileRead(unreadable=Unreadable(path, str(exc), "archived"), read=False)
    except SourcePermissionError as exc:  # an operator's fix: never read, never a sign of damage
        return FileRead(unreadable=Unreadable(path, str(exc), "permission"), read=False)
    if not (magic.startswith(b"TAPE") or magic.startswith(COMPRESSED_MAGIC)):
        found = describe_bytes(magic)
        # Names are not trusted: a file whose trailer still holds a backup set's closing copy is a
        # damaged backup whatever its extension or folder.
        identity = read_trailer_identity(reader)
        if looks_like_backup(path) or identity is not None:
            reason = (f"{path}: media header at offset 0x0: expected 'TAPE' (Microsoft Tape Format) or "
                      f"'MSSQLBAK' (natively compressed), found {found}: a damaged backup file")
            return FileRead(unreadable=Unreadable(path, reason, "corrupt", identity), bytes_read=reader.bytes_read)
        return FileRead(unreadable=Unreadable(path, f"{path}: not a SQL Server backup: starts with {found}",
                                              "not-a-backup"), not_backup=True, bytes_read=reader.bytes_read)
    try:
        media = read_media(reader)
    except NeedsServerHeaderOnly as exc:
        return FileRead(unreadable=Unreadable(path, str(exc), "needs-server"), bytes_read=reader.bytes_read)
    except MtfError as exc:
        media = MediaRead([], exc)
    if media.problem is None:
        return FileRead(headers=media.headers, bytes_read=reader.bytes_read)
    # Whose backup the part not read was: the head of the set it lies in (never another set's closing
    # copy: a set cut in its head would take the identity of the whole set before it), else, where no
    # set begins, the file's last closing copy.
    identity = media.identity if media.set_number is not None else read_trailer_identity(reader)
    # A layout not known is no proof of damage; the sets before the problem are read all the same.
    kind = "unsupported" if isinstance(media.problem, MtfUnsupported) else "corrupt"
    return FileRead(headers=media.headers, unreadable=Unreadable(path, str(media.problem), kind, identity),
                    bytes_read=reader.bytes_read)


def scan(source: Source, exclude: list[str] | None = None, cache: HeaderCache | None = None) -> Catalog:
    """Every file is read, or listed with what it is and why: none is skipped in silence.

    With a `cache`, a file whose fingerprint the cache holds a header for is not read; every file
    read is offered to the cache, which then forgets the files no longer in the source.
    A source that serves reads better in parallel (object storage: `parallel_reads`) has its files'
    headers read by that many threads; the results are taken in the walk's order all the same."""
    denied: list[Unreadable] = []
    paths = walk(source, exclude=exclude or [], denied=denied)
    results: dict[str, FileRead] = {}
    before: dict[str, Fingerprint | None] = {}
    for path in paths:
        if pattern := excluded(path, exclude or []):
            results[path] = FileRead(unreadable=Unreadable(path, f"excluded by the pattern {pattern!r}", "excluded"),
                                     read=False)
        elif cache is not None:
            before[path] = source.fingerprint(path)
            if (known := cache.get(path, before[path])) is not None:
                results[path] = known
    wanted = [path for path in paths if path not in results]

    def read(path: str) -> FileRead:
        result = read_file(source, path)
        if cache is not None and (result.unreadable is None or result.unreadable.kind != "permission"):
            # Kept only if the file did not change while it was read (same fingerprint after as before).
            cache.put(path, before[path], result, source.fingerprint(path))
        return result

    threads = int(getattr(source, "parallel_reads", 1))
    if threads > 1 and len(wanted) > 1:
        with ThreadPoolExecutor(min(threads, len(wanted)), thread_name_prefix="restoreproof-headers") as pool:
            results.update(zip(wanted, pool.map(read, wanted), strict=True))
    else:
        results.update((path, read(path)) for path in wanted)
    if cache is not None:
        cache.finish(paths)
    headers: list[BackupHeader] = []
    unreadable: list[Unreadable] = list(denied)
    not_backups: list[str] = []
    bytes_read = files_read = files_cached = 0
    for path in paths:
        result = results[path]
        headers.extend(result.headers)
        if result.unreadable is not None:
            unreadable.append(result.unreadable)
            if result.not_backup:
                not_backups.append(result.unreadable.path)
        files_read += result.read and not result.cached
        files_cached += result.cached
        bytes_read += result.bytes_read
    if cache is not None:
        log.info("%s: headers of %d file(s) from the header cache, %d read (%d bytes)", source.describe(),
                 files_cached, files_read, bytes_read)
    return Catalog(group(headers), unreadable, not_backups, bytes_read, files_read, files_cached)


# SQL Server Express LocalDB names its instance's pipe anew each time the instance starts
# (<machine>\LOCALDB#<8 hex digits>), and backups record that name: one database's backups would
# otherwise read as many databases.
LOCALDB_INSTANCE = re.compile(r"^(?P<machine>.*\\LOCALDB)#[0-9A-F]{8}$", re.IGNORECASE)


def server_identity(server_name: str) -> str:
    """The server a backup's header names, as it stays across restarts (LOCALDB_INSTANCE)."""
    match = LOCALDB_INSTANCE.match(server_name)
    return match["machine"] if match else server_name


def group(headers: list[BackupHeader]) -> list[DatabaseCatalog]:
    sets: dict[tuple[str, int, str, int, int, str], MediaSet] = {}
    for header in headers:
        # A media set GUID names the stripe set and the position the backup set on it (the families
        # of one striped set share both); the LSNs and type are held to agree as well.
        key = (header.media_set_guid, header.position, header.backup_type, header.first_lsn, header.last_lsn,
               str(header.backup_start))
        media = sets.setdefault(key, MediaSet(header.media_set_guid, header.family_count))
        if header.family_number in media.families:
            media.copy_headers.append(header)
        else:
            media.families[header.family_number] = header
    by_database: dict[tuple[str, str, datetime | None], DatabaseCatalog] = {}
    for media in sets.values():
        h = media.header
        identity = (server_identity(h.server_name), h.database_name, h.database_creation)
        db = by_database.setdefault(identity, DatabaseCatalog(identity[0], h.database_name, h.database_creation))
        db.sets.append(media)
    for db in by_database.values():
        db.sets.sort(key=lambda s: (s.header.last_lsn, s.header.first_lsn))
    return sorted(by_database.values(),
                  key=lambda d: (d.database.lower(), d.server.lower(), d.created or datetime.min))
