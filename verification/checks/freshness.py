"""Freshness: the newest row of tables with a timestamp column, against the restore point.

The data-level proof of the restore point. A timestamp column is named in the configuration or
found automatically (`profile.timestamp_columns`). Each one's newest value is read (GX's
expect_column_max_to_be_between) and said against the restore point the server proved and the end
of the newest backup: "newest row in shop.public.orders: 23:59:58, 2 s before the restore point".

- A configured column fails alone when its newest row is older at the restore point than its
  max_age_seconds (default: the database's RPO).
- Automatic columns together say how far the data reaches: the freshest of them is the data's
  own recovery point, and only when even it is older than the RPO allows does the database fail
  (naming the tables). One quiet table (a lookup table nobody writes) fails nothing.
- A column with no timestamps, or its newest after the restore point, is reported, not failed:
  applications write their own clocks.

A timestamp without a time zone is read as UTC (said in the details).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from verification.checks.baseline import ROLE
from verification.checks.profile import Column, Table
from verification.checks.results import Outcome

CONFIGURED, AUTOMATIC = "freshness-configured", "freshness-auto"
# The meta key naming the table an expectation reads (with its kwargs' column: which column it is).
TABLE = "restoreproof_table"


@dataclass(frozen=True)
class Watched:
    """One timestamp column whose newest value is read."""

    table: Table
    column: Column
    max_age_seconds: float
    configured: bool

    @property
    def name(self) -> str:
        """database.schema.table.column: how the report names it."""
        return f"{self.table.qualified}.{self.column.name}"


def expectation(watched: Watched, point: datetime) -> dict[str, Any]:
    oldest = point - timedelta(seconds=watched.max_age_seconds)
    bound = oldest if watched.column.aware else oldest.astimezone(UTC).replace(tzinfo=None)
    return {"type": "expect_column_max_to_be_between",
            "kwargs": {"column": watched.column.name, "min_value": bound.isoformat()},
            "meta": {ROLE: CONFIGURED if watched.configured else AUTOMATIC, TABLE: watched.table.qualified}}


def pair(watched: list[Watched], outcomes: list[Outcome]) -> tuple[list[tuple[Watched, Outcome]], list[str]]:
    """Each watched column with the result of its own expectation, found by the table and column the
    expectation names (never by position: GX need not give results in the suite's order); and what
    could not be paired, said (a column without a result, a result for no column watched)."""
    waiting: dict[tuple[str, str], list[Outcome]] = {}
    for outcome in outcomes:
        key = (str(outcome.meta.get(TABLE)), str(outcome.kwargs.get("column")))
        waiting.setdefault(key, []).append(outcome)
    paired: list[tuple[Watched, Outcome]] = []
    unpaired: list[str] = []
    for watch in watched:
        found = waiting.get((watch.table.qualified, watch.column.name))
        if found:
            paired.append((watch, found.pop(0)))
        else:
            unpaired.append(f"{watch.name}: no result came back for it")
    unpaired += [f"a result for no column watched: {outcome.describe()}"
                 for left in waiting.values() for outcome in left]
    return paired, unpaired


def as_utc(value: Any) -> datetime | None:
    """An observed newest value as an aware UTC time (naive ones are read as UTC); None if not a time."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _ago(seconds: float) -> str:
    if abs(seconds) < 120:
        return f"{seconds:.0f} s"
    if abs(seconds) < 7200:
        return f"{seconds / 60:.1f} min"
    if abs(seconds) < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def describe(name: str, newest: datetime | None, point: datetime, backup_end: datetime | None) -> str:
    """How the report says one column's freshness."""
    if newest is None:
        return f"{name}: no timestamp (the column is empty or all NULL)"
    gap = (point - newest).total_seconds()
    where = f"{_ago(gap)} before the restore point" if gap >= 0 else f"{_ago(-gap)} AFTER the restore point"
    said = f"newest row in {name}: {newest.isoformat()}, {where}"
    if backup_end is not None:
        after = (newest - backup_end).total_seconds()
        said += f" ({_ago(abs(after))} {'after' if after >= 0 else 'before'} the newest backup ended)"
    return said


@dataclass
class Judged:
    findings: list[str]
    notes: list[str]
    said: list[str]
    data_point: datetime | None  # the freshest timestamp of the database: the data's own recovery point
    data_rpo_seconds: float | None


def judge(observed: list[tuple[Watched, str, Any]], point: datetime, backup_end: datetime | None,
          rpo_seconds: float) -> Judged:
    """Each watched column's newest value (`observed`: the column, its report name, the observed
    value) against the rules above."""
    findings: list[str] = []
    notes: list[str] = []
    said: list[str] = []
    automatic: list[tuple[str, datetime]] = []
    newest_all: list[datetime] = []
    for watched, name, value in observed:
        newest = as_utc(value)
        said.append(describe(name, newest, point, backup_end))
        if newest is None:
            (findings if watched.configured else notes).append(f"{name}: no timestamp to judge freshness by")
            continue
        newest_all.append(newest)
        age = (point - newest).total_seconds()
        if age < 0:
            notes.append(f"{name}: newest row {newest.isoformat()} is after the restore point {point.isoformat()}")
        if watched.configured:
            if age > watched.max_age_seconds:
                findings.append(f"{name}: newest row {newest.isoformat()} is {_ago(age)} older than the restore point "
                                f"{point.isoformat()}; at most {_ago(watched.max_age_seconds)} is allowed")
        else:
            automatic.append((name, newest))
    if automatic:
        freshest = max(newest for _, newest in automatic)
        age = (point - freshest).total_seconds()
        if age > rpo_seconds:
            stale = ", ".join(f"{name} ({newest.isoformat()})" for name, newest in automatic)
            findings.append(f"the newest row of every table with a timestamp is older than the RPO allows "
                            f"({_ago(rpo_seconds)} before the restore point {point.isoformat()}): {stale}")
    data_point = max(newest_all) if newest_all else None
    rpo = None if data_point is None else max(0.0, (point - data_point).total_seconds())
    return Judged(findings, notes, said, data_point, rpo)
