"""Configuration: one YAML file plus environment variables, validated, with defaults that need neither.

Precedence (highest first): explicit arguments (the CLI's flags), environment variables
(``RESTOREPROOF_<FIELD>``, nested with ``__``: ``RESTOREPROOF_DOCKER__MEMORY=4g``), files in the
folder ``RESTOREPROOF_SECRETS_DIR`` names (one per setting, named as its variable), the YAML file
(``--config FILE``, ``RESTOREPROOF_CONFIG``, the user file, the system file: settings_env.py), then the
defaults below.
"""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NestedSecretsSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from verification.errors import ConfigError
from verification.settings_env import locate_config, warn_unknown_variables

CONFIG_ENV = "RESTOREPROOF_CONFIG"
SECRETS_DIR_ENV = "RESTOREPROOF_SECRETS_DIR"


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "restoreproof"


class _Section(BaseModel):
    # A misspelt key is an error, not a silently ignored setting.
    model_config = ConfigDict(extra="forbid")


def parse_memory(text: str) -> int:
    """'2g', '512m', '1073741824' -> bytes."""
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    cleaned = text.strip().lower().removesuffix("b")
    try:
        if cleaned and cleaned[-1] in units:
            return int(float(cleaned[:-1]) * units[cleaned[-1]])
        return int(cleaned)
    except ValueError:
        raise ValueError(f"not a memory size (like 2g or 512m): {text!r}") from None


class _ContainerLimits(_Section):
    # The container's memory limit (swap included): a restore or check that needs more is killed by the
    # kernel's OOM killer, and the database ends "error" saying so.
    memory: str = "2g"
    # A size limit for the restored data (e.g. "20g"): the data volume is then a tmpfs of that size, so a
    # restore that outgrows it ends "error" (the target's disk is full), not filling the engine's disk.
    # A tmpfs is memory: its pages count against `memory`, which must be larger. None: a volume on the
    # engine's disk, as large as that disk.
    data_size: str | None = None
    # Seconds to wait for a Docker engine that stopped answering (restarted, upgraded) before a target's
    # start or removal gives up: a run goes on with its next database once the engine is back.
    engine_wait: float = Field(120.0, ge=0)
    # Seconds a target may stay at its memory limit thrashing (reading back from disk over 100 pages a
    # second that the kernel dropped to make room) before it is stopped and its database ends "error",
    # out of memory: the kernel's OOM killer need not strike, and everything in it then crawls to the end
    # of its budget. 0: never stopped for it.
    starved_after: float = Field(60.0, ge=0)

    @field_validator("memory", "data_size")
    @classmethod
    def _memory_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_memory(value)
        return value

    @model_validator(mode="after")
    def _data_fits_in_memory(self) -> _ContainerLimits:
        if self.data_size_bytes is not None and self.data_size_bytes >= self.memory_bytes:
            raise ValueError(f"data_size ({self.data_size}) must be below memory ({self.memory}): the data volume "
                             "is a tmpfs, whose pages count against the container's memory limit")
        return self

    @property
    def memory_bytes(self) -> int:
        return parse_memory(self.memory)

    @property
    def data_size_bytes(self) -> int | None:
        return parse_memory(self.data_size) if self.data_size is not None else None


class DockerSettings(_ContainerLimits):
    # One image for every restore; when set, it is held to the PostgreSQL major each backup needs.
    # Unset, each restore gets the image for its backup's major: postgres_images, else
    # restoreproof/postgres:<major>, built on demand.
    postgres_image: str = "restoreproof/postgres:15"
    # PostgreSQL major (e.g. "17") -> the image that restores backups written by it.
    postgres_images: dict[str, str] = Field(default_factory=dict)
    cpus: float = Field(2.0, gt=0)
    pids_limit: int = Field(1024, ge=64)
    # Seconds to wait for a new container to answer `docker exec`.
    start_timeout: float = Field(60.0, gt=0)
    # A folder of <name>/Dockerfile to build missing images from, for your own Dockerfiles
    # (`restoreproof paths images` shows the shipped one to start from). Default: the shipped one.
    build_context: Path | None = None

    @field_validator("postgres_images", mode="before")
    @classmethod
    def _major_as_text(cls, value: Any) -> Any:
        # YAML reads `17:` as a number; a major is matched as the text backup.info records.
        return {str(key): image for key, image in value.items()} if isinstance(value, dict) else value


