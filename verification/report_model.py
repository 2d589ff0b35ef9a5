"""report.json as typed models: the one definition of every field a report carries.

Engines and the pipeline fill the domain types of `verification.model`; a database's report entry is
made from them once (`reports.entries`), prediction adds its typed figures to it, and every reader
(HTML, JUnit, metrics, the results store, calibration, drift, publishing, the Airflow page) takes these
models back, never a dict read by string keys. `report.schema.json` is generated from `RunReport`
(`restoreproof schema`); a test fails when the checked-in file differs.

Reports written by earlier versions (schema 1.0 to 1.8) still validate: fields added since are
optional with the default an older writer implied. Unknown fields are refused (`extra="forbid"`), so
a misspelt field is an error, not a silent blank.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, SerializerFunctionWrapHandler, model_serializer
from pydantic import model_validator as _model_validator

from verification.model import (
    BackupEncryption,
    BackupType,
    ChainStatus,
    CheckKind,
    CheckStatus,
    DatabaseIdentity,
    IncompleteUpload,
    OverriddenSetting,
    PhaseName,
    PhaseStatus,
    Problem,
    RuleCheck,
    TimelineFork,
    UnreadableFile,
    Verdict,
    WalRange,
)

# Every version a reader accepts: 1.0 plus what each minor version added (docs/report-schema.md).
SchemaVersion = Literal["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "1.10", "1.11", "1.12",
                        "1.13", "1.14"]
SCHEMA_VERSION: SchemaVersion = "1.14"

# Times as Python writes them (`isoformat`: "+00:00", not pydantic's "Z"), so reports stay byte-compatible.
Timestamp = Annotated[datetime, PlainSerializer(lambda value: value.isoformat(), return_type=str)]


class Bound(StrEnum):
    """What limits a predicted phase (the slowest link, or a constant)."""

    SOURCE_READ = "source read"
    TARGET_WRITE = "target write"
    DECOMPRESSION = "decompression"
    REDO_RATE = "redo rate"
    CHECK_RATE = "check rate"
    # Object storage to the staging folder: the "system throughput" link of the load model.
    DOWNLOAD_RATE = "download rate"
    CONSTANT = "constant"


class Provenance(StrEnum):
    """Where a rate comes from: this deployment's runs, a probe in this run, or a documented default."""

    CALIBRATED = "calibrated"
    PROBE = "probe"
    DEFAULT = "default"


class PredictionMode(StrEnum):
    COLD = "cold"
    PARTLY_CALIBRATED = "partly calibrated"
    CALIBRATED = "calibrated"


class AlertKind(StrEnum):
    RTO_MISSED = "rto-missed"
    RTO_TREND = "rto-trend"
    MODEL_ERROR = "model-error"


class Attribution(StrEnum):
    SIZE = "size"
    THROUGHPUT = "throughput"


class ReportModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---- the chain -------------------------------------------------------------------------------------------


class BackupFileEntry(ReportModel):
    """A database file a backup restores, as RESTORE FILELISTONLY lists it."""

    logical_name: str
    type: str | None  # D data, L log
    size_bytes: int  # allocated on the source: what the restore creates (and may zero)
    file_id: int | None = None
    filegroup: str | None = None


_HEADER_FACTS = ("recovery_model", "copy_only", "damaged", "compatibility_level", "collation", "database_files",
                 "encryption", "position", "writer", "layout_proven")


