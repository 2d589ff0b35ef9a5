"""Discover a pgBackRest repository: stanzas, their backups, and the WAL archive.

Reads pgBackRest's own files (backup.info, the archive folders; manifests: manifest.py) through a
`Source`, so discovery needs neither a pgBackRest binary on the host nor a running server, and
object storage can serve the same code. Falls back to the `.copy` twin of an info file, as
pgBackRest itself does.
"""

from __future__ import annotations

import configparser
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import SecretStr

from verification.engines.postgres.cipher import (
    CIPHER,
    UndecryptableError,
    backup_encryption,
    decrypt,
    is_encrypted,
    missing_passphrase,
    wrong_passphrase,
)
from verification.engines.postgres.manifest import read_manifest
from verification.engines.postgres.segment_size import (
    SIZES,
    HeaderRead,
    SegmentSize,
    decide,
    header_size,
    mib,
)
from verification.engines.postgres.wal import SEGMENT_RE, Segment, parse_lsn, parse_segment
from verification.errors import SourceError
from verification.model import BackupSet, BackupType, SystemIdentifier
from verification.sources.base import Source

# 000000010000000000000004-4886679f65586e32c5d5e075c99513323dc736d5.gz
ARCHIVE_FILE_RE = re.compile(r"^(?P<segment>[0-9A-F]{24})-(?P<sha1>[0-9a-f]{40})(?P<ext>\.[a-z0-9]+)?$")
ARCHIVE_ID_RE = re.compile(r"^\d+-\d+$")
HISTORY_RE = re.compile(r"^(?P<tli>[0-9A-F]{8})\.history$")
# Files pgBackRest keeps in the archive beside segments: backup history files (written by
# pg_backup_stop) and partial segments pushed at a promotion.
KNOWN_ARCHIVE_FILE_RE = re.compile(r"^[0-9A-F]{24}(\.[0-9A-F]{8}\.backup|\.partial)(-[0-9a-f]{40})?(\.[a-z0-9]+)?$")
# What pgBackRest itself keeps in a stanza's backup/ folder beside the backups' own folders.
BACKUP_FOLDER_FILES = {"backup.info", "backup.info.copy", "backup.history", "latest"}
ARCHIVE_FOLDER_FILES = {"archive.info", "archive.info.copy"}