class PostgresSettings(_Section):
    @field_validator("bin_dirs", mode="before")
    @classmethod
    def _major_as_text(cls, value: Any) -> Any:
        return {str(key): folder for key, folder in value.items()} if isinstance(value, dict) else value

    # Where the PostgreSQL binaries live for the local-process target (inside the image they are on PATH):
    # per major in bin_dirs, else bin_dir when it is set, else Debian's /usr/lib/postgresql/<major>/bin.
    # Each is held to the major the backup needs.
    bin_dir: Path = Path("/usr/lib/postgresql/15/bin")
    bin_dirs: dict[str, Path] = Field(default_factory=dict)
    # Used only where the repository cannot tell the cluster's WAL segment size (engines/postgres/segment_size.py).
    wal_segment_size: int = Field(16 * 1024 * 1024, ge=1024 * 1024)
    # pgBackRest --process-max for the restore; the raw-steps bench uses the same value.
    restore_process_max: int = Field(2, ge=1, le=64)
    # Seconds for the server to end recovery and accept connections.
    recovery_timeout: float = Field(1800.0, gt=0)
    restore_timeout: float = Field(6 * 3600.0, gt=0)
    check_timeout: float = Field(6 * 3600.0, gt=0)
    amcheck_options: list[str] = Field(default_factory=lambda: ["--heapallindexed"])
    # `pgbackrest verify` over the whole repository: finds corrupt files in every backup, also
    # the ones a restore of the chosen point does not read.
    repository_verify: bool = True
    checksums_check: bool = True
    # The role restoreproof connects as (trust authentication on a private socket).
    superuser: str = "postgres"
    # Extra settings for the restored server, e.g. {"shared_buffers": "256MB"} when the source's
    # settings do not fit the target's memory limit.
    server_options: dict[str, str] = Field(default_factory=dict)
    # An encrypted repository's passphrase (repo1-cipher-pass): decrypts its info files for planning,
    # and reaches pgBackRest in the target only through its environment, never a command line or a log.
    repo_cipher_pass: SecretStr | None = None

    @field_validator("repo_cipher_pass")
    @classmethod
    def _empty_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        # An empty value (a variable set to nothing) is no passphrase: said as missing, not as wrong.
        return value if value is None or value.get_secret_value() else None


# DatabaseVersion of each SQL Server release's own databases (RESTORE HEADERONLY), for choosing an
# image at least as new as a backup.
MSSQL_2017, MSSQL_2019, MSSQL_2022 = 869, 904, 957


CERTIFICATE_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,99}$"


class MssqlCertificate(_Section):
    """A certificate with its private key, as `BACKUP CERTIFICATE ... TO FILE = ... WITH PRIVATE KEY (FILE
    = ..., ENCRYPTION BY PASSWORD = ...)` wrote them on the source server: created in each SQL Server
    target's master before the restore, for backups encrypted with it (WITH ENCRYPTION) or from a TDE
    database it protects. Gone with the target."""

    certificate: Path  # the .cer (DER, as BACKUP CERTIFICATE writes it; PEM is accepted and sent as DER)
    private_key: Path  # the .pvk
    # The private key file's password. Best given in the environment, never in a file others read:
    # RESTOREPROOF_MSSQL__CERTIFICATES__<NAME>__PRIVATE_KEY_PASSWORD.
    private_key_password: SecretStr | None = None


