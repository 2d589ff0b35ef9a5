"""The run store: every run, its databases' verdicts and report entries, behind SQLAlchemy.

SQLite in the state folder by default; any SQLAlchemy URL (PostgreSQL for a team) by
configuration. Later work (calibration, drift, the Airflow page) reads history from here.
The schema is made and upgraded by the Alembic migrations in verification/results/migrations.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from pydantic import TypeAdapter
from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    create_engine,
    event,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from verification.config import ResultsRetrySettings
from verification.errors import ConfigError, RunFinishedError, StaleDiscoveryError, StoreUnavailableError
from verification.model import DatabaseIdentity, IncompleteUpload, RestorePlan, RunResult, UnreadableFile
from verification.redaction import MASK
from verification.report_model import DatabaseEntry
from verification.results import migrations
from verification.results.identity import LATEST, Match, comparable, match, point_of

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from verification.results.summaries import DailyRecovery, ListedRun, RunPage, RunSummary

_UNREADABLE = TypeAdapter(list[UnreadableFile])
_UPLOADS = TypeAdapter(list[IncompleteUpload])
# Keys of the run row's host facts: every file not read, the discovery the run's plans and entries
# belong to, the source's unfinished multipart uploads (object storage), and each planned object as
# discovery listed it ({path: {"url", "size", "etag"}}, object storage only): what every later step,
# in any process, holds its own listing to.
UNREADABLE, DISCOVERY, INCOMPLETE_UPLOADS = "unreadable", "discovery", "incomplete_uploads"
PLANNED_OBJECTS = "planned_objects"
# The databases a run's discovery found due (a name without an entry at publication is "not verified").
DUE = "due"
_PLAN = TypeAdapter(RestorePlan)
T = TypeVar("T")


def folder_key(folder: Path) -> str:
    """A report folder as the run rows keep it (report_folder): absolute, not resolved through links,
    as every process sharing the folder names it."""
    return os.path.abspath(folder)


def unreadable_json(files: list[UnreadableFile]) -> list[Any]:
    """Unread files as the run row's host facts keep them (JSON), read back by `unreadable_of`."""
    return list(_UNREADABLE.dump_python(files, mode="json"))


def unreadable_of(host: dict[str, Any]) -> list[UnreadableFile]:
    return _UNREADABLE.validate_python(host.get(UNREADABLE, []))


def uploads_json(uploads: list[IncompleteUpload]) -> list[Any]:
    return list(_UPLOADS.dump_python(uploads, mode="json"))


def uploads_of(host: dict[str, Any]) -> list[IncompleteUpload]:
    return _UPLOADS.validate_python(host.get(INCOMPLETE_UPLOADS, []))


def in_rotation(items: Sequence[T], rotation: dict[str, tuple[bool, datetime | None]],
                key: Callable[[T], str]) -> list[T]:
    """`items` in the order a run takes them (ResultStore.rotation): those whose newest entry is an
    error first, then the never verified, then the least recently verified; ties keep their order."""
    never = datetime.min.replace(tzinfo=UTC)

    def rank(item: T) -> tuple[int, datetime]:
        errored, last = rotation.get(key(item), (False, None))
        return (0 if errored else 1 if last is None else 2), last or never

    return sorted(items, key=rank)


@dataclass(frozen=True)
class StoredEntry:
    """A database's report entry as the store keeps it, with its run's id, start and source."""

    run_id: str
    started_at: datetime
    source: str
    entry: DatabaseEntry

    def match(self, identity: DatabaseIdentity) -> Match | None:
        return match(identity, self.source, self.entry)


@dataclass(frozen=True)
class StoredBaseline:
    """The baseline a verification is held to: the data_baseline details of a passed verification of
    a comparable point, which run it was, the point, and how that run was found to be this database's."""

    details: dict[str, Any]
    run_id: str
    started_at: datetime
    point: str
    matched: Match


def _rows_of(identity: DatabaseIdentity, identity_column: Any, name_column: Any) -> Any:
    """The SQL condition for an identity's rows: its key, or (rows recorded before identities were kept)
    its name in a run of its source. The caller joins RunRow."""
    return or_(identity_column == identity.key,
               identity_column.is_(None) & (name_column == identity.name) & (RunRow.source == identity.source))


