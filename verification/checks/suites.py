"""The suites users write: expectations in the configuration and GX suite files from a folder.

Both are read and checked against Great Expectations' own expectation classes when the data checks
are loaded, before any restore starts: an unknown expectation type, a missing or misspelt kwarg, a
file that is not a GX suite is a ConfigError naming where it was written (exit 2).

A suite file is `<suites_dir>/<verified database>/<name>.json` in GX 1.x's suite format
({"name", "expectations": [{"type", "kwargs", "meta"}], "meta"}). What it is validated against is
said in its meta, `"restoreproof": {"table": "public.orders", "database": "shop"}` or
`{"query": "select ..."}`; without one, the file's name is the table (`public.orders.json`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verification.config import ChecksSettings, DataSuite, SqlCheck
from verification.errors import ConfigError

# What a deprecated SQL check's query becomes: its single value, as text, beside the value expected.
SQL_VALUE_COLUMN = "value"
BOOLEAN_SPELLINGS = {"t": ("true",), "f": ("false",), "true": ("t",), "false": ("f",)}


@dataclass(frozen=True)
class Batch:
    """What a suite is validated against: a table, or the rows of a query, in one database."""

    table: str | None
    query: str | None
    database: str | None  # None: the verified database's main one



@dataclass
class Suite:
    """One GX suite, ready to run: its check name, its batch and its expectations (GX's dicts)."""

    check: str  # the check's name in the report: "data:<label>" or "sql:<name>"
    label: str
    batch: Batch
    expectations: list[dict[str, Any]]
    required: bool = True
    origin: str = "configuration"  # where it was written, for messages
    # A deprecated SQL check: the value expected, for its summary.
    expected_value: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def validate_expectation(expectation: dict[str, Any], where: str) -> None:
    """Raise ConfigError unless GX can build this expectation (type known, kwargs valid)."""
    from great_expectations.exceptions.exceptions import GreatExpectationsError
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    kind = expectation.get("type")
    if not isinstance(kind, str) or not kind:
        raise ConfigError(f"{where}: an expectation needs a type (its Great Expectations name, e.g. "
                          "expect_table_row_count_to_be_between)")
    kwargs = expectation.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise ConfigError(f"{where}: {kind}: kwargs must be a mapping")
    try:
        ExpectationConfiguration(type=kind, kwargs=kwargs, meta=expectation.get("meta") or {}).to_domain_obj()
    except GreatExpectationsError as exc:
        raise ConfigError(f"{where}: {kind} is not a Great Expectations expectation ({exc})") from None
    except ValueError as exc:  # pydantic's validation of the kwargs: each field and what is wrong with it
        listed = exc.errors() if callable(getattr(exc, "errors", None)) else []  # type: ignore[attr-defined]
        said = "; ".join(dict.fromkeys(f"{'.'.join(str(p) for p in e.get('loc', ()))} {e.get('msg')}"
                                       for e in listed)) or str(exc)
        raise ConfigError(f"{where}: {kind}: invalid kwargs: {said}") from None


def configured_suites(settings: ChecksSettings, database: str) -> list[Suite]:
    """The suites written for `database` in the configuration (new form and deprecated SQL checks)."""
    suites = [_from_config(database, index, entry)
              for index, entry in enumerate(settings.expectations.get(database, []))]
    suites += [_from_sql(check) for check in settings.sql]
    return suites


def _from_config(database: str, index: int, entry: DataSuite) -> Suite:
    where = f"checks.expectations.{database}[{index}] ({entry.label})"
    expectations = [{"type": spec.type, "kwargs": dict(spec.kwargs), "meta": dict(spec.meta)} for spec in entry.expect]
    for number, expectation in enumerate(expectations):
        validate_expectation(expectation, f"{where}.expect[{number}]")
    return Suite(f"data:{entry.label}", entry.label, Batch(entry.table, entry.query, entry.database),
                 expectations, entry.required, where)


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _from_sql(check: SqlCheck) -> Suite:
    """A deprecated SQL check as an unexpected-rows expectation: the batch is its single value as
    text, and a row is unexpected when that value is not the one expected (or is NULL)."""
    # The old checks compared psql's text, which prints a boolean as t/f; cast to text in SQL it
    # reads true/false: both spellings stay the same value.
    accepted = [check.expect, *BOOLEAN_SPELLINGS.get(check.expect.lower(), ())]
    listed = ", ".join(_quoted(value) for value in accepted)
    expectation = {"type": "unexpected_rows_expectation", "kwargs": {
        "unexpected_rows_query": (f"SELECT * FROM {{batch}} WHERE {SQL_VALUE_COLUMN} IS NULL "
                                  f"OR {SQL_VALUE_COLUMN} NOT IN ({listed})"),
        "description": f"{check.name}: the query returns {check.expect!r}"}, "meta": {}}
    # Says which value came back when it is not the one expected (the unexpected-rows one judges).
    shown = {"type": "expect_column_values_to_be_in_set",
             "kwargs": {"column": SQL_VALUE_COLUMN, "value_set": accepted}, "meta": {}}
    return Suite(f"sql:{check.name}", check.name, Batch(None, check.query, check.database), [expectation, shown],
                 check.required, f"checks.sql ({check.name})", expected_value=check.expect,
                 meta={"deprecated_sql_check": True})


def file_suites(folder: Path | None, database: str) -> list[Suite]:
    """The GX suite files of `database` in the suites folder, each checked."""
    if folder is None:
        return []
    if not folder.is_dir():
        raise ConfigError(f"checks.suites_dir {folder} is not a folder")
    mine = folder / database
    if not mine.is_dir():
        return []
    return [read_suite_file(path) for path in sorted(mine.glob("*.json"))]


def read_suite_file(path: Path) -> Suite:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"suite file {path} cannot be read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"suite file {path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("expectations"), list):
        raise ConfigError(f"suite file {path} is not a Great Expectations suite: it needs an "
                          "\"expectations\" list")
    expectations = []
    for number, expectation in enumerate(data["expectations"]):
        where = f"suite file {path}, expectations[{number}]"
        if not isinstance(expectation, dict):
            raise ConfigError(f"{where}: not an expectation (a mapping with type and kwargs)")
        # GX 0.x files said expectation_type; 1.x says type.
        kind = expectation.get("type", expectation.get("expectation_type"))
        converted = {"type": kind, "kwargs": expectation.get("kwargs", {}), "meta": expectation.get("meta") or {}}
        validate_expectation(converted, where)
        expectations.append(converted)
    if not expectations:
        raise ConfigError(f"suite file {path} holds no expectations")
    meta = data.get("meta") or {}
    ours = meta.get("restoreproof") or {}
    if not isinstance(ours, dict):
        raise ConfigError(f"suite file {path}: meta.restoreproof must be a mapping (table, database or query)")
    unknown = set(ours) - {"table", "query", "database", "required", "name"}
    if unknown:
        raise ConfigError(f"suite file {path}: meta.restoreproof has unknown keys {sorted(unknown)}")
    query = ours.get("query")
    table = ours.get("table") or (None if query else path.stem)
    label = str(ours.get("name") or data.get("name") or path.stem)
    return Suite(f"data:{label}", label, Batch(table, query, ours.get("database")), expectations,
                 bool(ours.get("required", True)), f"suite file {path}")


def load_suites(settings: ChecksSettings, database: str) -> list[Suite]:
    """Every user suite of `database`, checked; raises ConfigError for the first that is not valid."""
    suites = configured_suites(settings, database) + file_suites(settings.suites_dir, database)
    seen: dict[str, str] = {}
    for suite in suites:
        if suite.check in seen:
            raise ConfigError(f"two data checks are named {suite.check}: {seen[suite.check]} and {suite.origin}")
        seen[suite.check] = suite.origin
    return suites


def unknown_databases(settings: ChecksSettings, known: Iterable[str]) -> list[str]:
    """What the configuration says of a database the source does not have: each key and suite folder
    named, never silently ignored. A warning, not an error: one configuration serves many sources and
    nights (a database dropped, one not backed up yet), while `verify --database` naming one the source
    lacks is a request for tonight, and an error."""
    if not settings.enabled:
        return []
    have = set(known)
    listed = ", ".join(sorted(have)) or "none"
    named = [(f"checks.expectations.{database}", database) for database in settings.expectations]
    named += [(f"checks.freshness.columns.{database}", database) for database in settings.freshness.columns]
    if settings.suites_dir is not None and settings.suites_dir.is_dir():
        named += [(f"checks.suites_dir {folder}", folder.name)
                  for folder in settings.suites_dir.iterdir() if folder.is_dir()]
    return [f"{where} names database {database}, which the source does not have (it has: {listed}): "
            "nothing of it is checked" for where, database in sorted(named) if database not in have]


def check_all(settings: ChecksSettings, databases: list[str]) -> dict[str, list[Suite]]:
    """Load and check every suite of every database to verify, before any restore starts."""
    if not settings.enabled:
        return {}
    return {database: load_suites(settings, database) for database in databases}
