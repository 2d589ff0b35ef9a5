"""T-SQL for restoring a planned chain into a Linux SQL Server container.

Backups come from Windows paths; on Linux every file needs WITH MOVE into the container's data
folder. Names and paths are quoted as T-SQL identifiers and Unicode literals, never pasted raw.

A file may hold several backup sets (BACKUP ... WITH NOINIT appends them); every statement about a set
after the first names it, WITH FILE = n (its position, as RESTORE HEADERONLY gives it). The first set is
what RESTORE reads without FILE, so its statements stay as they always were.

Where the backups are read from is the statement's media: files mounted in the container (`FROM DISK`,
the default) or objects SQL Server reads from S3 itself (`FROM URL`, engines/mssql/s3_url.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath, PureWindowsPath
from typing import Protocol

BACKUP_MOUNT = "/backups"
DATA_DIR = "/var/opt/mssql/data"


def ident(name: str) -> str:
    return "[" + name.replace("]", "]]") + "]"


def literal(text: str) -> str:
    return "N'" + text.replace("'", "''") + "'"


def container_path(relative: str) -> str:
    return str(PurePosixPath(BACKUP_MOUNT) / relative)


def disks(relative_paths: list[str]) -> str:
    return ", ".join(f"DISK = {literal(container_path(p))}" for p in relative_paths)


class Media(Protocol):
    """Where RESTORE reads a backup set's files from: its FROM clause, and what it adds to WITH."""

    def devices(self, relative_paths: list[str]) -> str: ...

    @property
    def options(self) -> list[str]: ...


class Disks:
    """The backup files mounted read-only at /backups."""

    def devices(self, relative_paths: list[str]) -> str:
        return disks(relative_paths)

    @property
    def options(self) -> list[str]:
        return []


DISKS = Disks()


@dataclass(frozen=True)
class FileMove:
    logical_name: str
    target: str


@dataclass(frozen=True)
class RestoreOptions:
    buffer_count: int | None = None
    max_transfer_size: int | None = None
    stats: int = 10


def backup_set(position: int | None) -> list[str]:
    """Which backup set of the media RESTORE reads: `FILE = n` for a set appended after the first
    (BACKUP ... WITH NOINIT); nothing for the first, which RESTORE reads by default."""
    return [f"FILE = {int(position)}"] if position is not None and position != 1 else []


def filelist(relative_paths: list[str], media: Media = DISKS, position: int | None = None) -> str:
    return (f"RESTORE FILELISTONLY FROM {media.devices(relative_paths)}" + _with(backup_set(position) + media.options)
            + ";")


def headeronly(relative_paths: list[str], media: Media = DISKS, position: int | None = None) -> str:
    return (f"RESTORE HEADERONLY FROM {media.devices(relative_paths)}" + _with(backup_set(position) + media.options)
            + ";")


def moves_for(database: str, files: list[dict[str, str | None]]) -> list[FileMove]:
    """One MOVE per file of RESTORE FILELISTONLY, into the data folder, keeping each file's name.

    The target name is <database>_<file id>_<logical name><extension of the original file>: the
    file id keeps names apart even when cleaning up characters makes two logical names alike, and a
    reader can still match each file to the source.
    """
    moves: list[FileMove] = []
    for row in files:
        logical = row.get("LogicalName") or ""
        original = PureWindowsPath(row.get("PhysicalName") or "")
        suffix = original.suffix or {"L": ".ldf", "D": ".ndf"}.get(row.get("Type") or "", "")
        file_id = row.get("FileID") or str(len(moves) + 1)
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{database}_{file_id}_{logical}")
        moves.append(FileMove(logical, f"{DATA_DIR}/{safe}{suffix}"))
    return moves


def _with(parts: list[str]) -> str:
    return " WITH " + ", ".join(parts) if parts else ""


def restore_database(database: str, relative_paths: list[str], moves: list[FileMove], options: RestoreOptions,
                     checksum: bool, media: Media = DISKS, position: int | None = None) -> str:
    parts = [*backup_set(position), "NORECOVERY", f"STATS = {options.stats}"]
    if checksum:
        # Only for backups written WITH CHECKSUM: SQL Server refuses it otherwise (error 3187).
        parts.append("CHECKSUM")
    parts += [f"MOVE {literal(m.logical_name)} TO {literal(m.target)}" for m in moves]
    if options.buffer_count:
        parts.append(f"BUFFERCOUNT = {int(options.buffer_count)}")
    if options.max_transfer_size:
        parts.append(f"MAXTRANSFERSIZE = {int(options.max_transfer_size)}")
    return (f"RESTORE DATABASE {ident(database)} FROM {media.devices(relative_paths)}" + _with(parts + media.options)
            + ";")


def restore_log(database: str, relative_paths: list[str], options: RestoreOptions, checksum: bool,
                stop_at: datetime | None = None, media: Media = DISKS, position: int | None = None) -> str:
    parts = [*backup_set(position), "NORECOVERY", f"STATS = {options.stats}"]
    if checksum:
        parts.append("CHECKSUM")
    if stop_at is not None:
        parts.append(f"STOPAT = {literal(stop_at.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3])}")
    if options.buffer_count:
        parts.append(f"BUFFERCOUNT = {int(options.buffer_count)}")
    if options.max_transfer_size:
        parts.append(f"MAXTRANSFERSIZE = {int(options.max_transfer_size)}")
    return f"RESTORE LOG {ident(database)} FROM {media.devices(relative_paths)}" + _with(parts + media.options) + ";"


def recover(database: str) -> str:
    return f"RESTORE DATABASE {ident(database)} WITH RECOVERY;"


def checkdb(database: str, extra_options: list[str]) -> str:
    options = ["NO_INFOMSGS", "ALL_ERRORMSGS", "TABLERESULTS", *extra_options]
    return f"DBCC CHECKDB ({literal(database)}) WITH {', '.join(options)};"


TRACE_ON = "DBCC TRACEON (3004, 3605, -1);"


# -- certificates for encrypted backups and TDE (engines/mssql/certificates.py) -------------------------

MASTER_KEY = "##MS_DatabaseMasterKey##"

# A master key in master protects the certificates' private keys. Its password is made by the server
# itself (NEWID) and never leaves it: nothing needs it again, the key dies with the target.
CREATE_MASTER_KEY = (
    f"USE master; IF NOT EXISTS (SELECT 1 FROM sys.symmetric_keys WHERE name = N'{MASTER_KEY}') BEGIN "
    "DECLARE @password nvarchar(128) = CONCAT(N'Rp#1', CONVERT(nvarchar(36), NEWID()), N'x'); "
    "EXEC (N'CREATE MASTER KEY ENCRYPTION BY PASSWORD = N''' + @password + N''';'); END;")


def certificates_query(names: list[str]) -> str:
    """What the target holds of the certificates made: each one's thumbprint and whether its private key is there."""
    return ("SET NOCOUNT ON; SELECT name, CONVERT(varchar(130), thumbprint, 1) AS thumbprint, pvt_key_encryption_type "
            f"FROM master.sys.certificates WHERE name IN ({', '.join(literal(n) for n in names)});")
