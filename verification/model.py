"""Domain types shared by every engine, target, store and report.

Engines translate what their tools say into these types; everything downstream (verdict, store,
reports) only ever sees these. Times are timezone-aware UTC datetimes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import ConfigDict

# The frozen value types below appear in report.json as they are (report_model): pydantic reads them
# with this configuration, so an unknown field in a stored report is refused, not dropped.
_REPORTED = ConfigDict(extra="forbid")


class BackupType(StrEnum):
    FULL = "full"
    DIFF = "diff"
    INCR = "incr"
    LOG = "log"


class ChainStatus(StrEnum):
    COMPLETE = "complete"
    BROKEN = "broken"
    # The backups may be sound, but what was asked of them (a point after the archive's end, a point
    # in time after an offline backup) they cannot serve: nothing is restored, and the verdict is
    # "error" naming what can be asked instead, never "failed".
    REFUSED = "refused"


class Verdict(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"


class CheckStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"


class PhaseName(StrEnum):
    """Every phase a verification times, in pipeline order."""

    # Object storage: the plan's files staged into a local folder before the target starts
    # (absent for a folder, which the target reads in place).
    DOWNLOAD = "download"
    PROVISION = "provision"
    ZEROING = "zeroing"
    TRANSFER = "transfer"
    LOG_RESTORE = "log_restore"
    SERVER_START = "server_start"
    REDO = "redo"
    RECOVERY_END = "recovery_end"
    LOG_ZERO_WAIT = "log_zero_wait"
    DATA_CHECKS = "data_checks"
    INTEGRITY_CHECK = "integrity_check"
    REPOSITORY_VERIFY = "repository_verify"


class CheckName(StrEnum):
    """The built-in checks; a user's data check is named "data:<suite>" (a deprecated SQL check,
    "sql:<its name>")."""

    PG_AMCHECK = "pg_amcheck"
    # The amcheck extension's functions called over SQL, on a major with no pg_amcheck program (13).
    AMCHECK = "amcheck"
    PG_CHECKSUMS = "pg_checksums"
    PGBACKREST_VERIFY = "pgbackrest_verify"
    DBCC_CHECKDB = "dbcc_checkdb"
    BACKUP_HASHES = "backup_hashes"
    PAGE_VERIFICATION = "page_verification"
    DATA_BASELINE = "data_baseline"
    DATA_FRESHNESS = "data_freshness"


class CheckKind(StrEnum):
    """What a check looked at. Only a check of the restored database can prove the data intact; a
    check of the backup files themselves (read without a server) can fail a database, never pass it."""

    RESTORED = "restored"
    BACKUP_FILES = "backup_files"
    # What the restored data holds (Great Expectations): can fail a database, and proves nothing
    # about the pages being sound, so it never stands in for an integrity check either.
    DATA = "data"


class PhaseStatus(StrEnum):
    MEASURED = "measured"
    # The engine has no such phase (file zeroing on PostgreSQL): recorded, never as zero seconds.
    ABSENT = "absent"
    # The phase should have happened but did not (an earlier step failed).
    NOT_REACHED = "not_reached"


@dataclass(frozen=True)
class BackupFile:
    """One database file a backup restores (RESTORE FILELISTONLY): what a restore must allocate."""

    logical_name: str
    type: str | None  # D data, L log; None where the backup's code for it is not known
    size_bytes: int  # allocated, as the source had it: the restore creates (and may zero) this much
    file_id: int | None = None
    filegroup: str | None = None
    physical_name: str | None = None


class EncryptionState(StrEnum):
    ENCRYPTED = "encrypted"
    NOT_ENCRYPTED = "not_encrypted"
    # Nothing read so far tells: never taken for "not encrypted".
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class BackupEncryption:
    """Whether a backup's content is encrypted, with what, what a target needs to read it, and how that
    is known (`basis`: the header read offline, the server's own answer, or why neither can tell).

    Two independent kinds exist in SQL Server: the backup's own encryption (BACKUP ... WITH ENCRYPTION:
    an algorithm and an encryptor, a certificate or an asymmetric key, named by its thumbprint) and the
    database's (TDE: pages encrypted by a key that a certificate protects). Thumbprints are written as
    SQL Server prints them: "0x" and upper-case hex."""

    __pydantic_config__ = _REPORTED

    state: EncryptionState
    basis: str
    algorithm: str | None = None  # KeyAlgorithm (AES_256, ...), a repository's cipher type
    encryptor_type: str | None = None  # CERTIFICATE or ASYMMETRIC KEY
    encryptor_thumbprint: str | None = None
    tde_thumbprint: str | None = None  # the certificate protecting a TDE database's encryption key

    @property
    def thumbprints(self) -> tuple[str, ...]:
        """What a target must hold to read this backup: each encryptor's thumbprint, once."""
        return tuple(dict.fromkeys(t for t in (self.encryptor_thumbprint, self.tde_thumbprint) if t))