class MssqlSettings(_ContainerLimits):
    # Not watched by default: SQL Server fills its buffer pool to most of the limit by design and maps
    # large files of its own; how it faults when healthy has not been measured (no SQL Server here).
    starved_after: float = Field(0.0, ge=0)
    # DatabaseVersion -> image; the first image at least as new as the backup is used.
    images: dict[int, str] = Field(default_factory=lambda: {
        MSSQL_2022: "mcr.microsoft.com/mssql/server:2022-latest"})
    edition: str = "Developer"
    memory: str = "4g"  # SQL Server needs 2 GB at least
    cpus: float = Field(2.0, gt=0)
    pids_limit: int = Field(4096, ge=64)
    start_timeout: float = Field(300.0, gt=0)
    statement_timeout: float = Field(6 * 3600.0, gt=0)
    buffer_count: int | None = Field(None, ge=1)
    max_transfer_size: int | None = Field(None, ge=65536, le=4194304)
    # Added to NO_INFOMSGS, ALL_ERRORMSGS, TABLERESULTS: e.g. DATA_PURITY, EXTENDED_LOGICAL_CHECKS,
    # PHYSICAL_ONLY for very large databases, MAXDOP = 2.
    checkdb_options: list[str] = Field(default_factory=list)
    # Whose pages are verified offline: "chain", the full and differential backups of the planned
    # chain; "all", every full and differential backup of the database in the source too (an older
    # full, a differential on another base, a copy). A damaged one outside the chain fails the page
    # check, and so the database, but never changes the plan (`verify --pages`).
    pages: Literal["chain", "all"] = "chain"
    # Backup headers kept between runs (engines/mssql/header_cache.py), in the state folder: a file
    # read once is not read again while its fingerprint is unchanged. "on": for every source;
    # "object-store": only where the fingerprint changes whenever the content does (S3's ETag), not
    # for local folders (size and times); "off". true and false (YAML, the environment) mean "on" and "off".
    header_cache: Literal["on", "object-store", "off"] = "on"
    # Certificates (with their private keys) that encrypted backups or protect TDE databases, by a name of
    # letters, digits and underscores (the environment's spelling of it is matched ignoring case):
    # created in every target's master before the restore (engines/mssql/certificates.py).
    certificates: dict[str, MssqlCertificate] = Field(default_factory=dict)

    @field_validator("certificates", mode="before")
    @classmethod
    def _one_entry_per_name(cls, value: Any) -> Any:
        """The environment gives names in lower case (RESTOREPROOF_MSSQL__CERTIFICATES__BACKUPCERT__...),
        the file as written: entries whose names differ only in case are one certificate, the
        environment's values over the file's, under the file's spelling."""
        if not isinstance(value, dict):
            return value
        merged: dict[str, Any] = {}
        spelled: dict[str, str] = {}
        # Lower-case names last: where both spellings exist, the lower-case one came from the environment.
        for name in sorted(value, key=lambda n: (str(n) == str(n).lower(), str(n))):
            key = str(name).lower()
            entry = value[name]
            if key in spelled and isinstance(entry, dict) and isinstance(merged[spelled[key]], dict):
                merged[spelled[key]] = {**merged[spelled[key]], **entry}
            else:
                spelled[key] = str(name)
                merged[str(name)] = entry
        return merged

    @model_validator(mode="after")
    def _certificates_complete(self) -> MssqlSettings:
        for name, certificate in self.certificates.items():
            if not re.match(CERTIFICATE_NAME, name):
                raise ValueError(f"mssql.certificates: {name!r} is not a name of letters, digits and underscores "
                                 "(up to 100, not starting with a digit): the environment must be able to name it")
            if certificate.private_key_password is None:
                raise ValueError(f"mssql.certificates.{name}.private_key_password is not set: give the private key "
                                 f"file's password in RESTOREPROOF_MSSQL__CERTIFICATES__{name.upper()}__"
                                 "PRIVATE_KEY_PASSWORD (or in the configuration file)")
        return self

    @field_validator("header_cache", mode="before")
    @classmethod
    def _cache_switch(cls, value: Any) -> Any:
        switch = str(value).lower() if isinstance(value, bool | str) else None
        return {"true": "on", "false": "off"}.get(switch, value) if switch else value