class RepositoryFileError(SourceError):
    """A file of the repository that cannot be read; `path` names it (relative to the source)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class TimelineSwitch:
    """One line of a timeline history file: `parent` ended at `switch_lsn`, the next timeline began.
    `reason` is the rest of the line, PostgreSQL's words for why recovery ended there (xlogrecovery.c
    getRecoveryStopReason: "no recovery target specified", "before 2026-11-28 09:30:00.1+00", ...)."""

    parent: int
    switch_lsn: int
    reason: str = ""


@dataclass(frozen=True)
class ArchivedSegment:
    segment: Segment
    file: str  # path relative to the source


@dataclass
class WalArchive:
    """The WAL segments of one archive id (e.g. '15-1'), indexed by segment."""

    archive_id: str
    segment_size: int  # its cluster's, what its segments are named with (1 MiB where unknown: any name reads)
    segments: dict[Segment, ArchivedSegment] = field(default_factory=dict)
    # Timeline -> its ancestry, oldest first, as its 0000000N.history file records it.
    histories: dict[int, list[TimelineSwitch]] = field(default_factory=dict)
    history_files: dict[int, str] = field(default_factory=dict)
    # Files in the archive that are not segments, history or backup history files: (path, why).
    unrecognised: list[tuple[str, str]] = field(default_factory=list)

    def timelines(self) -> set[int]:
        return {s.timeline for s in self.segments} | set(self.histories)


@dataclass
class Stanza:
    name: str
    db_version: str
    system_id: int
    backups: list[BackupSet]
    archives: dict[str, WalArchive]
    info_file: str
    # db-id -> PostgreSQL version, from [db:history]: a stanza-upgrade adds an id (and an archive id).
    db_versions: dict[int, str] = field(default_factory=dict)
    # The cipher its files are encrypted with (told from their content), None when they are plain.
    cipher: str | None = None
    # Encrypted: the key backup.info keeps for the backups' manifests ([cipher] cipher-pass).
    manifest_key: SecretStr | None = field(default=None, repr=False)
    # [db] db-id: the cluster the stanza now backs up.
    db_id: int = 0
    # Archive id -> its cluster's WAL segment size as the repository tells it (segment_size.py): each
    # cluster's segments are named and planned with its own.
    segment_sizes: dict[str, SegmentSize] = field(default_factory=dict)

    def backup(self, label: str) -> BackupSet | None:
        return next((b for b in self.backups if b.label == label), None)

    @property
    def current_archive_id(self) -> str:
        return f"{self.db_versions.get(self.db_id, self.db_version)}-{self.db_id}"

    @property
    def segment_size(self) -> SegmentSize | None:
        """The segment size of the cluster the stanza now backs up."""
        return self.segment_sizes.get(self.current_archive_id)

    def cluster_of(self, backup: BackupSet | None) -> str:
        """The archive id of the backup's cluster; a backup recording no db-id, or none, the current one's."""
        return archive_id_for(self, backup) if backup is not None and backup.db_id is not None \
            else self.current_archive_id


def system_identifier(stanza: Stanza) -> SystemIdentifier | None:
    """The stanza's cluster as backup.info names it ([db] db-system-id, pg_control's system identifier,
    made by initdb): what tells two clusters under one stanza name apart. None where it records none."""
    if not stanza.system_id:
        return None
    return SystemIdentifier(str(stanza.system_id), f"{stanza.info_file} [db] db-system-id")


def read_info_file(source: Source, path: str,
                   passphrase: SecretStr | None = None) -> tuple[configparser.ConfigParser, str]:
    """Parse a pgBackRest info file (INI with JSON values), trying its `.copy` when it is unusable.
    An encrypted one is decrypted with `passphrase` (the repository's, or the sub-passphrase of the
    info file above it); without one it is PassphraseMissingError."""
    errors: list[str] = []
    for candidate in (path, path + ".copy"):
        if not source.exists(candidate):
            errors.append(f"{candidate}: missing")
            continue
        data = source.read_bytes(candidate)
        encrypted = is_encrypted(data)
        try:
            if encrypted:
                if passphrase is None:
                    raise missing_passphrase(f"{source.describe()}/{candidate}")
                data = decrypt(data, passphrase.get_secret_value())
            return parse_info(data.decode("utf-8"), candidate), candidate
        except UndecryptableError as exc:
            errors.append(f"{candidate}: does not decrypt ({exc})")
        except (UnicodeDecodeError, configparser.Error, ValueError) as exc:
            # A decrypted file's own words stay out of the message: its lines hold a sub-passphrase.
            said = f"decrypted, but not an info file ({type(exc).__name__})" if encrypted else str(exc)
            errors.append(f"{candidate}: {said}")
    raise RepositoryFileError(path, f"no usable pgBackRest info file at {source.describe()}/{path}: "
                              + "; ".join(errors))


def parse_info(text: str, name: str) -> configparser.ConfigParser:
    # pgBackRest writes [backrest] twice: its checksum goes in a second one at the end.
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",), strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # labels are case-sensitive
    parser.read_string(text, source=name)
    if not parser.has_section("backrest"):
        raise ValueError("no [backrest] section")
    return parser


def sub_passphrase(parser: configparser.ConfigParser, used: str) -> SecretStr:
    """The passphrase an encrypted info file keeps for the files below it ([cipher] cipher-pass)."""
    try:
        value = json.loads(parser.get("cipher", "cipher-pass"))
    except (configparser.Error, json.JSONDecodeError):
        value = None
    if not isinstance(value, str) or not value:
        raise RepositoryFileError(used, f"{used} is encrypted but keeps no [cipher] cipher-pass for the files below it")
    return SecretStr(value)


def info_files(stanza: str) -> list[str]:
    """The stanza's info files and their copies, each encrypted with the repository's passphrase when any is."""
    return [f"{folder}/{stanza}/{folder}.info{copy}" for folder in ("backup", "archive") for copy in ("", ".copy")]


def stanza_cipher(source: Source, stanza: str, passphrase: SecretStr | None) -> str | None:
    """The cipher of the stanza's info files, told from their content ("Salted__"), not from the
    configuration: None when they are plain. When encrypted, the passphrase is proven first: it
    decrypts one of them into an info file. Neither given nor proven, it is a ConfigError naming the
    file (PassphraseMissingError, WrongPassphraseError): the run stops before any target starts. Two
    info files and their copies must all be damaged for a right passphrase to be taken for a wrong one."""
    present = {path: source.read_bytes(path) for path in info_files(stanza) if source.exists(path)}
    encrypted = {path: data for path, data in present.items() if is_encrypted(data)}
    if not encrypted:
        return None
    if passphrase is None:
        raise missing_passphrase(f"stanza {stanza}: {source.describe()}/{next(iter(encrypted))}")
    for path, data in encrypted.items():
        try:
            parse_info(decrypt(data, passphrase.get_secret_value()).decode("utf-8"), path)
            return CIPHER
        except (UndecryptableError, UnicodeDecodeError, configparser.Error, ValueError):
            continue
    raise wrong_passphrase(list(encrypted), source.describe())


def _json_value(raw: str, where: str, path: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RepositoryFileError(path, f"{where}: value is not valid JSON ({exc})") from exc


def find_stanzas(source: Source) -> list[str]:
    """Stanza names: folders under backup/ that hold a backup.info (or its copy)."""
    if not source.is_dir("backup"):
        raise SourceError(
            f"{source.describe()} is not a pgBackRest repository: it has no backup/ folder "
            "(expected backup/<stanza>/backup.info and archive/<stanza>/)"
        )
    stanzas = [
        name for name in source.list_dir("backup")
        if source.exists(f"backup/{name}/backup.info") or source.exists(f"backup/{name}/backup.info.copy")
    ]
    if not stanzas:
        raise SourceError(
            f"{source.describe()} is not a pgBackRest repository: no backup/<stanza>/backup.info found"
        )
    return stanzas


def _timestamp(value: Any) -> datetime:
    return datetime.fromtimestamp(int(value), tz=UTC)


def _backup_from_info(stanza: str, label: str, data: dict[str, Any], cipher: str | None, info_file: str) -> BackupSet:
    try:
        kind = BackupType(data["backup-type"])
    except (KeyError, ValueError) as exc:
        raise RepositoryFileError(f"backup/{stanza}/backup.info",
                                  f"backup {label} of stanza {stanza}: unknown backup type") from exc
    references = data.get("backup-reference") or []
    return BackupSet(
        database=stanza,
        label=label,
        type=kind,
        start=_timestamp(data["backup-timestamp-start"]),
        finish=_timestamp(data["backup-timestamp-stop"]),
        size_bytes=data.get("backup-info-size"),
        repo_size_bytes=data.get("backup-info-repo-size"),
        references=tuple(references),
        start_wal=data.get("backup-archive-start"),
        stop_wal=data.get("backup-archive-stop"),
        start_lsn=data.get("backup-lsn-start"),
        stop_lsn=data.get("backup-lsn-stop"),
        path=f"backup/{stanza}/{label}",
        error=bool(data.get("backup-error", False)),
        db_id=int(data["db-id"]) if data.get("db-id") is not None else None,
        online=data.get("option-online") if isinstance(data.get("option-online"), bool) else None,
        encryption=backup_encryption(cipher, info_file, manifest_read=False),
        extra={  # pgBackRest's own words, shown, never decided on
            "prior": data.get("backup-prior"),
            "delta_bytes": data.get("backup-info-size-delta"),
            "repo_delta_bytes": data.get("backup-info-repo-size-delta"),
            "compress": data.get("option-compress"),
            "checksum_page": data.get("option-checksum-page"),
            "backrest_version": data.get("backrest-version"),
            "backup_standby": data.get("option-backup-standby"),
        },
    )


def _lsns_from_manifest(source: Source, backup: BackupSet, manifest_key: SecretStr | None) -> BackupSet:
    """The backup with its start and stop LSNs from its manifest: pgBackRest wrote them to backup.info
    only from 2.38 (infoBackup.c), and to every manifest before that. As it was when the manifest does
    not load or says none (the chain names a manifest that does not load)."""
    read = read_manifest(source, backup.path or f"backup/{backup.database}/{backup.label}", backup.label, manifest_key)
    if not read.ok or read.lsn_start is None or read.lsn_stop is None:
        return backup
    return replace(backup, start_lsn=read.lsn_start, stop_lsn=read.lsn_stop)


def read_stanza(source: Source, stanza: str, setting: int, passphrase: SecretStr | None = None) -> Stanza:
    """The stanza's backups and WAL archive; an encrypted stanza's files are decrypted with
    `passphrase` (the repository's) and the sub-passphrases its info files keep. Each cluster's (archive
    id's) WAL segment size is the repository's (segment_size.py); `setting` (postgres.wal_segment_size)
    only where it cannot tell."""
    cipher = stanza_cipher(source, stanza, passphrase)
    parser, used = read_info_file(source, f"backup/{stanza}/backup.info", passphrase if cipher else None)
    backups = [
        _backup_from_info(stanza, label, _json_value(raw, f"{used} [backup:current] {label}", used), cipher, used)
        for label, raw in (parser.items("backup:current") if parser.has_section("backup:current") else [])
    ]
    backups.sort(key=lambda b: (b.finish, b.label))
    if not parser.has_section("db"):
        raise RepositoryFileError(used, f"{used}: no [db] section")
    db = dict(parser.items("db"))
    manifest_key = sub_passphrase(parser, used) if cipher else None
    backups = [b if b.start_lsn is not None or b.error else _lsns_from_manifest(source, b, manifest_key)
               for b in backups]
    history = {
        key: _json_value(raw, f"{used} [db:history] {key}", used)
        for key, raw in (parser.items("db:history") if parser.has_section("db:history") else [])
    }
    # The WAL archive's files are encrypted with archive.info's sub-passphrase: read only if a file needs it.
    archive_key = functools.cache(lambda: sub_passphrase(*read_info_file(source, f"archive/{stanza}/archive.info",
                                                                         passphrase))) if cipher else None
    found = Stanza(
        name=stanza,
        db_version=json.loads(db.get("db-version", '""')),
        system_id=int(db.get("db-system-id", "0")),
        backups=backups,
        archives={},
        info_file=used,
        db_versions={int(db_id): str(entry.get("db-version")) for db_id, entry in history.items()},
        cipher=cipher,
        manifest_key=manifest_key,
        db_id=int(db.get("db-id", "0")),
    )
    archive_ids = sorted(set(_archive_ids(source, stanza, history)) | {found.cluster_of(b) for b in backups})
    for archive_id in archive_ids:
        # Read first with 1 MiB, under which any segment name reads, then named with the cluster's own size.
        archive = read_archive(source, stanza, archive_id, min(SIZES), archive_key)
        size = decide([b for b in backups if found.cluster_of(b) == archive_id], setting,
                      functools.partial(_archived_header, source, stanza, [archive_id], cipher),
                      [s.name(min(SIZES)) for s in archive.segments])
        found.segment_sizes[archive_id] = size
        found.archives[archive_id] = resized(archive, size)
    return found


def _archived_header(source: Source, stanza: str, archive_ids: list[str], cipher: str | None) -> HeaderRead | None:
    """The long page header of the stanza's first archived segment, None when it has none."""
    for archive_id in archive_ids:
        base = f"archive/{stanza}/{archive_id}"
        for folder in sorted(source.list_dir(base)):
            if not re.fullmatch(r"[0-9A-F]{16}", folder) or not source.is_dir(f"{base}/{folder}"):
                continue
            for name in sorted(source.list_dir(f"{base}/{folder}")):
                if (match := ARCHIVE_FILE_RE.match(name)) is None:
                    continue
                path = f"{base}/{folder}/{name}"
                if cipher:
                    return HeaderRead(path, None, "the archive is encrypted (not decrypted for this)")
                return header_size(path, match.group("ext") or "", functools.partial(_first_bytes, source, path))
    return None


def _archive_ids(source: Source, stanza: str, history: dict[str, dict[str, Any]]) -> list[str]:
    # An archive id is "<pg version>-<db id>"; it changes when the stanza is upgraded.
    expected = {f"{entry.get('db-version')}-{db_id}" for db_id, entry in history.items()}
    present = {name for name in source.list_dir(f"archive/{stanza}") if ARCHIVE_ID_RE.match(name)}
    return sorted(expected | present)


def archive_id_for(stanza: Stanza, backup: BackupSet) -> str:
    """The archive id ("<version>-<db id>") of the cluster the backup was taken from."""
    if backup.db_id is None:
        return ""
    return f"{stanza.db_versions.get(backup.db_id, stanza.db_version)}-{backup.db_id}"


def resized(archive: WalArchive, size: SegmentSize) -> WalArchive:
    """The archive read with 1 MiB, its segments named with its cluster's size; where that is unknown
    (the cluster's plans are refused) it stays 1 MiB. A name out of range for a size its cluster's
    backups or an archived header prove is no file that cluster archived: unrecognised, saying why."""
    if size.bytes is None or size.bytes == archive.segment_size:
        return archive
    out = WalArchive(archive.archive_id, size.bytes, histories=archive.histories,
                     history_files=archive.history_files, unrecognised=list(archive.unrecognised))
    for old, archived in archive.segments.items():
        name = old.name(archive.segment_size)
        try:
            segment = parse_segment(name, size.bytes)
        except ValueError:
            out.unrecognised.append((archived.file, (
                f"WAL segment name {name} is out of range for archive {archive.archive_id}, whose cluster's segments "
                f"are {mib(size.bytes)} ({size.detail}): not a segment that cluster archived")))
            continue
        out.segments[segment] = ArchivedSegment(segment, archived.file)
    return out


def _first_bytes(source: Source, path: str, length: int) -> bytes:
    return source.read_bytes(path, 0, min(length, source.size(path)))


def read_archive(source: Source, stanza: str, archive_id: str, segment_size: int,
                 archive_key: Callable[[], SecretStr] | None = None) -> WalArchive:
    """The archive id's segments (by name) and timeline history files (read: decrypted with
    `archive_key()`, archive.info's sub-passphrase, when the repository is encrypted)."""
    archive = WalArchive(archive_id=archive_id, segment_size=segment_size)
    base = f"archive/{stanza}/{archive_id}"
    for entry in source.list_dir(base):
        if history := HISTORY_RE.match(entry):
            timeline = int(history["tli"], 16)
            path = f"{base}/{entry}"
            archive.history_files[timeline] = path
            text = _history_text(source, path, archive_key)
            archive.histories[timeline] = parse_history(text, path)
            continue
        if not (len(entry) == 16 and re.fullmatch(r"[0-9A-F]{16}", entry) and source.is_dir(f"{base}/{entry}")):
            archive.unrecognised.append((f"{base}/{entry}", "not a timeline history file nor a WAL folder"))
            continue
        for name in source.list_dir(f"{base}/{entry}"):
            match = ARCHIVE_FILE_RE.match(name)
            if match and SEGMENT_RE.match(match.group("segment")):
                try:
                    segment = parse_segment(match.group("segment"), segment_size)
                except ValueError as exc:
                    archive.unrecognised.append((f"{base}/{entry}/{name}", str(exc)))
                    continue
                archive.segments[segment] = ArchivedSegment(segment, f"{base}/{entry}/{name}")
            elif not KNOWN_ARCHIVE_FILE_RE.match(name):
                archive.unrecognised.append((f"{base}/{entry}/{name}", "not a WAL segment, backup history or "
                                             "partial file name pgBackRest writes (<segment>-<sha1>[.ext])"))
    return archive


def _history_text(source: Source, path: str, archive_key: Callable[[], SecretStr] | None) -> str:
    data = source.read_bytes(path)
    if archive_key is not None:
        try:
            # The key is archive.info's, proven by archive.info itself: a file it does not open is damaged.
            data = decrypt(data, archive_key().get_secret_value())
        except UndecryptableError as exc:
            raise RepositoryFileError(path, f"timeline history file {path} does not decrypt with the key archive.info "
                                            f"keeps for the archive: damaged or not pgBackRest's ({exc})") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RepositoryFileError(path, f"timeline history file {path} is not text ({exc})") from exc


def parse_history(text: str, name: str) -> list[TimelineSwitch]:
    """'1\t0/E000000\tno recovery target specified' lines -> switches, oldest first."""
    switches = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(None, 2)
        try:
            switches.append(TimelineSwitch(int(fields[0]), parse_lsn(fields[1]),
                                           fields[2].strip() if len(fields) > 2 else ""))
        except (IndexError, ValueError) as exc:
            raise RepositoryFileError(name, f"timeline history file {name}: cannot read line {line!r}") from exc
    return switches


def stanza_names(source: Source) -> list[str]:
    """Every stanza the repository has a folder for, with or without a readable backup.info: a stanza
    whose info files are damaged or gone must still be reported, never vanish."""
    names = {n for n in source.list_dir("backup") if source.is_dir(f"backup/{n}")}
    names |= {n for n in source.list_dir("archive") if source.is_dir(f"archive/{n}")}
    return sorted(names)


def unrecognised_files(source: Source, stanza: Stanza) -> list[tuple[str, str]]:
    """Files of the stanza that discovery did not read as part of the repository: (path, why)."""
    found = [item for archive in stanza.archives.values() for item in archive.unrecognised]
    labels = {b.label for b in stanza.backups}
    for name in source.list_dir(f"backup/{stanza.name}"):
        if name not in BACKUP_FOLDER_FILES and name not in labels:
            found.append((f"backup/{stanza.name}/{name}",
                          "not a backup that backup.info lists (an aborted or expired backup, or a foreign file)"))
    for name in source.list_dir(f"archive/{stanza.name}"):
        if name not in ARCHIVE_FOLDER_FILES and not ARCHIVE_ID_RE.match(name):
            found.append((f"archive/{stanza.name}/{name}", "not an archive id folder nor archive.info"))
    return found


def discover(source: Source, segment_size: int, passphrase: SecretStr | None = None) -> list[Stanza]:
    return [read_stanza(source, name, segment_size, passphrase) for name in find_stanzas(source)]