def set_name(path: str, position: int | None, shares_file: bool) -> str:
    """How a person is told which backup set of a file is meant: where the file holds several sets
    (SQL Server's BACKUP ... WITH NOINIT appends them; RESTORE ... WITH FILE = n takes one), "<path>
    (set n)", n its position, the first too (a bare path would read as the whole file); a file of one set
    is its path alone."""
    return f"{path} (set {position or 1})" if shares_file else path


@dataclass(frozen=True)
class BackupSet:
    """One backup as the repository describes it (a pgBackRest backup, a SQL Server backup set)."""

    database: str
    label: str
    type: BackupType
    start: datetime
    finish: datetime
    size_bytes: int | None = None
    repo_size_bytes: int | None = None
    # Labels of the backups this one needs (its full, its differential base, ...), oldest first.
    references: tuple[str, ...] = ()
    start_wal: str | None = None
    stop_wal: str | None = None
    start_lsn: str | None = None
    stop_lsn: str | None = None
    path: str | None = None
    error: bool = False
    # pgBackRest: the cluster's id in backup.info's history (names its WAL archive "<version>-<id>").
    db_id: int | None = None
    # SQL Server: LSNs as decimal strings (they exceed 2**53), and this file's family as "k/n".
    first_lsn: str | None = None
    last_lsn: str | None = None
    family: str | None = None
    checkpoint_lsn: str | None = None
    database_backup_lsn: str | None = None  # a differential's base: its full's CheckpointLSN
    media_set_guid: str | None = None  # the files (families) of one backup set share it
    database_version: int | None = None  # the on-disk version: which SQL Server can restore it
    software_version: str | None = None  # the SQL Server that wrote it, "major.minor"
    server: str | None = None
    has_checksums: bool | None = None  # taken WITH CHECKSUM: RESTORE ... WITH CHECKSUM verifies them
    # SQL Server, from the whole header (None: not known, never "no"). GUIDs as lower-case strings.
    recovery_model: str | None = None  # FULL, BULK_LOGGED, SIMPLE
    copy_only: bool | None = None
    backup_set_guid: str | None = None
    differential_base_lsn: str | None = None
    differential_base_guid: str | None = None  # a differential's base: its full's backup_set_guid
    recovery_fork_guid: str | None = None
    fork_point_lsn: str | None = None  # where recovery_fork_guid branched off parent_fork_guid
    parent_fork_guid: str | None = None
    begins_log_chain: bool | None = None
    # pgBackRest: taken while the server ran (True: it needs its WAL to be consistent), or with the
    # server stopped (False: consistent by itself, restored to its own point); None: not said.
    online: bool | None = None
    bulk_logged: bool | None = None  # HasBulkLoggedData
    damaged: bool | None = None  # IsDamaged: written WITH CONTINUE_AFTER_ERROR
    compatibility_level: int | None = None
    collation: str | None = None
    database_files: tuple[BackupFile, ...] = ()
    # None: the engine says nothing about it (not "not encrypted").
    encryption: BackupEncryption | None = None
    # SQL Server: the set's position in its file (HEADERONLY's Position, RESTORE ... WITH FILE = n), the
    # server version that wrote it ("SQL Server 13.0.4001 (SQL Server 2016)"), and whether real samples
    # prove the layout that version writes (None: not said).
    position: int | None = None
    writer: str | None = None
    layout_proven: bool | None = None
    # SQL Server: where the set begins in its file (its SSET block), so that its pages are found without
    # reading the file's headers again; None: not known.
    set_offset: int | None = None
    # SQL Server: whether its file holds other backup sets besides this one (`name` says which set then).
    shares_file: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        """The backup as messages and the console name it: its label, with its set where its file holds
        several (set_name); the report's label and path fields stay as they are."""
        return set_name(self.label, self.position, self.shares_file)