class BackupEntry(ReportModel):
    """One backup of the planned chain, as the report shows it (a projection of `model.BackupSet`)."""

    model_config = ConfigDict(json_schema_extra={"anyOf": [{"required": ["path"]}, {"required": ["label"]}]})

    label: str | None = None
    path: str | None = None
    type: BackupType
    start: Timestamp | None
    finish: Timestamp | None
    size_bytes: int | None
    repo_size_bytes: int | None = None
    # Labels of the backups this one needs, oldest first.
    references: list[str] = Field(default_factory=list)
    start_wal: str | None = None
    stop_wal: str | None = None
    start_lsn: str | None = None
    stop_lsn: str | None = None
    first_lsn: str | None = None
    last_lsn: str | None = None
    family: str | None = None
    # 1.6, from a SQL Server backup's whole header; left out where the engine has no such fact.
    recovery_model: str | None = None
    copy_only: bool | None = None
    damaged: bool | None = None
    compatibility_level: int | None = None
    collation: str | None = None
    database_files: list[BackupFileEntry] | None = None
    # 1.9: whether the backup is encrypted, what a target needs to read it, and how that is known.
    encryption: BackupEncryption | None = None
    # 1.14, SQL Server: the set's position in its file (RESTORE ... WITH FILE = n; a file holds several
    # where BACKUP ... WITH NOINIT appended them), the server version that wrote it, and whether real
    # samples prove the layout that version writes (restoreproof read it by the same rules either way).
    position: int | None = None
    writer: str | None = None
    layout_proven: bool | None = None

    @model_serializer(mode="wrap")
    def _omit_unknown_header_facts(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in _HEADER_FACTS:
            if data.get(name) is None:
                data.pop(name, None)
        return data

    @_model_validator(mode="after")
    def _named(self) -> BackupEntry:
        if self.label is None and self.path is None:
            raise ValueError("a backup needs a label or a path")
        return self


class ChainEntry(ReportModel):
    status: ChainStatus
    backups: list[BackupEntry]
    wal: WalRange | None = None
    problems: list[Problem]
    # Every chain rule checked, with its outcome (1.0 reports may lack them).
    rules: list[RuleCheck] = Field(default_factory=list)
    # Known-bad newer backups that fail the database while the older chain still restores (1.4).
    defects: list[Problem] = Field(default_factory=list)
    # Backups of the database that could not be read and may hold what the chain lacks (1.7).
    unread: list[Problem] = Field(default_factory=list)
    # Every timeline of the archive with its fork (parent, fork LSN, fork time when proven) and whether
    # the restore replays it; the timeline restored to, and how it was chosen.
    timelines: list[TimelineFork] = Field(default_factory=list)
    timeline: int | None = None
    timeline_choice: str | None = None


# ---- prediction (1.3) ------------------------------------------------------------------------------------


class RateEntry(ReportModel):
    bytes_per_second: float
    provenance: Provenance
    runs: int = Field(ge=0)
    detail: str = ""


class PhasePredictionEntry(ReportModel):
    """How one phase was predicted, with enough to redo the arithmetic."""

    bytes_read: int | None
    bytes_written: int | None
    compressed: bool = False
    parallel: int = 1
    files: int | None = None
    inputs: str
    rates: dict[str, RateEntry]
    constant_seconds: float | None = None
    constant_provenance: Provenance | None = None
    calibrated: bool
    runs: int = Field(ge=0)


class ProbeEntry(ReportModel):
    name: str
    bytes: int | None = None
    seconds: float
    bytes_per_second: float | None = None
    detail: str


class CalibrationKey(ReportModel):
    """What a calibrated rate is valid for: runs on another engine, image or host say nothing here."""

    engine: str
    image: str
    host: str


class PredictionEntry(ReportModel):
    mode: PredictionMode
    runs: int = Field(ge=0)
    key: CalibrationKey
    recovery_seconds: float
    checks_seconds: float = 0.0
    error_percent: float | None = None
    probes: list[ProbeEntry] = Field(default_factory=list)


# ---- phases and checks -----------------------------------------------------------------------------------


class PhaseEntry(ReportModel):
    # An absent phase (the engine has none such) is never timed, not even as zero seconds.
    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"status": {"const": "absent"}}},
        "then": {"properties": {"seconds": {"type": "null"}}}})

    name: PhaseName
    status: PhaseStatus
    seconds: float | None
    bytes: int | None
    started_at: Timestamp | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    predicted_seconds: float | None = None
    bound: Bound | None = None
    error_percent: float | None = None
    prediction: PhasePredictionEntry | None = None

    @_model_validator(mode="after")
    def _absent_is_untimed(self) -> PhaseEntry:
        if self.status is PhaseStatus.ABSENT and self.seconds is not None:
            raise ValueError(f"phase {self.name} is absent but timed ({self.seconds} s)")
        return self


class CheckEntry(ReportModel):
    # A built-in check (`model.CheckName`) or a user's named data check ("sql:<name>").
    name: str
    status: CheckStatus
    required: bool = True
    # 1.6: what the check looked at; a report before 1.6 checked only restored databases.
    kind: CheckKind = CheckKind.RESTORED
    summary: str
    findings: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    evidence: str | None = None


class RestorePointEntry(ReportModel):
    target: str  # "latest" or an ISO 8601 time
    achieved: Timestamp | None
    detail: str | None = None


# ---- objectives (1.3) ------------------------------------------------------------------------------------


# In the objectives, a field an older report may lack reads as None (not known), never as a claim
# the older writer did not make (that the target was configured, that the backups were not stale).


class RtoObjective(ReportModel):
    target_seconds: float
    target_source: Literal["configured", "default"] | None = None
    measured_seconds: float | None
    predicted_seconds: float | None
    counts_checks: bool | None = None
    checks_seconds: float | None = None
    margin_seconds: float | None
    # Only on evidence: the database passed, came online, and every counted phase was measured.
    met: bool | None
    recovery_phases: list[PhaseName] = Field(default_factory=list)