class UtcDateTime(TypeDecorator[datetime]):
    """Timestamps stored and read as UTC, aware, whatever the database: SQLite keeps no zone and
    returns naive values, PostgreSQL converts to the session's zone. A naive value is refused on the
    way in, so nothing local-time can be stored by mistake."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"a timestamp without a zone cannot be stored: {value.isoformat()}")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), unique=True, index=True)
    engine: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(Text)
    target_kind: Mapped[str | None] = mapped_column(String(32))
    verdict: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    report_dir: Mapped[str | None] = mapped_column(Text)
    # The folder report_dir sits in (where index.html lists it), absolute: one indexed comparison finds a
    # folder's runs (revision 0004).
    report_folder: Mapped[str | None] = mapped_column(Text)
    host: Mapped[dict[str, Any]] = mapped_column(default=dict)
    databases: Mapped[list[DatabaseRow]] = relationship(back_populates="run", cascade="all, delete-orphan")
    # The listings' orders (verification.results.summaries): a folder's runs by start, and every run by start.
    __table_args__ = (Index("ix_runs_report_folder_started", "report_folder", "started_at", "run_id"),
                      Index("ix_runs_started", "started_at", "run_id"))


class DatabaseRow(Base):
    __tablename__ = "databases"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    database: Mapped[str] = mapped_column(String(256), index=True)
    verdict: Mapped[str] = mapped_column(String(16))
    reasons: Mapped[list[Any]] = mapped_column(default=list)
    restore_target: Mapped[str] = mapped_column(String(64))
    restore_achieved: Mapped[datetime | None] = mapped_column(UtcDateTime())
    recovery_seconds: Mapped[float | None] = mapped_column(Float)
    target: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # DatabaseIdentity.key (revision 0006); None on rows recorded before: matched by source and name.
    identity: Mapped[str | None] = mapped_column(String(64), index=True)
    run: Mapped[RunRow] = relationship(back_populates="databases")


class PlanRow(Base):
    """A database's restore plan as the run's discovery made it: planned once per run, read by every
    task that verifies a database of it (a scheduler's workers plan nothing again)."""

    __tablename__ = "run_plans"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    database: Mapped[str] = mapped_column(String(256))
    position: Mapped[int] = mapped_column(Integer)
    plan: Mapped[dict[str, Any]] = mapped_column(default=dict)


class DatabaseReportRow(Base):
    """A database's report.json entry as written, so a report can be assembled from the store by
    whichever worker publishes it (nothing is passed between tasks on a local disk)."""

    __tablename__ = "database_reports"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    database: Mapped[str] = mapped_column(String(256))
    report: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # DatabaseIdentity.key (revision 0006); None on rows recorded before: matched by source and name.
    identity: Mapped[str | None] = mapped_column(String(64), index=True)


class RunLeaseRow(Base):
    """A lease on a run: a process working for it (the CLI's whole run, or one task of a scheduler's
    run), renewed by its heartbeat while it works and released when it is done. A lease neither
    released nor renewed names a worker that died at work (revision 0005). Keyed by the run id, not
    the run's row: a process holds its lease before its discovery makes the row, and a run
    discovered again keeps the leases of its earlier start (their holders may still be at work)."""

    __tablename__ = "run_leases"
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), index=True)
    # The holder: its worker (host name or configured name), pid and process identity (boot, pid
    # namespace, start time: verification.targets.lease).
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    process: Mapped[str] = mapped_column(String(128))
    scope: Mapped[str] = mapped_column(String(16))
    # The database it works on and what it said it was doing, as of its last heartbeat.
    database: Mapped[str | None] = mapped_column(String(256))
    phase: Mapped[str | None] = mapped_column(Text)
    # The run's discovery the holder works from (a killed task's database is recorded only in it).
    generation: Mapped[str | None] = mapped_column(String(32))
    lease_seconds: Mapped[float] = mapped_column(Float)
    # Times by the store's own clock, so hosts whose clocks differ still agree on what is stale.
    acquired_at: Mapped[datetime] = mapped_column(UtcDateTime())
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime())
    released_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), index=True)
    # How it ended: "released", the exception that ended the work, or "killed: <why>" by a reaper.
    ended: Mapped[str | None] = mapped_column(Text)