@dataclass(frozen=True)
class Problem:
    """Something that stops a chain from restoring, named precisely."""

    __pydantic_config__ = _REPORTED

    code: str
    message: str
    files: tuple[str, ...] = ()
    expected_lsn: str | None = None
    found_lsn: str | None = None


# The chain rule an engine records when the point asked for cannot be restored exactly and the
# plan stops at the newest point before it (SQL Server's SIMPLE recovery: the end of a backup).
POINT_ROUNDED_RULE = "point-in-time-rounded"


@dataclass(frozen=True)
class RuleCheck:
    """One chain rule that was checked, with its outcome, kept for the evidence."""

    __pydantic_config__ = _REPORTED

    rule: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class OverriddenSetting:
    """A setting the backup gave a value restoreproof does not let the restored server keep (one that
    could hide damage, blind the log or the tools, or move recovery off the plan)."""

    __pydantic_config__ = _REPORTED

    name: str
    # The backup's value ("(set, not shown)" for a connection string, secrets of a command masked).
    backup_value: str
    forced_value: str
    # Where the backup set it: "postgresql.conf:812" (file and line, relative to the data folder), or
    # "ALTER ROLE \"app\" SET (pg_db_role_setting)".
    source: str
    # Why restoreproof forces it.
    why: str


@dataclass(frozen=True)
class WalRange:
    __pydantic_config__ = _REPORTED

    timeline: int
    first: str
    last: str
    segments: int
    # Why the range ends where it does ("end of archive", "start of the next backup", ...).
    bound: str
    # The timelines that supply the range, oldest first, each with the first segment number it supplies
    # (from the history file); empty: the whole range is on `timeline`.
    timelines: tuple[tuple[int, int], ...] = ()
    # The size of each segment (the cluster's, as its backups tell it); None: not known.
    segment_bytes: int | None = None


@dataclass(frozen=True)
class TimelineFork:
    """One timeline of a WAL archive: where it forked from its parent, and whether the restore replays it."""

    __pydantic_config__ = _REPORTED

    timeline: int
    # None: a timeline with no history file (the cluster's first).
    parent: int | None
    fork_lsn: str | None
    # The time of the fork when something proves it (the history file's reason naming the commit time
    # recovery stopped at); None when not known: `fork_time_basis` says what is known instead.
    fork_time: datetime | None
    fork_time_basis: str
    restored: bool


@dataclass
class Chain:
    status: ChainStatus
    backups: list[BackupSet]
    problems: list[Problem] = field(default_factory=list)
    rules: list[RuleCheck] = field(default_factory=list)
    wal: WalRange | None = None
    # What is wrong with this database's backups without stopping the planned chain from restoring:
    # a newer backup flagged in error, incomplete or on another base, a backup file that cannot be
    # read. The older chain is still restored (it proves what can be recovered), but the database
    # cannot pass while its newest backups are known bad: that would hide the lost recovery point.
    defects: list[Problem] = field(default_factory=list)
    # Backups of this database that exist but could not be read here (an archived object, a natively
    # compressed file offline) and that may hold what the chain lacks: the gap a broken chain shows, or
    # a point newer than the chain's end. Nothing then proves the backups wrong or right, so without a
    # known-bad backup or a failed check the database is "error", never "failed" and never "passed".
    unread: list[Problem] = field(default_factory=list)
    # Every timeline of the archive the restore reads, with its fork; `timeline` is the one restored
    # to (None: no WAL planned), and how it was chosen.
    timelines: list[TimelineFork] = field(default_factory=list)
    timeline: int | None = None
    timeline_choice: str | None = None


@dataclass(frozen=True)
class SecuredPoint:
    """A moment up to which a backup secured the data: a backup's end, a log backup, an archived WAL segment."""

    name: str
    at: datetime


@dataclass
class BackupHistory:
    """What a database's backups secure over time, for the achieved RPO."""

    points: list[SecuredPoint] = field(default_factory=list)
    # Where the times come from ("backup finish times and log backups", "WAL archive file times", ...).
    basis: str = ""

    @property
    def newest(self) -> SecuredPoint | None:
        return max(self.points, key=lambda p: p.at) if self.points else None


