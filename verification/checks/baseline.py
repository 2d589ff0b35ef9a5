"""Automatic baselines: every table of every restored database, against the last passed verification.

Made with no configuration. Per table: its row count (a drop beyond `row_drop_percent` since the
last passed verification fails, growth is reported), its column set (a change is schema drift:
reported, or failed with `schema_drift: fail`), and its primary key unique and not null. The first
verification of a database records the baseline the next one is held to. The baseline is kept in
the results store as the details of the `data_baseline` check of a passed verification: only a
verification that passed sets what the next ones are held to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from verification.checks.profile import Table
from verification.config import BaselineSettings
from verification.results.identity import LATEST, NAME_MATCH_NOTE, Match, describe_point, is_latest

ROLE = "restoreproof_role"  # the meta key telling what a made expectation is for


@dataclass(frozen=True)
class TableBaseline:
    rows: int
    columns: tuple[str, ...]


@dataclass(frozen=True)
class BaselineBasis:
    """What a verification's baseline is held to, said in its check: the point it restores, and the
    run of the same database and a comparable point whose baseline it is (None: no comparable run
    passed, so this one records the first baseline of its point). results.identity says what
    "same database" and "comparable point" are."""

    point: str = LATEST
    run_id: str | None = None
    matched: Match | None = None

    def first(self) -> str:
        """The summary's words for a verification held to no baseline."""
        if is_latest(self.point):
            return " (the first baseline: recorded for the next verification)"
        return (f" (the first baseline of {describe_point(self.point)}: recorded for later verifications of the "
                "same point; verifications of other points are not held to it, nor this one to theirs)")

    def details(self) -> dict[str, Any]:
        said: dict[str, Any] = {"point": self.point, "compared_with": self.run_id,
                                "rule": ("held only to a passed verification of the same database (source, name, "
                                         "system id) that restored the same point")}
        if self.matched is not None:
            said["matched_by"] = str(self.matched)
        if self.matched is Match.NAME:
            said["note"] = NAME_MATCH_NOTE
        return said


def previous_baseline(details: dict[str, Any] | None) -> dict[str, TableBaseline]:
    """The tables a passed verification's data_baseline check recorded (empty when none did)."""
    tables = (details or {}).get("tables") or {}
    found = {}
    for name, entry in tables.items():
        if isinstance(entry, dict) and isinstance(entry.get("rows"), int) and isinstance(entry.get("columns"), list):
            found[name] = TableBaseline(entry["rows"], tuple(str(c) for c in entry["columns"]))
    return found


def _made(kind: str, role: str, **kwargs: Any) -> dict[str, Any]:
    return {"type": kind, "kwargs": kwargs, "meta": {ROLE: role}}


def expectations(table: Table, before: TableBaseline | None, settings: BaselineSettings) -> list[dict[str, Any]]:
    """The baseline expectations of one table."""
    made = []
    floor = 0 if before is None else math.ceil(before.rows * (1 - settings.row_drop_percent / 100))
    made.append(_made("expect_table_row_count_to_be_between", "rows", min_value=floor))
    if before is not None:
        made.append(_made("expect_table_columns_to_match_set", "schema", column_set=list(before.columns),
                          exact_match=True))
    if len(table.primary_key) == 1:
        made.append(_made("expect_column_values_to_be_unique", "key", column=table.primary_key[0]))
    elif table.primary_key:
        made.append(_made("expect_compound_columns_to_be_unique", "key", column_list=list(table.primary_key)))
    made += [_made("expect_column_values_to_not_be_null", "key", column=column) for column in table.primary_key]
    return made


def missing_tables(before: dict[str, TableBaseline], now: list[str],
                   settings: BaselineSettings) -> tuple[list[str], list[str]]:
    """Tables of the last baseline that are gone: (failures, notes). `now` names every table of the
    restored databases, also those beyond max_tables that were not profiled. A table that held rows
    beyond the drop tolerance is lost data; an empty one is schema drift."""
    failures, notes = [], []
    present = set(now)
    for name, table in sorted(before.items()):
        if name in present:
            continue
        if table.rows > 0 and settings.row_drop_percent < 100:
            failures.append(f"table {name} is missing: the last passed verification had it with {table.rows} rows")
        else:
            notes.append(f"table {name} is missing (it was empty in the last passed verification)")
    return failures, notes


def new_tables(before: dict[str, TableBaseline], now: list[str]) -> list[str]:
    return [name for name in now if before and name not in before]