log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
# The execution option that makes a SQLite transaction take the write lock when it begins.
_WRITES = "restoreproof_writes"


def unreachable(exc: BaseException) -> bool:
    """An error of the way to the store, not of what was asked of it: a connection refused or lost, a
    server shutting down or starting up, a SQLite file locked by another process. Worth trying again."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def _retried(method: Callable[Concatenate[ResultStore, P], R]) -> Callable[Concatenate[ResultStore, P], R]:
    """The method tried again whole (one short transaction) while the store does not answer."""

    def tried(self: ResultStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.retrying(functools.partial(method, self, *args, **kwargs), method.__name__)

    tried.__name__, tried.__qualname__, tried.__doc__ = method.__name__, method.__qualname__, method.__doc__
    return tried


def _sqlite_connect(busy_timeout: float, dbapi_connection: Any, _record: Any) -> None:
    """Several runs write one SQLite file at once (three CLI runs, an Airflow run's tasks): write-ahead
    logging lets readers go on beside the one writer, and a writer waits up to `busy_timeout` for
    another's lock instead of failing at once. pysqlite's own BEGIN is turned off: `_sqlite_begin`
    says when a transaction begins, as SQLAlchemy's pysqlite documentation recommends."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
    finally:
        cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    # A transaction that will write takes the write lock at once (waiting for it under busy_timeout):
    # one that read first and then asked for it could only fail, as SQLite cannot wait for a lock
    # while holding an older snapshot.
    connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get(_WRITES) else "BEGIN")


def _opened(url: str) -> tuple[URL, Engine]:
    """The store's URL and engine, or a ConfigError naming the setting: a URL that is not one, a database
    kind with no driver here, a SQLite folder that cannot be made are the operator's to fix."""
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            Path(parsed.database or "").expanduser().parent.mkdir(parents=True, exist_ok=True)
        return parsed, create_engine(parsed)
    except NoSuchModuleError as exc:  # an ArgumentError too: first
        raise ConfigError(f"results_url {_masked(url)} names a kind of database restoreproof has no driver for: "
                          "use postgresql+psycopg:// or sqlite:///") from exc
    except ArgumentError as exc:
        raise ConfigError(f"results_url {_masked(url)} is not a database URL (dialect+driver://user:password@host/"
                          "database, or sqlite:////path/results.db)") from exc
    except OSError as exc:
        raise ConfigError(f"results_url {_masked(url)}: the folder of the SQLite file cannot be made "
                          f"({exc.strerror}); name a folder this user may write") from exc