class LogGap(ReportModel):
    """The longest time between two consecutive secured points."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    from_: str = Field(alias="from")
    to: str
    start: Timestamp
    end: Timestamp


class RpoObjective(ReportModel):
    target_seconds: float
    target_source: Literal["configured", "default"] | None = None
    restore_point: Timestamp | None = None
    newest_backup: Timestamp | None = None
    newest_backup_name: str | None = None
    behind_newest_seconds: float | None
    worst_log_gap_seconds: float | None
    worst_log_gap: LogGap | None = None
    newest_backup_age_seconds: float | None = None
    stale: bool | None = None
    points: int | None = None
    basis: str | None = None
    met: bool | None


class Objectives(ReportModel):
    rto: RtoObjective
    rpo: RpoObjective


# ---- drift (1.3) -----------------------------------------------------------------------------------------


class SeriesPoint(ReportModel):
    """One earlier (or this) run of a database, as drift and the history charts read it."""

    run_id: str
    at: Timestamp
    verdict: Verdict | None = None
    recovery_seconds: float | None
    predicted_seconds: float | None = None
    prediction_mode: PredictionMode | None = None
    transfer_bytes: int | None = None
    transfer_bytes_per_second: float | None = None


class TrendEntry(ReportModel):
    slope_seconds_per_day: float
    intercept_seconds: float  # at `start`
    start: Timestamp
    points: int


class Crossing(ReportModel):
    """When the trend reaches the RTO."""

    at: Timestamp
    days: float


class DriftAlert(ReportModel):
    kind: AlertKind
    message: str


class SeriesKind(StrEnum):
    """Which runs a drift series is drawn through: those restored to the latest point, or those to an
    earlier point in time (whose recovery replays another span of WAL or log each time). Never both."""

    LATEST = "latest"
    POINT_IN_TIME = "point-in-time"


class DriftEntry(ReportModel):
    series: list[SeriesPoint]
    trend: TrendEntry | None
    crossing: Crossing | None
    model_error_percent: float | None = None
    attribution: Attribution | None = None
    attribution_note: str | None = None
    alerts: list[DriftAlert]
    # Which runs the series holds (None in reports before it: every run of the database's name).
    series_kind: SeriesKind | None = None
    # What a trend and the alerts drawn from history need (rto.trend_min_runs, rto.trend_min_days),
    # as this run applied them; None in reports before them.
    min_runs: int | None = None
    min_days: float | None = None
    # Why there is no trend, and what of the series was matched by name only (runs recorded before
    # identities were kept).
    notes: list[str] = Field(default_factory=list)


# ---- a database, a run -----------------------------------------------------------------------------------

# Written only when there is something to say: a 1.2 reader must not meet `"objectives": null`.
_OMITTED_WHEN_NONE = ("objectives", "drift", "annotation_error", "identity", "versions")


class VersionsEntry(ReportModel):
    """1.13: product -> version of what wrote the backup, as the backups record it (for PostgreSQL the
    server's major and pgBackRest's version), and of what restored and checked it, as the target's own
    programs said."""

    backup: dict[str, str] = Field(default_factory=dict)
    target: dict[str, str] = Field(default_factory=dict)


class DatabaseEntry(ReportModel):
    database: str
    # Which database this is across runs: its source, its name and the identifier its backups record
    # (db-system-id, FamilyGUID); its baselines, history, drift and calibration are this identity's.
    identity: DatabaseIdentity | None = None
    verdict: Verdict
    reasons: list[str] = Field(min_length=1)
    restore_point: RestorePointEntry
    recovery_seconds: float | None = None
    # 1.8: seconds from the start of the database's verification to its verdict. Phases that ran
    # alongside each other (each names them in details.alongside) add up to more than this.
    wall_seconds: float | None = None
    chain: ChainEntry
    phases: list[PhaseEntry]
    checks: list[CheckEntry]
    target: dict[str, Any] = Field(default_factory=dict)
    versions: VersionsEntry | None = None
    # Evidence file names (relative to the run's evidence folder), by what they hold.
    evidence: dict[str, str] = Field(default_factory=dict)
    prediction: PredictionEntry | None = None
    objectives: Objectives | None = None
    drift: DriftEntry | None = None
    # Why prediction, objectives and drift are missing, when working them out failed.
    annotation_error: str | None = None
    # Settings of the backup that restoreproof did not let the restored server keep: each with the
    # backup's value and where it was set. Written only when there is one.
    overridden_settings: list[OverriddenSetting] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _omit_unset_sections(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in _OMITTED_WHEN_NONE:
            if data.get(name) is None:
                data.pop(name, None)
        if not data.get("overridden_settings"):
            data.pop("overridden_settings", None)
        return data

    @property
    def alerts(self) -> list[DriftAlert]:
        return self.drift.alerts if self.drift is not None else []


class NotVerified(ReportModel):
    """A database that was due in the run but has no result: it keeps the run from passing."""

    database: str
    reason: str


class RunReport(ReportModel):
    model_config = ConfigDict(title="restoreproof run report")

    schema_version: SchemaVersion = SCHEMA_VERSION
    run_id: str
    engine: str
    source: str
    target_kind: str | None = None
    started_at: Timestamp
    finished_at: Timestamp | None
    verdict: Verdict
    summary: dict[str, int] = Field(default_factory=dict)
    host: dict[str, Any] = Field(default_factory=dict)
    databases: list[DatabaseEntry]
    # Every file of the source that was not read as a backup, with what it is and why (1.1).
    unreadable: list[UnreadableFile] = Field(default_factory=list)
    # Databases due in the run without a result (1.2).
    not_verified: list[NotVerified] = Field(default_factory=list)
    # What the configuration says that does not apply to this run: deprecated keys, keys naming a
    # database the source does not have (1.7). Said, never a verdict of their own.
    warnings: list[str] = Field(default_factory=list)
    # Object storage: unfinished multipart uploads under the source, what failed backups leave (1.7).
    incomplete_uploads: list[IncompleteUpload] = Field(default_factory=list)
