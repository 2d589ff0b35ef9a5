"""Catalog a tree of SQL Server backup files by their headers alone.

Any layout (flat, Ola Hallengren's <server>/<db>/FULL|DIFF|LOG, anything else) and any file
extension: every file is opened and its header decides what it is. File names and the dates in
them are never trusted. Files are grouped into backup sets by media set (one file per family),
and sets into databases by (server, database name, creation date).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from verification.engines.mssql.mtf import (
    COMPRESSED_MAGIC,
    BackupHeader,
    MtfError,
    NeedsServerHeaderOnly,
    read_backup_header,
)
from verification.sources.base import Source, SourceFile

MAX_DEPTH = 12


@dataclass
class MediaSet:
    """One backup set: the files (families) of one media set."""

    media_set_guid: str
    family_count: int
    families: dict[int, BackupHeader] = field(default_factory=dict)

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
    def finish(self) -> datetime:
        header = self.header
        return as_utc(header.backup_finish or header.backup_start)

    @property
    def start(self) -> datetime:
        return as_utc(self.header.backup_start)

    def describe(self) -> str:
        h = self.header
        return f"{h.backup_type} backup of {h.database_name} ({', '.join(self.files)})"


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
    # "corrupt": starts like a backup but is truncated or damaged.
    kind: str


@dataclass
class Catalog:
    databases: list[DatabaseCatalog]
    unreadable: list[Unreadable]
    not_backups: list[str]
    bytes_read: int = 0
    files_read: int = 0

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


def walk(source: Source, folder: str = "", depth: int = 0) -> list[str]:
    paths: list[str] = []
    for name in source.list_dir(folder):
        path = f"{folder}/{name}" if folder else name
        if source.is_dir(path):
            if depth < MAX_DEPTH:
                paths.extend(walk(source, path, depth + 1))
        else:
            paths.append(path)
    return paths


def scan(source: Source) -> Catalog:
    headers: list[BackupHeader] = []
    unreadable: list[Unreadable] = []
    not_backups: list[str] = []
    bytes_read = files_read = 0
    for path in walk(source):
        reader = SourceFile(source, path)
        magic = reader.read(0, 8)
        if not (magic.startswith(b"TAPE") or magic == COMPRESSED_MAGIC):
            not_backups.append(path)
            continue
        try:
            headers.append(read_backup_header(reader))
        except NeedsServerHeaderOnly as exc:
            unreadable.append(Unreadable(path, str(exc), "needs-server"))
        except MtfError as exc:
            unreadable.append(Unreadable(path, str(exc), "corrupt"))
        files_read += 1
        bytes_read += reader.bytes_read
    return Catalog(group(headers), unreadable, not_backups, bytes_read, files_read)


def group(headers: list[BackupHeader]) -> list[DatabaseCatalog]:
    sets: dict[tuple[str, str, int, int, str], MediaSet] = {}
    for header in headers:
        # A media set GUID names the stripe set; the LSNs and type tell apart the backup sets
        # appended to one media set.
        key = (header.media_set_guid, header.backup_type, header.first_lsn, header.last_lsn,
               str(header.backup_start))
        media = sets.setdefault(key, MediaSet(header.media_set_guid, header.family_count))
        media.families.setdefault(header.family_number, header)
    by_database: dict[tuple[str, str, datetime | None], DatabaseCatalog] = {}
    for media in sets.values():
        h = media.header
        identity = (h.server_name, h.database_name, h.database_creation)
        db = by_database.setdefault(identity, DatabaseCatalog(h.server_name, h.database_name, h.database_creation))
        db.sets.append(media)
    for db in by_database.values():
        db.sets.sort(key=lambda s: (s.header.last_lsn, s.header.first_lsn))
    return sorted(by_database.values(),
                  key=lambda d: (d.database.lower(), d.server.lower(), d.created or datetime.min))