class UnreadableKind(StrEnum):
    # Starts like a backup (or sits where backups are) but is damaged or truncated: the run fails.
    CORRUPT = "corrupt"
    # Natively compressed SQL Server backups: read only by RESTORE HEADERONLY in a server. Unread,
    # so the run cannot pass.
    NEEDS_SERVER = "needs-server"
    # Not a backup at all (a README, a checksum list): named with its first bytes, no effect.
    NOT_A_BACKUP = "not-a-backup"
    # Matched an exclude pattern of the configuration: named, no effect.
    EXCLUDED = "excluded"
    # An object whose key is no path (object storage: an empty, '.' or '..' segment): never read, so
    # it may be a backup nobody checked; the run cannot pass.
    UNADDRESSABLE = "unaddressable"
    # An object in an archive storage class (GLACIER, DEEP_ARCHIVE) not restored, or still being
    # restored: it exists, and nothing can read it now. Never read, so the run cannot pass; never
    # "corrupt" either: a database whose plan needs it is "error", naming it and its class.
    ARCHIVED = "archived"
    # A file the restore needs that the target will not be allowed to read (its mode and owner): an
    # operator's fix, never a damaged backup, so the database is "error".
    PERMISSION = "permission"
    # A layout the reader does not know (a SQL Server backup whose MTF structure no real sample proves):
    # the run and the database beside it are error, never failed: nothing proves the file damaged.
    UNSUPPORTED = "unsupported"


# Kinds that keep a run from passing: a backup file that went unread or is damaged.
BLOCKING_UNREADABLE = (UnreadableKind.CORRUPT, UnreadableKind.NEEDS_SERVER, UnreadableKind.UNADDRESSABLE,
                       UnreadableKind.ARCHIVED, UnreadableKind.PERMISSION, UnreadableKind.UNSUPPORTED)
# Of those, the ones that make a run "error" (a file nobody read), not "failed" (a file proven bad).
UNREAD_KINDS = (UnreadableKind.NEEDS_SERVER, UnreadableKind.UNADDRESSABLE, UnreadableKind.ARCHIVED,
                UnreadableKind.PERMISSION, UnreadableKind.UNSUPPORTED)


@dataclass(frozen=True)
class UnreadableFile:
    """A file of the source that was not read as a backup; never silently skipped."""

    __pydantic_config__ = _REPORTED

    path: str
    kind: UnreadableKind
    reason: str
    # The database it belongs to, when its identity could still be read (e.g. from a trailer copy).
    database: str | None = None

    def describe(self) -> str:
        """'path: reason', without the path twice when the reason already starts with it."""
        return self.reason if self.reason.startswith(self.path) else f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class IncompleteUpload:
    """An unfinished multipart upload under an object-storage source: a backup being written, or one
    that failed and left its parts behind (billed, and never a backup). Listed, never read."""

    __pydantic_config__ = _REPORTED

    path: str  # the key it was to have, relative to the source
    upload_id: str  # what `aws s3api abort-multipart-upload --upload-id` takes to remove it
    initiated: datetime | None = None


@dataclass(frozen=True)
class SystemIdentifier:
    """The identifier a database's backups record for it, read from the backups themselves: pgBackRest's
    db-system-id (backup.info [db]: the cluster's pg_control system identifier, made by initdb), SQL
    Server's FamilyGUID (kept by a database for its life, across restores). `basis` says where it was read."""

    __pydantic_config__ = _REPORTED

    value: str
    basis: str


@dataclass(frozen=True)
class DatabaseIdentity:
    """Which database a result is about, across runs: where its backups are (`source`, as the run names
    it), its name there (a stanza, a SQL Server database as the report names it), and the identifier its
    backups record (None where none could be read). Two clusters under one stanza name in two
    repositories, or a stanza name reused by a new cluster, are never one database's baselines, history,
    drift or calibration. Reports before it (rows without one) are matched by source and name."""

    __pydantic_config__ = _REPORTED

    source: str
    name: str
    system_id: SystemIdentifier | None = None

    @property
    def key(self) -> str:
        """What the results store keys the database's rows by: a hash of source, name and identifier
        (the identifier's value only: a basis reworded is still the same database)."""
        value = self.system_id.value if self.system_id is not None else None
        return hashlib.sha256(json.dumps([self.source, self.name, value]).encode()).hexdigest()

    def describe(self) -> str:
        said = f"system id {self.system_id.value}" if self.system_id is not None else "no system id known"
        return f"{self.name} of {self.source} ({said})"


