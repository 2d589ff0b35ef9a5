"""Run summaries for the listings (index.html, the Airflow page): what a list of runs shows, paged.

A listing of 10,000 runs must not read 10,000 reports: each query here touches one page of runs (by the
indexes of revision 0004), or the folder's run ids, or aggregates in the database. Of a database's report
entry, kept whole as JSON, only the two fields a listing shows are read (whether the RTO was met, the
drift alerts), by JSON path, so an entry's history and evidence never leave the database.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import ColumnElement, String, and_, func, select, true, type_coerce
from sqlalchemy.engine import Engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from verification.results.store import DUE, DatabaseReportRow, DatabaseRow, RunRow, folder_key

VERDICTS = ("passed", "failed", "error")


@dataclass(frozen=True)
class DatabaseSummary:
    database: str
    verdict: str
    recovery_seconds: float | None
    rto_met: bool | None  # None: no RTO set, or a report without objectives
    alerts: int


@dataclass(frozen=True)
class RunSummary:
    """One run as a listing shows it: its row, and per database the verdict, recovery and alerts."""

    run_id: str
    engine: str
    source: str
    verdict: str
    started_at: datetime
    finished_at: datetime | None
    report_dir: str | None
    databases: tuple[DatabaseSummary, ...]
    not_verified: int  # databases due without an entry (the report's not_verified)

    def count(self, verdict: str) -> int:
        return sum(1 for d in self.databases if d.verdict == verdict)


@dataclass(frozen=True)
class RunPage:
    """Page `number` (from 1) of `size` runs, newest first, out of `total`."""

    runs: list[RunSummary]
    number: int
    size: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.size))


@dataclass(frozen=True)
class ListedRun:
    """A run as the folder listing needs it: to know it, and to tell whether its page must be written again.
    `finished` is the finish as the database returns it (text or a time, by dialect), None while running:
    compared, never shown, so 10,000 of them are not each made a time."""

    run_id: str
    finished: object
    verdict: str


@dataclass(frozen=True)
class DailyRecovery:
    """One database's recoveries on one UTC day: how many runs verified it, how many of those brought it
    online, and their recovery seconds (mean, min, max over those; None when none did)."""

    database: str
    day: date
    runs: int
    online: int
    mean_seconds: float | None
    min_seconds: float | None
    max_seconds: float | None


class UtcDay(FunctionElement[str]):
    """YYYY-MM-DD of a UtcDateTime column, in UTC, in the database's own words."""

    type = String()
    inherit_cache = True


@compiles(UtcDay, "sqlite")
def _utc_day_sqlite(element: UtcDay, compiler: SQLCompiler, **kw: Any) -> str:
    # SQLite keeps the UTC time as text 'YYYY-MM-DD HH:MM:SS.ffffff' (UtcDateTime converts before storing).
    return f"substr({compiler.process(element.clauses, **kw)}, 1, 10)"


@compiles(UtcDay, "postgresql")
def _utc_day_postgresql(element: UtcDay, compiler: SQLCompiler, **kw: Any) -> str:
    # timestamptz: the day in UTC, whatever the session's time zone.
    return f"to_char(({compiler.process(element.clauses, **kw)}) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"


@compiles(UtcDay)
def _utc_day_other(element: UtcDay, compiler: SQLCompiler, **kw: Any) -> str:
    return f"CAST(CAST({compiler.process(element.clauses, **kw)} AS DATE) AS VARCHAR(10))"


def _in_folder(folder: Path | None, finished_only: bool) -> ColumnElement[bool]:
    conditions: list[ColumnElement[bool]] = []
    if folder is not None:
        conditions.append(RunRow.report_folder == folder_key(folder))
    if finished_only:
        conditions.append(RunRow.finished_at.is_not(None))
    return and_(true(), *conditions)


# A run's own columns a listing shows: not its facts (`host`), which may hold every object discovery listed.
_RUN_COLUMNS = (RunRow.id, RunRow.run_id, RunRow.engine, RunRow.source, RunRow.verdict, RunRow.started_at,
                RunRow.finished_at, RunRow.report_dir)


def run_page(engine: Engine, number: int, size: int, *, folder: Path | None = None,
             finished_only: bool = False) -> RunPage:
    """Page `number` of the runs newest first (by start, then run id): of `folder`'s runs when given, of
    every run otherwise; `finished_only` leaves out runs still running. A page past the last is empty."""
    if number < 1 or size < 1:
        raise ValueError(f"page {number} of {size} runs: pages and sizes start at 1")
    where = _in_folder(folder, finished_only)
    with Session(engine) as session:
        total = session.scalar(select(func.count()).select_from(RunRow).where(where)) or 0
        rows = list(session.execute(select(*_RUN_COLUMNS).where(where)
                                    .order_by(RunRow.started_at.desc(), RunRow.run_id.desc())
                                    .offset((number - 1) * size).limit(size)))
        return RunPage(_summaries(session, rows), number, size, total)


def run_summaries(engine: Engine, run_ids: Sequence[str]) -> list[RunSummary]:
    """The runs named, in the order named (ids not in the store are left out)."""
    with Session(engine) as session:
        rows = {row[1]: row for row in
                session.execute(select(*_RUN_COLUMNS).where(RunRow.run_id.in_(run_ids)))}
        return _summaries(session, [rows[run_id] for run_id in run_ids if run_id in rows])