class SqlCheck(_Section):
    """A business invariant: a query whose single value must equal `expect` after the restore."""

    name: str
    query: str
    expect: str
    database: str = "postgres"
    required: bool = True

    @field_validator("expect", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> str:
        return str(value)


class RtoSettings(_Section):
    """Recovery time objectives, in seconds: a default and per-database targets."""

    default_seconds: float = Field(4 * 3600.0, gt=0)
    databases: dict[str, float] = Field(default_factory=dict)
    # Alert when the trend will cross the RTO within this many days.
    horizon_days: float = Field(90.0, gt=0)
    # A trend, and every alert drawn from history (the trend's crossing, the model's error), needs at
    # least this many measured runs spread over at least this many days: two runs seconds apart are
    # noise, not a rate of growth. An RTO missed by the newest run is a measurement and needs neither.
    trend_min_runs: int = Field(5, ge=2)
    trend_min_days: float = Field(3.0, ge=0)
    # Count the integrity and data checks in the measured recovery time (they are always reported).
    count_checks: bool = False

    def for_database(self, database: str) -> float:
        return self.databases.get(database, self.default_seconds)


class RpoSettings(_Section):
    """Recovery point objectives, in seconds: the most data a failure may lose."""

    default_seconds: float = Field(24 * 3600.0, gt=0)
    databases: dict[str, float] = Field(default_factory=dict)

    def for_database(self, database: str) -> float:
        return self.databases.get(database, self.default_seconds)


class PredictionSettings(_Section):
    """The restore-time model: probes for a cold start, calibration from the results store."""

    # auto: probe only the rates calibration cannot supply yet; always; never (documented defaults).
    probes: Literal["auto", "always", "never"] = "auto"
    probe_megabytes: int = Field(128, ge=1, le=4096)
    # Calibration reads this many recent measured runs per engine, image and host.
    recent_runs: int = Field(20, ge=2)
    # A rate is "calibrated" once this many measured runs stand behind it.
    min_runs: int = Field(3, ge=1)
    # Alert "recalibration needed" when the median error of recent predictions exceeds this.
    tolerance_percent: float = Field(25.0, gt=0)


class ResultsRetrySettings(_Section):
    """How a results store that does not answer is waited for before the step fails with the reason: a
    PostgreSQL restarting or failing over, a network blip, a SQLite file another run is writing. Each
    try is one short transaction, tried again whole: up to `attempts` tries, the first wait `first_wait`
    seconds, doubling up to `max_wait` (the defaults wait 1 + 2 + 4 + 8 + 15 = 30 s in all)."""

    attempts: int = Field(6, ge=1, le=100)
    first_wait: float = Field(1.0, gt=0)
    max_wait: float = Field(15.0, gt=0)
    # SQLite: how long one statement waits for another process's write lock before it is "locked".
    sqlite_busy_timeout: float = Field(30.0, gt=0)


class MetricsSettings(_Section):
    """Prometheus exposition: always metrics.prom in the run folder; optionally these too."""

    # node_exporter's --collector.textfile.directory: restoreproof.prom is replaced atomically.
    textfile_dir: Path | None = None
    pushgateway_url: str | None = None
    job: str = "restoreproof"


class EvidenceSettings(_Section):
    """The signed evidence bundle (manifest.json + manifest.sig in each run folder)."""

    signing: Literal["ed25519", "hmac"] = "ed25519"
    # ed25519: a PEM private key (or a file holding one); hmac: the shared secret. Without one,
    # an Ed25519 key is made once in the state folder (evidence-signing.pem, mode 0600).
    signing_key: SecretStr | None = None
    signing_key_file: Path | None = None
    # SHA-256 of every backup file a restore read (a full read of the chain's files).
    hash_backups: bool = True


class ExpectationSpec(_Section):
    """One expectation in Great Expectations' own words: its type as GX names it (snake_case) and
    its kwargs. Checked against GX when the data checks are loaded, before any restore."""

    type: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)


class DataSuite(_Section):
    """Expectations on one table or one query of a restored database."""

    table: str | None = None   # "schema.table" or "table"
    query: str | None = None   # a SELECT whose rows are the batch
    name: str | None = None    # required for a query; a table's name defaults to the table
    # The database inside the restored server (PostgreSQL: one of the cluster's databases); by
    # default the verified database's main one.
    database: str | None = None
    expect: list[ExpectationSpec] = Field(min_length=1)
    required: bool = True

    @model_validator(mode="after")
    def _one_batch(self) -> DataSuite:
        if (self.table is None) == (self.query is None):
            raise ValueError("give exactly one of table: or query:")
        if self.query is not None and not self.name:
            raise ValueError("a query needs a name:")
        return self

    @property
    def label(self) -> str:
        return self.name or str(self.table)


class BaselineSettings(_Section):
    """Automatic baselines: every table of every restored database against the last passed run."""

    enabled: bool = True
    # A table that lost more than this share of its rows since the last passed verification fails.
    row_drop_percent: float = Field(10.0, ge=0, le=100)
    # A changed column set: "report" says it, "fail" fails the database.
    schema_drift: Literal["report", "fail"] = "report"
    # Tables per database beyond which the rest are counted but not profiled (said in the report).
    max_tables: int = Field(500, ge=1)


class FreshnessColumn(_Section):
    table: str
    column: str
    database: str | None = None
    # The newest row may be at most this old at the restore point; default: the database's RPO.
    max_age_seconds: float | None = Field(None, gt=0)


class FreshnessSettings(_Section):
    """The newest row of tables with a timestamp column, against the restore point."""

    enabled: bool = True
    # Columns named here are each held to their age limit (or the RPO) and fail alone.
    columns: dict[str, list[FreshnessColumn]] = Field(default_factory=dict)
    # Found automatically: a timestamp column with a default of the current time, or named like these
    # (fnmatch, case-insensitive). Together they say how far the data reaches: the freshest of them
    # fails the database only when even it is older than the RPO allows.
    auto: bool = True
    name_patterns: list[str] = Field(default_factory=lambda: ["created", "updated", "modified", "inserted",
                                                               "created_at", "updated_at", "modified_at",
                                                               "inserted_at", "*_time", "*timestamp"])


