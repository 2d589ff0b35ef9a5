"""What the restored databases hold, as SQLAlchemy's inspector reflects it: tables, columns, types,
defaults and keys; and which columns say when a row was written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy.dialects import mssql, postgresql

from tests.unit.checks.sqlite import sqlite_file
from verification.checks import profile
from verification.checks.profile import Column, Table, read_tables, timestamp_columns
from verification.checks.runner import SYSTEM_SCHEMAS

PATTERNS = ["created", "updated", "*_time", "*timestamp"]


@pytest.mark.parametrize(("type_name", "expected"), [
    ("TIMESTAMP", True), ("timestamp with time zone", True), ("TIMESTAMP WITHOUT TIME ZONE", True),
    ("DATETIME", True), ("DATETIME2", True), ("datetimeoffset", True), ("SMALLDATETIME", True),
    ("DATE", False), ("TIME", False), ("TEXT", False), ("INTEGER", False), ("INTERVAL", False)])
def test_a_timestamp_is_a_type_that_holds_a_point_in_time(type_name, expected):
    assert Column("c", type_name, None, True).is_timestamp is expected


@pytest.mark.parametrize(("default", "expected"), [
    ("now()", True), ("NOW()", True), ("CURRENT_TIMESTAMP", True), ("(getdate())", True), ("(sysutcdatetime())", True),
    ("transaction_timestamp()", True), ("statement_timestamp()", True), ("clock_timestamp()", True),
    ("LOCALTIMESTAMP", True), ("(getutcdate())", True), ("(sysdatetimeoffset())", True), ("(sysdatetime())", True),
    ("timezone('utc'::text, now())", True), ("now ()", True), ("'2026-01-01'::timestamp", False), ("0", False),
    (None, False)])
def test_a_default_of_the_current_time_in_each_dialects_words(default, expected):
    assert Column("c", "TIMESTAMP", default, True).defaults_to_now is expected


def test_timestamp_columns_are_timestamps_defaulting_to_now_or_named_like_a_pattern():
    table = Table("shop", "public", "orders", [
        Column("id", "INTEGER", "nextval('orders_id_seq')", False),
        Column("placed", "TIMESTAMP WITH TIME ZONE", "now()", False, aware=True),
        Column("Created", "TIMESTAMP", None, True),
        Column("ship_time", "DATETIME2", None, True),
        Column("LastTimestamp", "DATETIME", None, True),
        Column("due", "TIMESTAMP", None, True),
        Column("updated", "TEXT", None, True),
        Column("created_on", "DATE", "now()", True)])
    assert [c.name for c in timestamp_columns(table, PATTERNS)] == ["placed", "Created", "ship_time", "LastTimestamp"]
    assert [c.name for c in timestamp_columns(table, [])] == ["placed"]


def test_a_table_is_named_database_schema_table_and_in_its_database_schema_table():
    assert (Table("shop", "public", "orders", []).qualified, Table("shop", "public", "orders", []).in_database) == (
        "shop.public.orders", "public.orders")
    assert (Table("shop", None, "orders", []).qualified, Table("shop", None, "orders", []).in_database) == (
        "shop.orders", "orders")


def _attached(folder: Path) -> sqlalchemy.Engine:
    """A server with three schemas: main (the default), archive, and pg_temp_3 (the server's own)."""
    sqlite_file(folder / "main.db", """
        create table zeta (id integer primary key, created timestamp default current_timestamp, n text default 'x');
        create table alpha (a integer not null, b integer not null, primary key (b, a));
        create table beta (x integer);""")
    sqlite_file(folder / "archive.db", "create table aardvark (id integer primary key);")
    sqlite_file(folder / "pg.db", "create table hidden (id integer primary key);")
    engine = sqlalchemy.create_engine(f"sqlite:///{folder / 'main.db'}")

    @sqlalchemy.event.listens_for(engine, "connect")
    def attach(connection: Any, _: Any) -> None:
        connection.execute(f"attach '{folder / 'archive.db'}' as archive")
        connection.execute(f"attach '{folder / 'pg.db'}' as pg_temp_3")

    return engine


def test_read_tables_reads_the_default_schema_first_then_the_others_by_name_and_skips_the_servers_own(tmp_path):
    engine = _attached(tmp_path)
    tables, names = read_tables(engine, "shop", SYSTEM_SCHEMAS, 10)
    assert names == ["shop.main.alpha", "shop.main.beta", "shop.main.zeta", "shop.archive.aardvark"]
    assert [(t.schema, t.name) for t in tables] == [("main", "alpha"), ("main", "beta"), ("main", "zeta"),
                                                    ("archive", "aardvark")]
    assert tables[2] == Table("shop", "main", "zeta", [
        Column("id", "INTEGER", None, True), Column("created", "TIMESTAMP", "current_timestamp", True),
        Column("n", "TEXT", "'x'", True)], ["id"])
    assert tables[0].primary_key == ["b", "a"]  # the key's own order
    assert tables[0].columns[0] == Column("a", "INTEGER", None, False)
    assert tables[1].primary_key == []


def test_read_tables_stops_at_the_limit_but_names_every_table_and_excludes_schemas_asked(tmp_path):
    engine = _attached(tmp_path)
    tables, names = read_tables(engine, "shop", frozenset({"archive"}), 2)
    assert ([t.name for t in tables], names) == (["alpha", "beta"], ["shop.main.alpha", "shop.main.beta",
                                                                     "shop.main.zeta"])
    assert read_tables(engine, "shop", SYSTEM_SCHEMAS, 0)[0] == []


def test_tables_named_are_profiled_beyond_the_limit_the_first_of_a_bare_name_as_find_table_reads_it(tmp_path):
    engine = _attached(tmp_path)
    sqlite_file(tmp_path / "archive.db", "create table zeta (id integer primary key);")
    tables, names = read_tables(engine, "shop", SYSTEM_SCHEMAS, 1, ["zeta", "archive.aardvark", "nowhere",
                                                                    "main.nothing"])
    assert [t.qualified for t in tables] == ["shop.main.alpha", "shop.main.zeta", "shop.archive.aardvark"]
    assert len(names) == 5
    tables, _ = read_tables(engine, "shop", SYSTEM_SCHEMAS, 1, ["archive.zeta"])
    assert [t.qualified for t in tables] == ["shop.main.alpha", "shop.archive.zeta"]


def test_a_timestamp_that_carries_its_time_zone_is_aware(monkeypatch):
    """PostgreSQL's timestamptz and SQL Server's datetimeoffset, as their dialects reflect them."""
    class Inspector:
        default_schema_name = "dbo"

        def get_schema_names(self) -> list[str]:
            return ["dbo", "sys", "db_owner", "INFORMATION_SCHEMA", "sales"]

        def get_table_names(self, schema: str) -> list[str]:
            return {"dbo": ["orders"], "sales": ["leads"]}.get(schema, ["catalogue"])

        def get_columns(self, name: str, schema: str) -> list[dict[str, Any]]:
            return [{"name": "at", "type": postgresql.TIMESTAMP(timezone=True), "default": "now()", "nullable": False},
                    {"name": "local", "type": postgresql.TIMESTAMP(), "default": None},
                    {"name": "offset", "type": mssql.DATETIMEOFFSET(), "default": "(sysdatetimeoffset())",
                     "nullable": True}]

        def get_pk_constraint(self, name: str, schema: str) -> dict[str, Any]:
            return {"constrained_columns": None, "name": None}

    monkeypatch.setattr(sqlalchemy, "inspect", lambda engine: Inspector())
    tables, names = read_tables(object(), "crm", SYSTEM_SCHEMAS, 10)
    assert ([t.qualified for t in tables], names) == (["crm.dbo.orders", "crm.sales.leads"],
                                                      ["crm.dbo.orders", "crm.sales.leads"])
    assert tables[0] == Table("crm", "dbo", "orders", [
        Column("at", "TIMESTAMP", "now()", False, aware=True), Column("local", "TIMESTAMP", None, True, aware=False),
        Column("offset", "DATETIMEOFFSET", "(sysdatetimeoffset())", True, aware=True)], [])
    assert profile.TIMESTAMP_TYPES[0] == "TIMESTAMP"