def identity_of(source: str, plan: RestorePlan) -> DatabaseIdentity:
    return DatabaseIdentity(source, plan.database, plan.system_id)


@dataclass(frozen=True)
class ToolNeed:
    """What reading a backup needs of the target's tool: the oldest version that reads a feature the
    backup uses, and where the backup says it uses it."""

    tool: str
    version: str
    why: str


@dataclass(frozen=True)
class ChosenPoint:
    """A point in time restoreproof chose itself (`--point random`), not one asked for, and what lets
    its restore go on to the end of the archive where the archive holds no transaction after it (the
    state at the point is then the archive's end; an explicit point stays an error)."""

    strategy: str
    # The newest backup on the history restored, and its end: each online backup waits for its WAL to
    # be archived, so the archive covers every moment up to that end.
    newest_backup: str | None
    newest_backup_end: datetime | None
    # The WAL from the target backup to the archive's end, as a restore to latest replays it; None when
    # the archive does not hold it whole (`gap` says why).
    wal_to_end: WalRange | None
    gap: str | None = None


@dataclass
class RestorePlan:
    """What to restore for one database: the backup, the chain it needs, and the point to reach."""

    engine: str
    database: str
    chain: Chain
    # None means "latest": the end of the available log/WAL.
    stop_at: datetime | None = None
    target_backup: BackupSet | None = None
    # The point is the target backup's own consistent point (where its restore first holds a consistent
    # database), not a moment in time: reached whether or not anything was written after it.
    consistent_point: bool = False
    # Source paths of every file the restore reads (hashed for the evidence bundle).
    files: list[str] = field(default_factory=list)
    history: BackupHistory | None = None
    # SQL Server: every file of the database's full and differential backups found in the source,
    # whether the chain uses it or not (a set with a family missing, a second copy of a family, an
    # older full), oldest first: what page verification reads beyond the chain, from the plan alone.
    data_backups: list[BackupSet] = field(default_factory=list)
    # The cipher the source's files are encrypted with, as the engine told it from their content
    # (e.g. "aes-256-cbc"); None when they are not encrypted. The restore gives the target the key.
    encryption: str | None = None
    # The identifier the database's backups record (db-system-id, FamilyGUID): with the source and the
    # name, what tells this database's history from another's of the same name (DatabaseIdentity).
    system_id: SystemIdentifier | None = None
    # The timeline recovery is told to follow (pgBackRest --target-timeline, PostgreSQL's
    # recovery_target_timeline); None: PostgreSQL's default, the newest timeline in the archive.
    target_timeline: int | None = None
    # Set when restoreproof chose the point (a strategy, not --at): see ChosenPoint.
    chosen_point: ChosenPoint | None = None
    # What wrote the target backup, as the backups record it (product -> version, e.g. the server's
    # major and the backup tool's version): the target is chosen and checked against it.
    written_by: dict[str, str] = field(default_factory=dict)
    # The features of the backup's format the target's tools must know to read it (its files' layout,
    # as the backups' own metadata says): the target is refused when its tool is older.
    needs: list[ToolNeed] = field(default_factory=list)


@dataclass
class PhaseTiming:
    name: str
    status: PhaseStatus
    seconds: float | None = None
    bytes: int | None = None
    started_at: datetime | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def absent(cls, name: str, why: str) -> PhaseTiming:
        return cls(name=name, status=PhaseStatus.ABSENT, details={"why": why})

    @classmethod
    def not_reached(cls, name: str, why: str) -> PhaseTiming:
        return cls(name=name, status=PhaseStatus.NOT_REACHED, details={"why": why})


@dataclass
class CheckResult:
    name: str
    status: CheckStatus
    summary: str
    # The findings that make a check fail, one line each, in the tool's own words.
    findings: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    # File name (relative to the run's evidence folder) holding the tool's full output.
    evidence: str | None = None
    # A required check that did not pass blocks a "passed" verdict.
    required: bool = True
    kind: CheckKind = CheckKind.RESTORED


# What a check of the restored server says of the cluster's databases, in its details: the names of
# every database pg_database holds, of those it checked, and each one it did not check with why.
# A database that exists but that no passed integrity check names as checked keeps the verdict from
# passing (verdict.decide).
DATABASES_EXISTING = "databases_existing"
DATABASES_CHECKED = "databases_checked"
DATABASES_NOT_CHECKED = "databases_not_checked"
# What a check of the backup files says it could not read, in its details: each file with why (encrypted,
# natively compressed, pages that read as no server's). An offline run that left one unread did not find
# "nothing wrong" (verdict.offline_clean): nothing looked at that file.
FILES_NOT_READ = "files_not_read"