class ChecksSettings(_Section):
    # Deprecated: business invariants as a query and its expected single value. Still read, run as
    # Great Expectations unexpected-rows expectations; write them under `expectations:` instead.
    sql: list[SqlCheck] = Field(default_factory=list)
    # Great Expectations data checks (after the restore is online, before the integrity checks).
    enabled: bool = True
    # Per verified database (a stanza for PostgreSQL, a database for SQL Server).
    expectations: dict[str, list[DataSuite]] = Field(default_factory=dict)
    # <database>/<name>.json: GX suite files, e.g. exported from an existing GX project.
    suites_dir: Path | None = None
    baselines: BaselineSettings = BaselineSettings()
    freshness: FreshnessSettings = FreshnessSettings()
    # Seconds for all of one database's data checks (the phase data_checks, both engines): what is
    # not evaluated by then is an error naming it. Each query is held to it too.
    timeout: float = Field(1800.0, gt=0)

    def deprecations(self) -> list[str]:
        if not self.sql:
            return []
        return [f"checks.sql is deprecated ({len(self.sql)} checks): they run as Great Expectations "
                "unexpected-rows expectations; write them under checks.expectations"]


class S3Settings(_Section):
    """Backups in object storage (a source given as s3://bucket/prefix). What is not set here comes from
    boto3's standard chain: AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3), AWS_PROFILE, AWS_DEFAULT_REGION,
    AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, AWS_CA_BUNDLE, ~/.aws, instance roles."""

    # An S3-compatible store (MinIO, Ceph, a local endpoint); None: AWS (or AWS_ENDPOINT_URL).
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    # path: https://endpoint/bucket/key (most S3-compatible stores); virtual: https://bucket.endpoint/key.
    addressing_style: Literal["auto", "path", "virtual"] = "auto"
    verify_tls: bool = True
    # The CA certificate(s) that sign the endpoint's certificate (PEM), beside the system's own.
    ca_bundle: Path | None = None
    # Listing and header reads in parallel; the connection pool is sized to match.
    threads: int = Field(16, ge=1, le=256)
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    # Fail fast on an endpoint that is not there: seconds to connect, seconds for an answer, and how
    # many times one request is tried in all (botocore's standard retry mode, backing off between).
    connect_timeout: float = Field(5.0, gt=0)
    read_timeout: float = Field(60.0, gt=0)
    max_attempts: int = Field(3, ge=1, le=20)
    # How a restore reads backups in object storage. stage: the plan's files are downloaded (phase
    # `download`, checked against the listing's ETag, their size and S3's checksum) into a folder the
    # target reads as it reads a local repository, and removed when the database's verification ends;
    # direct: the tool in the target reads S3 itself.
    restore_mode: Literal["stage", "direct"] = "stage"
    # Where staged copies go (each in a folder of its own, recorded for `restoreproof reap`); default:
    # <state_dir>/staging (made 0711: passed through, not listed). It needs room for the largest chain,
    # and the local target's OS user must be able to reach it (its parents too).
    staging_dir: Path | None = None

    @model_validator(mode="after")
    def _both_keys(self) -> S3Settings:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("give both s3.access_key_id and s3.secret_access_key, or neither (the AWS chain)")
        return self

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint_is_a_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value