_RunColumns = tuple[int, str, str, str, str, datetime, datetime | None, str | None]


def _summaries(session: Session, rows: Sequence[_RunColumns]) -> list[RunSummary]:
    """The rows' summaries with two queries for the whole page: their databases, their databases due."""
    keys = [row[0] for row in rows]
    report = DatabaseReportRow.report
    found = session.execute(
        select(DatabaseRow.run_pk, DatabaseRow.database, DatabaseRow.verdict, DatabaseRow.recovery_seconds,
               report[("objectives", "rto", "met")], report[("drift", "alerts")])
        .outerjoin(DatabaseReportRow, and_(DatabaseReportRow.run_pk == DatabaseRow.run_pk,
                                           DatabaseReportRow.database == DatabaseRow.database))
        .where(DatabaseRow.run_pk.in_(keys)).order_by(DatabaseRow.id))
    databases: dict[int, list[DatabaseSummary]] = {key: [] for key in keys}
    for run_pk, name, verdict, seconds, met, alerts in found:
        databases[run_pk].append(DatabaseSummary(name, verdict, seconds, None if met is None else bool(met),
                                                 len(alerts) if isinstance(alerts, list) else 0))
    # Of the run facts, only the list of databases due (by JSON path).
    due: dict[int, Any] = {pk: names for pk, names in
                           session.execute(select(RunRow.id, RunRow.host[DUE]).where(RunRow.id.in_(keys)))}
    summaries = []
    for pk, run_id, engine_name, source, verdict, started, finished, report_dir in rows:
        recorded = {d.database for d in databases[pk]}
        names = due.get(pk)
        missing = [name for name in names if name not in recorded] if isinstance(names, list) else []
        summaries.append(RunSummary(run_id, engine_name, source, verdict, started, finished, report_dir,
                                    tuple(databases[pk]), len(missing)))
    return summaries


def listing(engine: Engine, folder: Path) -> list[ListedRun]:
    """Every run recorded in `folder`, running or not, oldest first: ids and what changes a listed run.
    Read by a plain connection, not a session: 10,000 rows, and an ORM session's bookkeeping per row
    doubled the time."""
    finished = type_coerce(RunRow.finished_at, String)  # as stored: no time made of it
    with engine.connect() as connection:
        rows = connection.execute(select(RunRow.run_id, finished, RunRow.verdict)
                                  .where(_in_folder(folder, False)).order_by(RunRow.started_at, RunRow.run_id))
        return [ListedRun(*row) for row in rows]


def run_starts(engine: Engine, run_ids: Sequence[str]) -> dict[str, datetime]:
    """When each run named started (ids not in the store are left out)."""
    with engine.connect() as connection:
        return {run_id: started for run_id, started in
                connection.execute(select(RunRow.run_id, RunRow.started_at).where(RunRow.run_id.in_(run_ids)))}


def daily_recovery(engine: Engine, folder: Path) -> list[DailyRecovery]:
    """Per database and UTC day, the recoveries of `folder`'s published runs: the history chart's data,
    aggregated in the database (a decade of nightly runs is 3,650 points per database, not 10,000 rows
    read and summed here)."""
    day = UtcDay(RunRow.started_at)
    seconds = DatabaseRow.recovery_seconds
    query = (select(DatabaseRow.database, day, func.count(), func.count(seconds), func.avg(seconds), func.min(seconds),
                    func.max(seconds))
             .join(RunRow, DatabaseRow.run_pk == RunRow.id).where(_in_folder(folder, True))
             .group_by(DatabaseRow.database, day).order_by(DatabaseRow.database, day))
    with Session(engine) as session:
        return [DailyRecovery(name, date.fromisoformat(when), runs, online, _float(mean), _float(low), _float(high))
                for name, when, runs, online, mean, low, high in session.execute(query)]


def newest_rto_targets(engine: Engine, folder: Path, databases: Iterable[str]) -> dict[str, float]:
    """Per database named, the RTO target its newest published run of `folder` held it to (none when that
    run's entry has no objectives): one indexed look-up each, newest run first, that reads one entry."""
    target = DatabaseReportRow.report[("objectives", "rto", "target_seconds")].as_float()
    found: dict[str, float] = {}
    with Session(engine) as session:
        for name in databases:
            value = session.scalar(select(target).join(RunRow, DatabaseReportRow.run_pk == RunRow.id)
                                   .where(_in_folder(folder, True), DatabaseReportRow.database == name)
                                   .order_by(RunRow.started_at.desc(), RunRow.run_id.desc()).limit(1))
            if value is not None:
                found[name] = float(value)
    return found


def report_folders(engine: Engine) -> list[str]:
    """Every folder runs were reported in, the one with the newest run first."""
    with Session(engine) as session:
        query = (select(RunRow.report_folder).where(RunRow.report_folder.is_not(None))
                 .group_by(RunRow.report_folder).order_by(func.max(RunRow.started_at).desc()))
        return [folder for folder in session.scalars(query) if folder is not None]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