def _masked(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return repr(url) if "@" not in url else "(a value holding '@', not shown)"


class ResultStore:
    def __init__(self, url: str, retry: ResultsRetrySettings | None = None) -> None:
        self.url, self.engine = _opened(url)
        self.retry = retry or ResultsRetrySettings()
        if self.engine.dialect.name == "sqlite" and self.url.database not in (None, "", ":memory:"):
            event.listen(self.engine, "connect", functools.partial(_sqlite_connect, self.retry.sqlite_busy_timeout))
            event.listen(self.engine, "begin", _sqlite_begin)
        # The same engine and pool, for the transactions that write.
        self.writer: Engine = self.engine.execution_options(**{_WRITES: True})
        self.retrying(lambda: migrations.upgrade(self.engine), "opening the store")

    def close(self) -> None:
        self.engine.dispose()

    def retrying(self, call: Callable[[], R], what: str) -> R:
        """`call` tried up to results_retry.attempts times with exponential waits while the store does not
        answer; then a StoreUnavailableError naming the store (password masked) and the last error."""
        settings, started = self.retry, time.monotonic()
        where = migrations.masked(self.url)

        def waiting(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            log.warning("the results store %s did not answer (%s: %s); trying again in %.1f s (try %d of %d)",
                        where, what, self._said(exc), wait, state.attempt_number + 1, settings.attempts)

        try:
            for attempt in Retrying(stop=stop_after_attempt(settings.attempts),
                                    wait=wait_exponential(multiplier=settings.first_wait, max=settings.max_wait),
                                    retry=retry_if_exception(unreachable), before_sleep=waiting, reraise=True):
                with attempt:
                    return call()
        except DBAPIError as exc:
            if not unreachable(exc):
                raise
            raise StoreUnavailableError(
                f"the results store {where} did not answer ({what}) after {settings.attempts} tries over "
                f"{time.monotonic() - started:.0f} s (results_retry): {self._said(exc)}") from None
        raise AssertionError("tenacity neither returned nor raised")  # pragma: no cover

    def _said(self, exc: BaseException | None) -> str:
        """The driver's own first line (never SQLAlchemy's statement and parameters), password masked."""
        if exc is None:
            return "no error"
        cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        line = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
        said = f"{type(cause).__name__}: {line}" if line else type(cause).__name__
        password = self.url.password
        return said.replace(str(password), MASK) if password else said

    @_retried
    def start_run(self, run: RunResult, report_dir: Path | None = None) -> None:
        """The run's row (verdict "running"); `report_dir` is the run's own folder, where its evidence
        and reports go whichever process writes them. A run started again under the same id (a
        scheduler's run discovered again) starts anew: its row takes the new facts, and every plan and
        entry of the earlier start is deleted, so nothing verified from an earlier plan can be
        published as this start's result."""
        with Session(self.writer) as session, session.begin():
            old = session.scalar(select(RunRow).where(RunRow.run_id == run.run_id))
            if old is not None:
                for table in (PlanRow, DatabaseReportRow):
                    for row in session.scalars(select(table).where(table.run_pk == old.id)):
                        session.delete(row)
                session.delete(old)
                session.flush()
            session.add(RunRow(run_id=run.run_id, engine=run.engine, source=run.source, target_kind=run.target_kind,
                               verdict="running", started_at=run.started_at,
                               report_dir=str(report_dir) if report_dir else None,
                               report_folder=folder_key(report_dir.parent) if report_dir else None,
                               host={**run.host, UNREADABLE: unreadable_json(run.unreadable),
                                     # only where there are some: a folder's run row is as before
                                     **({INCOMPLETE_UPLOADS: uploads_json(run.incomplete_uploads)}
                                        if run.incomplete_uploads else {})}))

    @_retried
    def set_target_kind(self, run_id: str, kind: str) -> None:
        """The kind of target the run's restores got (what "auto" became)."""
        with Session(self.writer) as session, session.begin():
            self._run_row(session, run_id).target_kind = kind

    @_retried
    def add_run_facts(self, run_id: str, facts: dict[str, Any]) -> None:
        """Facts added to the run row's host facts (what a run learns of itself after it started)."""
        with Session(self.writer) as session, session.begin():
            run = self._run_row(session, run_id)
            run.host = {**run.host, **facts}  # a new dict: the JSON column sees no change made in place

    @_retried
    def record_plans(self, run_id: str, plans: list[RestorePlan]) -> None:
        """The run's plans, in the order they were made; replaces any recorded before."""
        with Session(self.writer) as session, session.begin():
            run = self._run_row(session, run_id)
            for old in session.scalars(select(PlanRow).where(PlanRow.run_pk == run.id)):
                session.delete(old)
            session.add_all(PlanRow(run_pk=run.id, database=plan.database, position=position,
                                    plan=_PLAN.dump_python(plan, mode="json")) for position, plan in enumerate(plans))

    @_retried
    def plans(self, run_id: str) -> list[RestorePlan]:
        """The run's plans as discovery recorded them, in its order."""
        with Session(self.engine) as session:
            run = self._run_row(session, run_id)
            rows = session.scalars(select(PlanRow).where(PlanRow.run_pk == run.id).order_by(PlanRow.position))
            return [_PLAN.validate_python(row.plan) for row in rows]

    @staticmethod
    def _run_row(session: Session, run_id: str) -> RunRow:
        run = session.scalar(select(RunRow).where(RunRow.run_id == run_id))
        if run is None:
            raise KeyError(f"run {run_id} was not started in the results store")
        return run

    @_retried
    def record_database(self, run_id: str, entry: DatabaseEntry, discovery: str | None = None) -> None:
        """One database's report entry. Replaces an earlier try's. With `discovery`, only while the run
        is still that discovery's (a task of a discovery since replaced records nothing)."""
        with Session(self.writer) as session, session.begin():
            run = self._current_run(session, run_id, discovery)
            self._delete_entry(session, run, entry.database)
            self._add_entry(session, run, entry)

    @_retried
    def forget_database(self, run_id: str, database: str, discovery: str | None = None) -> None:
        """Delete a database's entry before it is verified again: a try that dies leaves no result
        (the run then names it not verified), never the previous try's."""
        with Session(self.writer) as session, session.begin():
            self._delete_entry(session, self._current_run(session, run_id, discovery), database)

    def _current_run(self, session: Session, run_id: str, discovery: str | None) -> RunRow:
        """The run to record into: refused once finished (its report is published, perhaps by another
        worker's sweep that took this one for dead: a late result must not change what was published)."""
        run = self._run_row(session, run_id)
        if run.finished_at is not None:
            raise RunFinishedError(f"run {run_id} was already finished at {run.finished_at.isoformat()} "
                                   f"({run.verdict}; ended by its publication or by another worker's sweep "
                                   "that judged this worker killed): nothing recorded")
        if discovery is not None and run.host.get(DISCOVERY) != discovery:
            raise StaleDiscoveryError(f"run {run_id} was discovered again since this step started (discovery "
                                      f"{discovery}, now {run.host.get(DISCOVERY)}): nothing recorded")
        return run

    @staticmethod
    def _add_entry(session: Session, run: RunRow, entry: DatabaseEntry) -> None:
        key = entry.identity.key if entry.identity is not None else None
        session.add(DatabaseRow(run_pk=run.id, database=entry.database, verdict=str(entry.verdict),
                                reasons=entry.reasons, restore_target=entry.restore_point.target,
                                restore_achieved=entry.restore_point.achieved,
                                recovery_seconds=entry.recovery_seconds, target=entry.target, identity=key))
        session.add(DatabaseReportRow(run_pk=run.id, database=entry.database, report=entry.model_dump(mode="json"),
                                      identity=key))

    @staticmethod
    def _delete_entry(session: Session, run: RunRow, database: str) -> None:
        for old in [d for d in run.databases if d.database == database]:
            session.delete(old)
        for old_report in session.scalars(select(DatabaseReportRow).where(
                DatabaseReportRow.run_pk == run.id, DatabaseReportRow.database == database)):
            session.delete(old_report)

    @_retried
    def finish_run(self, run_id: str, finished_at: datetime, verdict: str) -> None:
        with Session(self.writer) as session, session.begin():
            run = self._run_row(session, run_id)
            run.finished_at, run.verdict = finished_at, verdict

    @_retried
    def run_with_reports(self, run_id: str) -> tuple[RunRow, list[DatabaseEntry]]:
        """A run and its databases' report entries, in the order they were recorded."""
        with Session(self.engine, expire_on_commit=False) as session:
            run = session.scalar(select(RunRow).where(RunRow.run_id == run_id))
            if run is None:
                raise KeyError(f"run {run_id} is not in the results store")
            rows = session.scalars(select(DatabaseReportRow).where(DatabaseReportRow.run_pk == run.id)
                                   .order_by(DatabaseReportRow.id))
            return run, [DatabaseEntry.model_validate(row.report) for row in rows]

    @_retried
    def last_verified(self) -> dict[str, datetime]:
        """Per database, when it was last verified to a verdict on its backups (passed or failed): the
        rotation order's key. An "error" (restoreproof could not finish) does not count as verified."""
        with Session(self.engine) as session:
            query = (select(DatabaseRow.database, RunRow.started_at).join(RunRow)
                     .where(DatabaseRow.verdict != "error").order_by(RunRow.started_at))
            return {name: started for name, started in session.execute(query)}

    @_retried
    def last_passed(self, source: str | None = None) -> dict[str, datetime]:
        """Per database, the start of the newest run in which it passed (the metrics' last success); of
        `source`'s runs alone when given (a database of another source with the same name is not it)."""
        with Session(self.engine) as session:
            query = (select(DatabaseRow.database, RunRow.started_at).join(RunRow)
                     .where(DatabaseRow.verdict == "passed").order_by(RunRow.started_at))
            if source is not None:
                query = query.where(RunRow.source == source)
            return {name: started for name, started in session.execute(query)}

    @_retried
    def report_entries(self, *, engine: str | None = None, database: str | None = None,
                       limit: int = 500) -> list[tuple[str, datetime, DatabaseEntry]]:
        """Databases' report entries as recorded, newest run first: (run id, run start, entry).

        Calibration and drift read these: an entry holds the measured phases and what the plan said
        each would move, in the shape the model predicts from."""
        with Session(self.engine) as session:
            query = (select(RunRow.run_id, RunRow.started_at, DatabaseReportRow.report)
                     .join(RunRow, DatabaseReportRow.run_pk == RunRow.id)
                     .order_by(RunRow.started_at.desc(), DatabaseReportRow.id.desc()).limit(limit))
            if engine is not None:
                query = query.where(RunRow.engine == engine)
            if database is not None:
                query = query.where(DatabaseReportRow.database == database)
            return [(run_id, started, DatabaseEntry.model_validate(report))
                    for run_id, started, report in session.execute(query)]

    @_retried
    def last_passed_baseline(self, identity: DatabaseIdentity, point: str = LATEST) -> StoredBaseline | None:
        """The data_baseline of the newest verification of `identity` to a point comparable with `point`
        (results.identity: both latest, or the same moment) that passed with its baseline check
        passed: what a verification of `point` is held to. However many runs failed since, that one
        still counts (a failure never resets the baseline). None: no comparable verification passed,
        and this one records the first baseline of its point."""
        with Session(self.engine) as session:
            query = (select(RunRow.run_id, RunRow.started_at, RunRow.source, DatabaseReportRow.report)
                     .join(RunRow, DatabaseReportRow.run_pk == RunRow.id)
                     .where(_rows_of(identity, DatabaseReportRow.identity, DatabaseReportRow.database))
                     .order_by(RunRow.started_at.desc(), DatabaseReportRow.id.desc()))
            for run_id, started, source, report in session.execute(query):
                if report.get("verdict") != "passed":
                    continue
                entry = DatabaseEntry.model_validate(report)
                how = match(identity, source, entry)
                if how is None or not comparable(point, point_of(entry)):
                    continue
                for check in entry.checks:
                    if check.name == "data_baseline" and check.status == "passed":
                        return StoredBaseline(dict(check.details), run_id, started, point_of(entry), how)
        return None

    @_retried
    def history(self, *, engine: str | None = None, identity: DatabaseIdentity | None = None,
                limit: int = 500) -> list[StoredEntry]:
        """Databases' report entries with their run's source, newest run first (of `identity` alone when
        given, as results.identity matches them): what calibration, drift and the history charts read."""
        with Session(self.engine) as session:
            query = (select(RunRow.run_id, RunRow.started_at, RunRow.source, DatabaseReportRow.report)
                     .join(RunRow, DatabaseReportRow.run_pk == RunRow.id)
                     .order_by(RunRow.started_at.desc(), DatabaseReportRow.id.desc()).limit(limit))
            if engine is not None:
                query = query.where(RunRow.engine == engine)
            if identity is not None:
                query = query.where(_rows_of(identity, DatabaseReportRow.identity, DatabaseReportRow.database))
            found = [StoredEntry(run_id, started, source, DatabaseEntry.model_validate(report))
                     for run_id, started, source, report in session.execute(query)]
        return [row for row in found if identity is None or row.match(identity) is not None]

    @_retried
    def known_databases(self) -> list[DatabaseIdentity]:
        """Every database the store has entries of: each identity as its newest entry names it, and each
        source and name of entries recorded before identities were kept that no identity covers (as an
        identity with no system id, whose history() finds those entries by source and name)."""
        with Session(self.engine) as session:
            newest = (select(func.max(DatabaseReportRow.id)).where(DatabaseReportRow.identity.is_not(None))
                      .group_by(DatabaseReportRow.identity))
            reports = session.scalars(select(DatabaseReportRow.report).where(DatabaseReportRow.id.in_(newest)))
            found = [i for i in (DatabaseEntry.model_validate(report).identity for report in reports) if i is not None]
            covered = {(i.source, i.name) for i in found}
            older = session.execute(select(RunRow.source, DatabaseReportRow.database).distinct()
                                    .join(RunRow, DatabaseReportRow.run_pk == RunRow.id)
                                    .where(DatabaseReportRow.identity.is_(None)))
            found += [DatabaseIdentity(source, name) for source, name in older if (source, name) not in covered]
        return sorted(found, key=lambda i: (i.name, i.source, i.key))

    @_retried
    def run(self, run_id: str) -> RunRow | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.scalar(select(RunRow).where(RunRow.run_id == run_id))

    @_retried
    def recent_runs(self, limit: int = 20) -> list[RunRow]:
        with Session(self.engine, expire_on_commit=False) as session:
            return list(session.scalars(select(RunRow).order_by(RunRow.started_at.desc()).limit(limit)))

    # Leases: who works for which run, and whether they still do (verification.leases).

    @staticmethod
    def _now(session: Session) -> datetime:
        """The store's clock: one clock for every host that shares the store."""
        now: datetime | None = session.scalar(select(func.now(type_=UtcDateTime())))
        assert now is not None
        return now

    @_retried
    def now(self) -> datetime:
        with Session(self.engine) as session:
            return self._now(session)

    @_retried
    def take_lease(self, run_id: str, *, host: str, pid: int, process: str, scope: str, lease_seconds: float,
                   database: str | None = None, generation: str | None = None) -> int:
        """A new lease on the run for this holder; its id."""
        with Session(self.writer) as session, session.begin():
            now = self._now(session)
            row = RunLeaseRow(run_id=run_id, host=host[:255], pid=pid, process=process[:128], scope=scope,
                              database=database, generation=generation, lease_seconds=lease_seconds,
                              acquired_at=now, heartbeat_at=now)
            session.add(row)
            session.flush()
            return row.id

    @_retried
    def renew_lease(self, lease_id: int, *, database: str | None, phase: str | None,
                    generation: str | None = None) -> datetime:
        """The holder's heartbeat, with what it is doing now; the time it was taken at."""
        with Session(self.writer) as session, session.begin():
            row = session.get(RunLeaseRow, lease_id)
            if row is None:
                raise KeyError(f"lease {lease_id} is not in the results store")
            row.heartbeat_at = self._now(session)
            row.database, row.phase = database, phase
            if generation is not None:
                row.generation = generation
            return row.heartbeat_at

    @_retried
    def release_lease(self, lease_id: int, ended: str, claim: str | None = None) -> bool:
        """End a lease, once: False when it had ended already (its holder released it, or another
        reaper ended it first). One conditional UPDATE, so of two processes ending it at the same
        moment exactly one is told it did (PostgreSQL re-checks the condition after the row lock).

        `claim`: the ender's own id (a sweep's), kept in `ended`. The same claim ending it again is
        told it did: a try whose commit went through but whose answer was lost (the store retried)
        must not leave the sweep thinking another ended it, and the killed run open for ever."""
        said = f"{ended} (sweep {claim})" if claim else ended
        with Session(self.writer) as session, session.begin():
            now = self._now(session)
            unended = RunLeaseRow.released_at.is_(None)
            done = session.execute(update(RunLeaseRow).where(
                RunLeaseRow.id == lease_id, unended | (RunLeaseRow.ended == said) if claim else unended)
                .values(released_at=now, ended=said))
            return bool(getattr(done, "rowcount", 0) == 1)

    @_retried
    def leases(self, run_ids: Iterable[str] | None = None, *, open_only: bool = False) -> list[RunLeaseRow]:
        """The leases of these runs (of every run when None), oldest first; only those not released
        with `open_only`."""
        with Session(self.engine, expire_on_commit=False) as session:
            query = select(RunLeaseRow).order_by(RunLeaseRow.id)
            if run_ids is not None:
                query = query.where(RunLeaseRow.run_id.in_(list(run_ids)))
            if open_only:
                query = query.where(RunLeaseRow.released_at.is_(None))
            return list(session.scalars(query))

    @_retried
    def runs(self, run_ids: Iterable[str]) -> dict[str, RunRow]:
        with Session(self.engine, expire_on_commit=False) as session:
            return {row.run_id: row for row in session.scalars(select(RunRow).where(RunRow.run_id.in_(list(run_ids))))}

    @_retried
    def recorded(self, run_id: str) -> set[str]:
        """The databases the run has an entry for."""
        with Session(self.engine) as session:
            run = self._run_row(session, run_id)
            return set(session.scalars(select(DatabaseReportRow.database).where(DatabaseReportRow.run_pk == run.id)))

    @_retried
    def record_if_absent(self, run_id: str, entry: DatabaseEntry, discovery: str | None = None) -> bool:
        """A database's entry, only if the run has none for it yet (what was recorded is never
        replaced by what a reaper concludes); False when it had one."""
        with Session(self.writer) as session, session.begin():
            run = self._current_run(session, run_id, discovery)
            if any(d.database == entry.database for d in run.databases):
                return False
            self._add_entry(session, run, entry)
            return True

    @_retried
    def rotation(self, identities: Sequence[DatabaseIdentity]) -> dict[str, tuple[bool, datetime | None]]:
        """Per identity's key: whether its newest entry is an "error" (restoreproof could not finish it:
        killed, timed out, no target), and when it was last verified to a verdict (None: never). The
        order of a run's databases: errors first, then never verified, then least recently. A database
        of another source, or another cluster under the same name, does not move this one's place;
        rows recorded before identities were kept count by their run's source and name."""
        by_key = {identity.key: identity.key for identity in identities}
        by_name = {(identity.source, identity.name): identity.key for identity in identities}
        newest: dict[str, str] = {}
        last: dict[str, datetime] = {}
        with Session(self.engine) as session:
            query = (select(DatabaseRow.identity, RunRow.source, DatabaseRow.database, DatabaseRow.verdict,
                            RunRow.started_at).join(RunRow).order_by(RunRow.started_at, DatabaseRow.id))
            for key, source, name, verdict, started in session.execute(query):
                mine = by_key.get(key) if key is not None else by_name.get((source, name))
                if mine is None:
                    continue
                newest[mine] = verdict
                if verdict != "error":
                    last[mine] = started
        return {key: (verdict == "error", last.get(key)) for key, verdict in newest.items()}

    # The listings (verification.results.summaries; imported here, as it maps this module's tables).

    @_retried
    def run_page(self, number: int = 1, size: int = 50, *, folder: Path | None = None,
                 finished_only: bool = False) -> RunPage:
        """Page `number` of the runs' summaries, newest first (of `folder`'s runs when given)."""
        from verification.results.summaries import run_page

        return run_page(self.engine, number, size, folder=folder, finished_only=finished_only)

    @_retried
    def run_summaries(self, run_ids: Sequence[str]) -> list[RunSummary]:
        from verification.results.summaries import run_summaries

        return run_summaries(self.engine, run_ids)

    @_retried
    def run_listing(self, folder: Path) -> list[ListedRun]:
        """Every run recorded in `folder` (running ones too), oldest first."""
        from verification.results.summaries import listing

        return listing(self.engine, folder)

    @_retried
    def run_starts(self, run_ids: Sequence[str]) -> dict[str, datetime]:
        from verification.results.summaries import run_starts

        return run_starts(self.engine, run_ids)

    @_retried
    def daily_recovery(self, folder: Path) -> list[DailyRecovery]:
        from verification.results.summaries import daily_recovery

        return daily_recovery(self.engine, folder)

    @_retried
    def newest_rto_targets(self, folder: Path, databases: Iterable[str]) -> dict[str, float]:
        from verification.results.summaries import newest_rto_targets

        return newest_rto_targets(self.engine, folder, databases)

    @_retried
    def report_folders(self) -> list[str]:
        from verification.results.summaries import report_folders

        return report_folders(self.engine)