class LeaseSettings(_Section):
    """Every process working for a run holds a lease on it in the results store, renewed by a heartbeat.

    A lease not renewed for `seconds` names a dead worker: the next run (or `restoreproof reap`) on
    any host sharing the store then removes what it left. On the worker's own host a dead process is
    known at once (its pid and start time gone from /proc); the lease is what other hosts go by, so
    it must outlast any pause a live worker may have (a store briefly unreachable, a slow disk)."""

    seconds: float = Field(180.0, ge=10)
    # How often the heartbeat renews it; None: a sixth of the lease.
    heartbeat_seconds: float | None = Field(None, gt=0)
    # The name this worker gives itself in labels and leases; None: the host name. Set one per worker
    # where several share a host name (containers started with the same --hostname).
    worker: str | None = Field(None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _beats_within_the_lease(self) -> LeaseSettings:
        if self.heartbeat_seconds is not None and self.heartbeat_seconds * 2 > self.seconds:
            raise ValueError("lease.heartbeat_seconds must be at most half of lease.seconds: a single late "
                             "heartbeat must not make a live worker look dead")
        return self

    @property
    def interval(self) -> float:
        return self.heartbeat_seconds if self.heartbeat_seconds is not None else self.seconds / 6


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="RESTOREPROOF_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    state_dir: Path = Field(default_factory=default_state_dir)
    # Any SQLAlchemy URL; default: a SQLite file in the state folder.
    results_url: str | None = None
    results_retry: ResultsRetrySettings = ResultsRetrySettings()
    report_dir: Path = Path("reports")
    engine: Literal["auto", "postgres", "mssql"] = "auto"
    # Files of the source that are deliberately not backups to verify, as glob patterns on their
    # path relative to the source (fnmatch: `*` also crosses folders), e.g. ["archive/old/*", "*.tmp"].
    # Only an explicit pattern keeps an unreadable file from failing the run; what matched is still
    # listed in the report as excluded.
    exclude: list[str] = Field(default_factory=list)
    target: Literal["auto", "docker", "local", "offline"] = "auto"
    docker: DockerSettings = DockerSettings()
    postgres: PostgresSettings = PostgresSettings()
    mssql: MssqlSettings = MssqlSettings()
    checks: ChecksSettings = ChecksSettings()
    rto: RtoSettings = RtoSettings()
    rpo: RpoSettings = RpoSettings()
    prediction: PredictionSettings = PredictionSettings()
    metrics: MetricsSettings = MetricsSettings()
    evidence: EvidenceSettings = EvidenceSettings()
    s3: S3Settings = S3Settings()
    lease: LeaseSettings = LeaseSettings()
    # Seconds between two lines of the running phases where stderr is no terminal (a log, a scheduler's
    # capture); on a terminal a status line is refreshed every second.
    progress_interval: float = Field(10.0, gt=0)

    @property
    def results_database_url(self) -> str:
        return self.results_url or f"sqlite:///{self.state_dir / 'results.db'}"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if secrets := secrets_dir():
            # One file per setting, named as its variable (restoreproof_postgres__repo_cipher_pass),
            # as Docker and Kubernetes mount secrets: the value never in an environment or a config file.
            sources.append(NestedSecretsSettingsSource(file_secret_settings, secrets_dir=secrets,
                                                       secrets_nested_delimiter="__"))
        if (file := locate_config(_config_file.get()).path) is not None:
            _check_config_file(file)
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=file))
        return tuple(sources)


def secrets_dir() -> Path | None:
    """The folder of RESTOREPROOF_SECRETS_DIR (e.g. /run/secrets), checked to be one."""
    named = os.environ.get(SECRETS_DIR_ENV)
    if not named:
        return None
    if not Path(named).is_dir():
        raise ConfigError(f"{SECRETS_DIR_ENV} names {named}, which is not a folder")
    return Path(named)


# The file `load_settings` was given (--config, a DAG run's `config`), for this call only: set in a
# context variable rather than the process environment, which other threads share.
_config_file: ContextVar[Path | None] = ContextVar("restoreproof_config_file", default=None)


def _check_config_file(file: Path) -> None:
    """What pydantic-settings' YAML source would pass over or fail on obscurely, said with the file's name."""
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"configuration file {file} does not exist") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"configuration file {file} is a folder: name the YAML file in it") from exc
    except OSError as exc:
        raise ConfigError(f"configuration file {file} cannot be read: {exc.strerror} (uid {os.geteuid()}); give "
                          "this user read access to it, or name another with --config") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"configuration file {file} is not UTF-8 text (byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"configuration file {file} is not valid YAML: {exc}") from exc
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"configuration file {file} must hold a mapping at its top level")


def describe_errors(exc: ValidationError) -> str:
    """The field and the rule each value broke, never the value itself: it may be a secret."""
    lines = []
    for error in exc.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        lines.append(f"  {where}: {error['msg']}")
    return "\n".join(lines)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from the file, the environment and explicit overrides (None values are ignored)."""
    warn_unknown_variables(Settings, os.environ)
    token = _config_file.set(Path(config_file) if config_file is not None else None)
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        where = f" in {locate_config(config_file).path or 'the environment'}"
        raise ConfigError(f"invalid configuration{where}:\n{describe_errors(exc)}") from None
    finally:
        _config_file.reset(token)
