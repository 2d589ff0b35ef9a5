"""What the restored databases hold, read through SQLAlchemy's inspector (no engine named): each
table's columns, their types and defaults, and its primary key. Baselines and freshness are made
from it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

# Type names (as the dialect reflects them, upper case) that hold a point in time.
TIMESTAMP_TYPES = ("TIMESTAMP", "DATETIME", "DATETIME2", "DATETIMEOFFSET", "SMALLDATETIME")
# Defaults that mean "the time the row was written", per dialect (lower case, spaces removed).
NOW_DEFAULTS = ("now()", "current_timestamp", "transaction_timestamp()", "statement_timestamp()",
                "clock_timestamp()", "localtimestamp", "getdate()", "sysdatetime()", "getutcdate()",
                "sysutcdatetime()", "sysdatetimeoffset()")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    default: str | None
    nullable: bool
    aware: bool = False  # a timestamp that carries its time zone (timestamptz, datetimeoffset)

    @property
    def is_timestamp(self) -> bool:
        return self.type.upper().startswith(TIMESTAMP_TYPES)

    @property
    def defaults_to_now(self) -> bool:
        said = (self.default or "").lower().replace(" ", "")
        return any(now in said for now in NOW_DEFAULTS)


@dataclass
class Table:
    database: str
    schema: str | None
    name: str
    columns: list[Column]
    primary_key: list[str] = field(default_factory=list)

    @property
    def qualified(self) -> str:
        """database.schema.table: how reports and baselines name it."""
        return ".".join(part for part in (self.database, self.schema, self.name) if part)

    @property
    def in_database(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


def find_table(tables: list[Table], database: str | None, name: str) -> Table | None:
    """The table `name` ("schema.table", or "table": the first of that name, and read_tables lists
    the default schema's first, so public, dbo or main as the server has it) in `database`."""
    schema, _, bare = name.rpartition(".")
    return next((t for t in tables if t.database == database and t.name == bare and (not schema or t.schema == schema)),
                None)


def timestamp_columns(table: Table, patterns: list[str]) -> list[Column]:
    """Columns that say when a row was written: a timestamp type, and a default of the current
    time or a name like one of `patterns` (case-insensitive)."""
    return [column for column in table.columns if column.is_timestamp and (
        column.defaults_to_now or any(fnmatchcase(column.name.lower(), p.lower()) for p in patterns))]


def read_tables(engine: Any, database: str, schemas_excluded: frozenset[str], limit: int,
                named: Iterable[str] = ()) -> tuple[list[Table], list[str]]:
    """The user tables of one database, profiled: the first `limit` in name order and any `named`
    ("schema.table" or "table", as find_table reads it) wherever it is; and every table's qualified
    name, profiled or not, in the same order (what is gone since a baseline is told from it)."""
    from sqlalchemy import inspect

    inspector = inspect(engine)
    names: list[tuple[str | None, str]] = []
    default = inspector.default_schema_name
    for schema in inspector.get_schema_names():
        if schema.lower() in schemas_excluded or schema.lower().startswith(("pg_", "db_")):
            continue
        names += [(schema, name) for name in inspector.get_table_names(schema=schema)]
    names.sort(key=lambda item: (item[0] != default, item))
    chosen = set(range(min(limit, len(names))))
    for wanted in named:
        schema_named, _, bare = wanted.rpartition(".")
        chosen.update(next(([index] for index, (schema, name) in enumerate(names)
                            if name == bare and (not schema_named or schema == schema_named)), []))
    tables = []
    for schema, name in (names[index] for index in sorted(chosen)):
        columns = [Column(c["name"], str(c["type"]), None if c.get("default") is None else str(c["default"]),
                          bool(c.get("nullable", True)),
                          bool(getattr(c["type"], "timezone", False)) or str(c["type"]).upper() == "DATETIMEOFFSET")
                   for c in inspector.get_columns(name, schema=schema)]
        key = inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or []
        tables.append(Table(database, schema, name, columns, list(key)))
    return tables, [Table(database, schema, name, []).qualified for schema, name in names]
