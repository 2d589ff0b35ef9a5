"""Automatic baselines: what is made from the last passed verification, and the data_baseline check
the runner makes of it (Great Expectations run for real on SQLite files)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.unit.checks.sqlite import access, checks, run, sqlite_file
from verification.checks.baseline import (
    ROLE,
    BaselineBasis,
    TableBaseline,
    expectations,
    missing_tables,
    new_tables,
    previous_baseline,
)
from verification.checks.profile import Column, Table
from verification.checks.results import Outcome
from verification.checks.runner import DataCheckRunner, _Batch
from verification.config import BaselineSettings, Settings
from verification.model import CheckKind, CheckName, CheckStatus
from verification.results.identity import NAME_MATCH_NOTE, Match


def _table(*key: str) -> Table:
    return Table("shop", "public", "orders", [Column("id", "INTEGER", None, False)], list(key))


# -- what is made ---------------------------------------------------------------------------------

def test_the_previous_baseline_is_read_from_a_passed_checks_details_skipping_what_is_not_one():
    details = {"tables": {"shop.public.orders": {"rows": 10, "columns": ["id", "total"]},
                          "shop.public.uncounted": {"rows": None, "columns": ["id"]},
                          "shop.public.odd": {"rows": 3, "columns": "id"},
                          "shop.public.junk": "x"}}
    assert previous_baseline(details) == {"shop.public.orders": TableBaseline(10, ("id", "total"))}
    assert previous_baseline(None) == {}
    assert previous_baseline({"compared": False}) == {}


def test_the_first_baseline_asks_only_for_rows_and_keys():
    assert expectations(_table("id"), None, BaselineSettings()) == [
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 0}, "meta": {ROLE: "rows"}},
        {"type": "expect_column_values_to_be_unique", "kwargs": {"column": "id"}, "meta": {ROLE: "key"}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "id"}, "meta": {ROLE: "key"}}]
    assert expectations(_table(), None, BaselineSettings()) == [
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 0}, "meta": {ROLE: "rows"}}]


def test_a_later_baseline_holds_rows_to_the_tolerance_rounded_up_and_the_columns_exactly():
    made = expectations(_table("a", "b"), TableBaseline(7, ("a", "b", "c")), BaselineSettings(row_drop_percent=15))
    assert made == [
        # 7 rows less 15% is 5.95: 6 rows at least.
        {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 6}, "meta": {ROLE: "rows"}},
        {"type": "expect_table_columns_to_match_set", "kwargs": {"column_set": ["a", "b", "c"], "exact_match": True},
         "meta": {ROLE: "schema"}},
        {"type": "expect_compound_columns_to_be_unique", "kwargs": {"column_list": ["a", "b"]}, "meta": {ROLE: "key"}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "a"}, "meta": {ROLE: "key"}},
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "b"}, "meta": {ROLE: "key"}}]
    assert expectations(_table(), TableBaseline(10, ()), BaselineSettings())[0]["kwargs"] == {"min_value": 9}
    assert expectations(_table(), TableBaseline(10, ()), BaselineSettings(row_drop_percent=0))[0]["kwargs"] == {
        "min_value": 10}
    assert expectations(_table(), TableBaseline(10, ()), BaselineSettings(row_drop_percent=100))[0]["kwargs"] == {
        "min_value": 0}


def test_a_missing_table_that_held_rows_fails_an_empty_one_is_noted():
    before = {"shop.public.a": TableBaseline(5, ("id",)), "shop.public.b": TableBaseline(0, ("id",)),
              "shop.public.c": TableBaseline(1, ("id",))}
    assert missing_tables(before, ["shop.public.c"], BaselineSettings()) == (
        ["table shop.public.a is missing: the last passed verification had it with 5 rows"],
        ["table shop.public.b is missing (it was empty in the last passed verification)"])
    # Any loss allowed: a missing table is said, not failed.
    assert missing_tables(before, ["shop.public.c"], BaselineSettings(row_drop_percent=100)) == (
        [], ["table shop.public.a is missing (it was empty in the last passed verification)",
             "table shop.public.b is missing (it was empty in the last passed verification)"])
    assert missing_tables(before, ["shop.public.a", "shop.public.b", "shop.public.c"], BaselineSettings()) == ([], [])
    # Just under the whole loss allowed, a table gone is still lost data.
    assert missing_tables({"shop.public.a": TableBaseline(1, ())}, [], BaselineSettings(row_drop_percent=99.9)) == (
        ["table shop.public.a is missing: the last passed verification had it with 1 rows"], [])


def test_new_tables_are_the_ones_the_last_baseline_did_not_have_and_none_on_the_first():
    before = {"shop.public.a": TableBaseline(5, ("id",))}
    assert new_tables(before, ["shop.public.a", "shop.public.z", "shop.public.b"]) == ["shop.public.z", "shop.public.b"]
    assert new_tables({}, ["shop.public.a"]) == []


# -- run ------------------------------------------------------------------------------------------

FIRST = """
create table orders (id integer primary key, customer_id integer);
insert into orders (customer_id) select value from generate_series(1, 10);
create table items (id integer primary key, sku text);
insert into items (sku) values ('a'), ('b'), ('c'), ('d');
create table notes (id integer primary key, body text);
insert into notes (body) values ('x'), ('y'), ('z');
create table scratch (id integer primary key);
create table pairs (a integer not null, b integer not null, primary key (a, b));
insert into pairs values (1, 1), (1, 2);
"""


def _rows(n: int) -> str:
    return ", ".join(f"({i})" for i in range(1, n + 1))


def _first_script() -> str:
    return FIRST.replace("select value from generate_series(1, 10)", "values " + _rows(10))


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("first")
    database = sqlite_file(folder / "shop.db", _first_script())
    named, _ = run(folder, checks(freshness={"enabled": False}), access({"shop": database}))
    return named


def test_the_first_baseline_passes_records_every_table_and_compares_nothing(first):
    assert list(first) == [CheckName.DATA_BASELINE]
    check = first[CheckName.DATA_BASELINE]
    assert (check.status, check.kind, check.findings) == (CheckStatus.PASSED, CheckKind.DATA, [])
    assert check.summary == ("5 tables: row counts, keys as expected (the first baseline: recorded for the next "
                             "verification)")
    assert check.details == {
        "tables": {"shop.main.items": {"rows": 4, "columns": ["id", "sku"]},
                   "shop.main.notes": {"rows": 3, "columns": ["id", "body"]},
                   "shop.main.orders": {"rows": 10, "columns": ["id", "customer_id"]},
                   "shop.main.pairs": {"rows": 2, "columns": ["a", "b"]},
                   "shop.main.scratch": {"rows": 0, "columns": ["id"]}},
        "compared": False, "notes": [], "row_drop_percent": 10.0, "schema_drift": "report",
        "baseline": {"point": "latest", "compared_with": None, "rule": RULE}}


def _second(folder: Path, orders: int, notes: bool) -> Path:
    """The next restore: orders down to `orders` rows, items grown with a new column, scratch gone,
    refunds new; notes kept or gone."""
    database = sqlite_file(folder / "shop.db", _first_script())
    with sqlite3.connect(database) as connection:
        connection.executescript(f"""
            delete from orders where id > {orders};
            insert into items (sku) values ('e'), ('f');
            alter table items add column price real;
            drop table scratch;
            create table refunds (id integer primary key);
            {'' if notes else 'drop table notes;'}""")
    connection.close()
    return database


def test_a_second_run_within_tolerance_passes_and_says_growth_drift_and_tables_gone_or_new(first, tmp_path):
    previous = previous_baseline(first[CheckName.DATA_BASELINE].details)
    database = _second(tmp_path, orders=9, notes=True)  # 9 of 10: exactly the 10% allowed
    named, _ = run(tmp_path, checks(freshness={"enabled": False}), access({"shop": database}), previous)
    check = named[CheckName.DATA_BASELINE]
    assert (check.status, check.findings) == (CheckStatus.PASSED, [])
    assert check.summary == "5 tables: row counts, keys and columns as expected"
    assert check.details["compared"] is True
    assert check.details["notes"] == [
        "shop.main.items: 6 rows (+2 since the last passed verification)",
        "shop.main.items: columns changed since the last passed verification: added ['price'], removed none",
        "shop.main.orders: 9 rows (-1 since the last passed verification)",
        "table shop.main.scratch is missing (it was empty in the last passed verification)",
        "shop.main.refunds: new since the last passed verification"]
    assert check.details["tables"]["shop.main.items"] == {"rows": 6, "columns": ["id", "sku", "price"]}


def test_rows_dropped_beyond_tolerance_a_missing_table_and_drift_made_to_fail_fail(first, tmp_path):
    previous = previous_baseline(first[CheckName.DATA_BASELINE].details)
    database = _second(tmp_path, orders=8, notes=False)
    settings = checks(freshness={"enabled": False}, baselines={"schema_drift": "fail"})
    named, _ = run(tmp_path, settings, access({"shop": database}), previous)
    check = named[CheckName.DATA_BASELINE]
    assert check.status is CheckStatus.FAILED
    assert check.summary == "3 tables differ from the last passed verification"
    assert check.findings == [
        "shop.main.items: columns changed since the last passed verification: added ['price'], removed none",
        "shop.main.orders: 8 rows, 10 in the last passed verification: more than 10% fewer",
        "table shop.main.notes is missing: the last passed verification had it with 3 rows"]
    assert check.details["notes"] == [
        "shop.main.items: 6 rows (+2 since the last passed verification)",
        "table shop.main.scratch is missing (it was empty in the last passed verification)",
        "shop.main.refunds: new since the last passed verification"]
    assert check.details["schema_drift"] == "fail"


def _damaged_key(database: Path) -> None:
    """`codes` declares a primary key its rows break: a non-unique index rewritten into the key's own,
    as damage alone could make it (SQLite's integrity_check says 'non-unique entry')."""
    connection = sqlite3.connect(database)
    connection.executescript("""
        create table codes (code text, label text);
        insert into codes values ('a', 'x'), ('a', 'y'), ('b', 'z');
        create index codes_code on codes (code);""")
    connection.execute("pragma writable_schema = on")
    connection.execute("update sqlite_master set name = 'sqlite_autoindex_codes_1', sql = null "
                       "where name = 'codes_code'")
    connection.execute("update sqlite_master set sql = 'CREATE TABLE codes (code text primary key, label text)' "
                       "where name = 'codes'")
    connection.commit()
    connection.close()


def test_primary_keys_duplicated_or_null_fail_naming_table_and_values(tmp_path):
    # SQLite lets a NULL into a primary key that is not an integer one (its documented legacy quirk).
    database = sqlite_file(tmp_path / "shop.db", """
        create table tags (name text primary key, n integer);
        insert into tags values ('red', 1), (null, 2);
        create table pairs (a integer, b integer, primary key (a, b));
        insert into pairs values (1, 1), (1, 2);""")
    _damaged_key(database)
    named, _ = run(tmp_path, checks(freshness={"enabled": False}), access({"shop": database}))
    check = named[CheckName.DATA_BASELINE]
    assert check.status is CheckStatus.FAILED
    assert check.summary == "2 tables differ from the last passed verification"
    assert check.findings == [
        "database shop, table main.codes: expect_column_values_to_be_unique(column='code') failed, observed "
        "\"2 unexpected (66.7% of rows), e.g. ['a', 'a']\"",
        "database shop, table main.tags: expect_column_values_to_not_be_null(column='name') failed, observed "
        "'1 unexpected (50% of rows), e.g. [None]'"]
    assert check.details["tables"] == {"shop.main.codes": {"rows": 3, "columns": ["code", "label"]},
                                       "shop.main.pairs": {"rows": 2, "columns": ["a", "b"]},
                                       "shop.main.tags": {"rows": 2, "columns": ["name", "n"]}}


def test_beyond_max_tables_the_rest_are_not_checked_yet_a_table_gone_is_still_found(tmp_path):
    database = sqlite_file(tmp_path / "shop.db", "create table a (id integer primary key);"
                                                 "create table b (id integer primary key);"
                                                 "create table c (id integer primary key);")
    # c is beyond max_tables (present, not profiled); gone is in no database at all.
    previous = {"shop.main.a": TableBaseline(0, ("id",)), "shop.main.b": TableBaseline(0, ("id",)),
                "shop.main.c": TableBaseline(0, ("id",)), "shop.main.gone": TableBaseline(50, ("id",))}
    named, _ = run(tmp_path, checks(freshness={"enabled": False}, baselines={"max_tables": 2}),
                   access({"shop": database}), previous)
    check = named[CheckName.DATA_BASELINE]
    assert (check.status, check.summary) == (CheckStatus.FAILED, "1 tables differ from the last passed verification")
    assert check.findings == ["table shop.main.gone is missing: the last passed verification had it with 50 rows"]
    assert check.details["notes"] == ["database shop: 3 tables, 1 not checked (beyond checks.baselines.max_tables: 2)"]
    assert check.details["not_checked"] == ["shop.main.c"]
    assert list(check.details["tables"]) == ["shop.main.a", "shop.main.b"]


def test_tables_not_checked_are_said_as_such_in_a_passed_baseline_never_counted_as_passed(tmp_path):
    database = sqlite_file(tmp_path / "shop.db", "create table a (id integer primary key);"
                                                 "create table b (id integer primary key);"
                                                 "create table c (id integer primary key);")
    named, _ = run(tmp_path, checks(freshness={"enabled": False}, baselines={"max_tables": 1}),
                   access({"shop": database}))
    check = named[CheckName.DATA_BASELINE]
    assert (check.status, check.summary) == (CheckStatus.PASSED, (
        "1 tables: row counts, keys as expected (the first baseline: recorded for the next verification); "
        "2 more tables not checked (beyond checks.baselines.max_tables: 1)"))
    assert check.details["not_checked"] == ["shop.main.b", "shop.main.c"]
    # Only what was checked is recorded as the baseline the next verification is held to.
    assert list(check.details["tables"]) == ["shop.main.a"]


def test_a_table_a_suite_or_freshness_column_names_is_checked_even_beyond_max_tables(tmp_path):
    database = sqlite_file(tmp_path / "shop.db", """
        create table a (id integer primary key);
        create table b (id integer primary key);
        create table zz (id integer primary key, at timestamp);
        insert into zz (at) values ('2026-01-01 11:59:00');""")
    settings = checks(baselines={"max_tables": 1}, expectations={"shop": [
        {"table": "zz", "expect": [{"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}}]}]},
        freshness={"auto": False, "columns": {"shop": [{"table": "main.zz", "column": "at"}]}})
    named, _ = run(tmp_path, settings, access({"shop": database}))
    assert named["data:zz"].status is CheckStatus.PASSED, named["data:zz"].summary
    assert named[CheckName.DATA_FRESHNESS].status is CheckStatus.PASSED, named[CheckName.DATA_FRESHNESS].summary
    assert named[CheckName.DATA_FRESHNESS].details["notes"] == [
        "1 tables not looked at for timestamp columns (beyond checks.baselines.max_tables: 1)"]
    baseline = named[CheckName.DATA_BASELINE]
    assert list(baseline.details["tables"]) == ["shop.main.a", "shop.main.zz"]
    assert baseline.details["not_checked"] == ["shop.main.b"]


# -- read back, without GX: what the runner does with outcomes that are not a count -----------------

def _batch(*outcomes: Outcome) -> _Batch:
    table = Table("shop", "public", "orders", [Column("id", "INTEGER", None, False)], ["id"])
    return _Batch("table-0", "shop", table, None, "database shop, table public.orders", [], outcomes=list(outcomes))


def test_a_row_count_that_raised_is_one_error_and_no_count_at_all_is_another():
    runner = DataCheckRunner(Settings(), "shop", [], {}, 3600.0)
    raised = Outcome("expect_table_row_count_to_be_between", {"min_value": 0}, {ROLE: "rows"}, None, None,
                     "table is gone")
    table = _batch().table
    check = runner._baseline_check([_batch(raised)], [table], [table.qualified], [])
    assert (check.status, check.summary) == (CheckStatus.ERROR, "1 baseline expectations could not be evaluated")
    assert check.findings == ["database shop, table public.orders: expect_table_row_count_to_be_between(min_value=0): "
                              "table is gone"]
    check = runner._baseline_check([_batch()], [table], [table.qualified], [])
    assert check.findings == ["database shop, table public.orders: no row count came back"]
    # A count that is not a number is no count.
    text = Outcome("expect_table_row_count_to_be_between", {"min_value": 0}, {ROLE: "rows"}, True, "3", None)
    assert runner._baseline_check([_batch(text)], [table], [table.qualified], []).findings == [
        "database shop, table public.orders: no row count came back"]
    errored = _batch()
    errored.error = "Great Expectations returned no result for it"
    assert runner._baseline_check([errored], [table], [table.qualified], []).findings == [
        "database shop, table public.orders: Great Expectations returned no result for it"]


# --- what a verification is held to (issue 29, class 2): said in the check ----------------------------------

RULE = "held only to a passed verification of the same database (source, name, system id) that restored the same point"
AT = "2026-11-20T00:00:00+00:00"


def test_a_point_in_time_with_no_comparable_run_records_its_own_baseline_and_says_so(tmp_path):
    database = sqlite_file(tmp_path / "shop.db", _first_script())
    named, _ = run(tmp_path, checks(freshness={"enabled": False}), access({"shop": database}),
                   basis=BaselineBasis(AT))
    check = named[CheckName.DATA_BASELINE]
    assert check.status is CheckStatus.PASSED
    assert check.summary == (f"5 tables: row counts, keys as expected (the first baseline of the point {AT}: recorded "
                             "for later verifications of the same point; verifications of other points are not held "
                             "to it, nor this one to theirs)")
    assert check.details["baseline"] == {"point": AT, "compared_with": None, "rule": RULE}


def test_the_run_held_to_and_how_it_was_found_are_in_the_details(first, tmp_path):
    database = sqlite_file(tmp_path / "shop.db", _first_script())
    before = previous_baseline(first[CheckName.DATA_BASELINE].details)
    named, _ = run(tmp_path, checks(freshness={"enabled": False}), access({"shop": database}), before,
                   basis=BaselineBasis(AT, "r7", Match.IDENTITY))
    check = named[CheckName.DATA_BASELINE]
    assert check.status is CheckStatus.PASSED and "first baseline" not in check.summary
    assert check.details["baseline"] == {"point": AT, "compared_with": "r7", "rule": RULE, "matched_by": "identity"}
    named, _ = run(tmp_path, checks(freshness={"enabled": False}), access({"shop": database}), before,
                   basis=BaselineBasis("latest", "r6", Match.NAME))
    assert named[CheckName.DATA_BASELINE].details["baseline"] == {
        "point": "latest", "compared_with": "r6", "rule": RULE, "matched_by": "source and name",
        "note": NAME_MATCH_NOTE}


def test_the_basis_alone():
    assert BaselineBasis().first() == " (the first baseline: recorded for the next verification)"
    assert BaselineBasis().details() == {"point": "latest", "compared_with": None, "rule": RULE}
    assert BaselineBasis(AT).first().startswith(f" (the first baseline of the point {AT}: ")