@dataclass
class RestorePoint:
    target: str  # "latest" or an ISO 8601 time
    achieved: datetime | None = None
    detail: str | None = None


@dataclass
class DatabaseResult:
    database: str
    verdict: Verdict
    reasons: list[str]
    plan: RestorePlan
    restore_point: RestorePoint
    phases: list[PhaseTiming] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    target: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    # The versions (product -> version) of what restored and checked, as the target's own tools say.
    target_versions: dict[str, str] = field(default_factory=dict)
    # verification.prediction.phase_model.Prediction, made before the restore (kept untyped here
    # so the domain types do not depend on the model).
    prediction: Any = None
    # Seconds from the start of this database's verification (its download or its target) to its
    # verdict. Some phases run alongside others: their own seconds add up to more than this.
    wall_seconds: float | None = None
    # Settings of the backup the restored server was not allowed to keep (engines/postgres/settings.py).
    overridden_settings: list[OverriddenSetting] = field(default_factory=list)
    # Which database this is across runs (the pipeline sets it: it knows the source).
    identity: DatabaseIdentity | None = None

    @property
    def recovery_seconds(self) -> float | None:
        """Seconds from asking for a target to the database online (checks not counted)."""
        phases = [p for p in self.phases if p.name in RECOVERY_PHASES]
        if not phases or any(p.status is PhaseStatus.NOT_REACHED for p in phases):
            return None
        return sum(p.seconds or 0.0 for p in phases if p.status is PhaseStatus.MEASURED)


# Phases that together take a database from "asked for" to "online"; checks come after. A restore
# from object storage cannot start before its files are staged: the download counts.
RECOVERY_PHASES = (PhaseName.DOWNLOAD, PhaseName.PROVISION, PhaseName.ZEROING, PhaseName.TRANSFER,
                   PhaseName.LOG_RESTORE, PhaseName.SERVER_START, PhaseName.REDO, PhaseName.RECOVERY_END)


@dataclass
class RunResult:
    run_id: str
    engine: str
    source: str
    started_at: datetime
    finished_at: datetime | None = None
    target_kind: str | None = None
    databases: list[DatabaseResult] = field(default_factory=list)
    host: dict[str, Any] = field(default_factory=dict)
    # Every file of the source that was not read as a backup, with what it is and why.
    unreadable: list[UnreadableFile] = field(default_factory=list)
    # Object storage: unfinished multipart uploads under the source (none for a folder).
    incomplete_uploads: list[IncompleteUpload] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        """The run's overall verdict, never passed when empty.

        `failed` (a backup is not restorable) outranks `error` (restoreproof could not finish one):
        a proven bad backup must not hide behind an infrastructure problem elsewhere in the run.
        """
        return overall_verdict([d.verdict for d in self.databases], [str(u.kind) for u in self.unreadable])


def overall_verdict(verdicts: list[str], unreadable_kinds: list[str], unverified: bool = False) -> Verdict:
    """A run's verdict from its databases' and its unread files': failed (any database failed, or
    any backup file is corrupt), else error (no database at all, a database that was due was never
    verified, or a backup file went unread), else passed."""
    if Verdict.FAILED in verdicts or UnreadableKind.CORRUPT in unreadable_kinds:
        return Verdict.FAILED
    if not verdicts or Verdict.ERROR in verdicts or unverified or any(k in UNREAD_KINDS for k in unreadable_kinds):
        return Verdict.ERROR
    if any(kind not in set(UnreadableKind) for kind in unreadable_kinds):
        return Verdict.ERROR  # a kind this version does not know is not a pass
    return Verdict.PASSED


@dataclass(frozen=True)
class PhaseWork:
    """What the plan says a phase will move, known before anything is restored."""

    phase: str
    bytes_read: int | None = None
    bytes_written: int | None = None
    compressed: bool = False
    # Processes working in parallel (pgBackRest --process-max): multiplies per-process rates.
    parallel: int = 1
    # Files the phase creates: each costs a fixed time (open, fsync, metadata) whatever its size.
    files: int | None = None
    note: str = ""
