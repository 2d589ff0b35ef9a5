"""Freshness: the newest row of tables with a timestamp column against the restore point, in words
(describe), judged (judge), and run for real on SQLite files (timestamps without a time zone there)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from tests.unit.checks.sqlite import POINT, access, checks, run, sqlite_file
from verification.checks.baseline import ROLE
from verification.checks.freshness import (
    AUTOMATIC,
    CONFIGURED,
    TABLE,
    Watched,
    as_utc,
    describe,
    expectation,
    judge,
    pair,
)
from verification.checks.profile import Column, Table
from verification.checks.results import Outcome
from verification.model import CheckKind, CheckName, CheckStatus

ORDERS = Table("shop", "public", "orders", [Column("created_at", "TIMESTAMP", "now()", False)])


def _watched(name: str = "created_at", configured: bool = False, max_age: float = 3600.0,
             aware: bool = False) -> Watched:
    return Watched(ORDERS, Column(name, "TIMESTAMP", None, True, aware), max_age, configured)


# -- words ----------------------------------------------------------------------------------------

@pytest.fixture
def tokyo(monkeypatch: pytest.MonkeyPatch):
    """The host's own time zone far from UTC, so that reading a naive time as local time shows."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_observed_values_are_read_as_utc_naive_ones_as_utc_and_anything_else_is_no_time(tokyo):
    assert as_utc("2026-01-01 11:59:58") == datetime(2026, 1, 1, 11, 59, 58, tzinfo=UTC)
    assert as_utc(datetime(2026, 1, 1, 11, 59, 58)) == datetime(2026, 1, 1, 11, 59, 58, tzinfo=UTC)
    got = as_utc("2026-01-01T12:59:58+01:00")
    assert got == datetime(2026, 1, 1, 11, 59, 58, tzinfo=UTC) and got.tzinfo is UTC
    assert as_utc("yesterday") is None
    assert as_utc(1767268798) is None
    assert as_utc(None) is None


def test_a_newest_row_at_the_restore_point_or_the_backup_end_itself_is_before_and_after_them():
    assert describe("t.c", POINT, POINT, POINT) == ("newest row in t.c: 2026-01-01T12:00:00+00:00, 0 s before the "
                                                    "restore point (0 s after the newest backup ended)")
    half = POINT - timedelta(seconds=0.5)
    assert describe("t.c", half, POINT, half) == ("newest row in t.c: 2026-01-01T11:59:59.500000+00:00, 0 s before "
                                                  "the restore point (0 s after the newest backup ended)")


def test_describe_says_the_newest_row_against_the_restore_point_and_the_backup_end():
    newest = POINT - timedelta(seconds=2)
    assert describe("shop.public.orders.created_at", newest, POINT, POINT + timedelta(minutes=5)) == (
        "newest row in shop.public.orders.created_at: 2026-01-01T11:59:58+00:00, 2 s before the restore point "
        "(5.0 min before the newest backup ended)")
    assert describe("t.c", POINT + timedelta(seconds=30), POINT, POINT) == (
        "newest row in t.c: 2026-01-01T12:00:30+00:00, 30 s AFTER the restore point (30 s after the newest backup "
        "ended)")
    assert describe("t.c", newest, POINT, None) == "newest row in t.c: 2026-01-01T11:59:58+00:00, 2 s before the " \
                                                   "restore point"
    assert describe("t.c", None, POINT, POINT) == "t.c: no timestamp (the column is empty or all NULL)"


@pytest.mark.parametrize(("seconds", "said"), [(119, "119 s"), (120, "2.0 min"), (7199, "120.0 min"),
                                               (7200, "2.0 h"), (172799, "48.0 h"), (172800, "2.0 days"),
                                               (86400 * 31.5, "31.5 days"),
                                               # just past a rounding boundary: each unit's own divisor
                                               (7381, "2.1 h"), (177121, "2.1 days")])
def test_ages_are_said_in_a_unit_that_fits(seconds, said):
    assert describe("t.c", POINT - timedelta(seconds=seconds), POINT, None).endswith(f", {said} before the restore "
                                                                                     "point")


def test_the_expectation_bound_is_the_oldest_newest_row_allowed_naive_in_utc_for_a_naive_column(tokyo):
    point = datetime(2026, 1, 1, 13, 0, tzinfo=timezone(timedelta(hours=1)))
    assert expectation(_watched(max_age=60), point) == {
        "type": "expect_column_max_to_be_between", "kwargs": {"column": "created_at", "min_value": "2026-01-01T11:59:00"},
        "meta": {ROLE: AUTOMATIC, TABLE: "shop.public.orders"}}
    assert expectation(_watched(configured=True, max_age=60, aware=True), point) == {
        "type": "expect_column_max_to_be_between",
        "kwargs": {"column": "created_at", "min_value": "2026-01-01T12:59:00+01:00"},
        "meta": {ROLE: CONFIGURED, TABLE: "shop.public.orders"}}


# -- paired ---------------------------------------------------------------------------------------

def _outcome(column: str, table: str = "shop.public.orders", observed: object = "2026-01-01 11:00:00") -> Outcome:
    return Outcome("expect_column_max_to_be_between", {"column": column, "min_value": "2026-01-01T11:00:00"},
                   {ROLE: AUTOMATIC, TABLE: table}, True, observed, None)


def test_results_are_paired_with_their_columns_by_table_and_column_whatever_their_order():
    created, updated = _watched("created_at"), _watched("updated_at")
    first, second = _outcome("created_at", observed="one"), _outcome("updated_at", observed="two")
    assert pair([created, updated], [second, first]) == ([(created, first), (updated, second)], [])
    assert pair([created, updated], [first, second]) == ([(created, first), (updated, second)], [])


def test_a_column_without_its_result_or_a_result_for_another_table_or_column_is_said_never_paired():
    created, updated = _watched("created_at"), _watched("updated_at")
    elsewhere = _outcome("updated_at", table="shop.public.refunds")
    stray = _outcome("shipped_at")
    paired, unpaired = pair([created, updated], [elsewhere, _outcome("created_at"), stray])
    assert [(w.column.name, o.kwargs["column"], o.meta[TABLE]) for w, o in paired] == [
        ("created_at", "created_at", "shop.public.orders")]
    assert unpaired == [
        "shop.public.orders.updated_at: no result came back for it",
        "a result for no column watched: expect_column_max_to_be_between(column='updated_at', "
        "min_value='2026-01-01T11:00:00')",
        "a result for no column watched: expect_column_max_to_be_between(column='shipped_at', "
        "min_value='2026-01-01T11:00:00')"]
    # Two results for one column: the first is its own, the second is said.
    twice = _outcome("created_at", observed="again")
    assert pair([created], [_outcome("created_at"), twice])[1] == [
        "a result for no column watched: expect_column_max_to_be_between(column='created_at', "
        "min_value='2026-01-01T11:00:00')"]
    assert pair([created], []) == ([], ["shop.public.orders.created_at: no result came back for it"])


# -- judged ---------------------------------------------------------------------------------------

def test_one_quiet_table_among_fresh_ones_fails_nothing_and_the_freshest_is_the_datas_point():
    fresh, quiet = _watched("created_at"), _watched("updated")
    judged = judge([(fresh, "a.created_at", "2026-01-01 11:59:58"), (quiet, "b.updated", "2025-06-01 00:00:00")],
                   POINT, None, 3600)
    assert (judged.findings, judged.notes) == ([], [])
    assert judged.said == ["newest row in a.created_at: 2026-01-01T11:59:58+00:00, 2 s before the restore point",
                           "newest row in b.updated: 2025-06-01T00:00:00+00:00, 214.5 days before the restore point"]
    assert judged.data_point == datetime(2026, 1, 1, 11, 59, 58, tzinfo=UTC)
    assert judged.data_rpo_seconds == 2.0


def test_every_automatic_column_older_than_the_rpo_fails_naming_each():
    judged = judge([(_watched("a"), "t.a", "2026-01-01 10:00:00"), (_watched("b"), "t.b", "2026-01-01 09:00:00")],
                   POINT, None, 3600)
    assert judged.findings == ["the newest row of every table with a timestamp is older than the RPO allows "
                               "(60.0 min before the restore point 2026-01-01T12:00:00+00:00): "
                               "t.a (2026-01-01T10:00:00+00:00), t.b (2026-01-01T09:00:00+00:00)"]
    assert judged.data_rpo_seconds == 7200.0
    # Exactly at the RPO is allowed.
    assert judge([(_watched("a"), "t.a", "2026-01-01 11:00:00")], POINT, None, 3600).findings == []


def test_a_configured_column_fails_alone_beyond_its_own_limit():
    configured = _watched("c", configured=True, max_age=60)
    judged = judge([(configured, "t.c", "2026-01-01 11:58:00"), (_watched("a"), "t.a", "2026-01-01 11:59:59")],
                   POINT, None, 3600)
    assert judged.findings == ["t.c: newest row 2026-01-01T11:58:00+00:00 is 2.0 min older than the restore point "
                               "2026-01-01T12:00:00+00:00; at most 60 s is allowed"]
    assert judged.data_rpo_seconds == 1.0
    # Exactly at its limit is allowed.
    assert judge([(configured, "t.c", "2026-01-01 11:59:00")], POINT, None, 3600).findings == []


def test_no_timestamp_is_a_finding_for_a_configured_column_a_note_for_an_automatic_one():
    judged = judge([(_watched("c", configured=True), "t.c", None), (_watched("a"), "t.a", None)], POINT, None, 3600)
    assert judged.findings == ["t.c: no timestamp to judge freshness by"]
    assert judged.notes == ["t.a: no timestamp to judge freshness by"]
    assert (judged.data_point, judged.data_rpo_seconds) == (None, None)


def test_a_newest_row_at_or_just_before_the_restore_point_is_not_after_it():
    for newest in (POINT, POINT - timedelta(seconds=0.5)):
        judged = judge([(_watched(), "t.c", newest.isoformat())], POINT, None, 3600.0)
        assert (judged.notes, judged.findings) == ([], [])


def test_a_newest_row_after_the_restore_point_is_noted_and_the_data_rpo_is_never_negative():
    judged = judge([(_watched("a"), "t.a", "2026-01-01 12:00:01")], POINT, None, 3600)
    assert judged.findings == []
    assert judged.notes == ["t.a: newest row 2026-01-01T12:00:01+00:00 is after the restore point "
                            "2026-01-01T12:00:00+00:00"]
    assert judged.data_rpo_seconds == 0.0


# -- run ------------------------------------------------------------------------------------------

SHOP = """
create table orders (id integer primary key, total real, created_at timestamp default current_timestamp);
insert into orders (total, created_at) values (1, '2026-01-01 10:00:00'), (2, '2026-01-01 11:59:58');
create table lookup (code text primary key, updated datetime);
insert into lookup values ('eur', '2025-06-01 00:00:00');
create table events (id integer primary key, created timestamp);
create table plain (id integer primary key, note text, shipped date);
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("shop")
    return folder, sqlite_file(folder / "shop.db", SHOP)


def test_fresh_data_passes_with_the_newest_row_and_naive_timestamps_are_read_as_utc(shop, tmp_path):
    # The restore point in another zone: a naive timestamp read as local time would be an hour off.
    point = datetime(2026, 1, 1, 13, 0, tzinfo=timezone(timedelta(hours=1)))
    named, _ = run(tmp_path, checks(), access({"shop": shop[1]}, point=point))
    check = named[CheckName.DATA_FRESHNESS]
    assert (check.status, check.kind, check.required, check.findings) == (CheckStatus.PASSED, CheckKind.DATA, True, [])
    assert check.summary == ("newest row in shop.main.orders.created_at: 2026-01-01T11:59:58+00:00, 2 s before the "
                             "restore point (5.0 min before the newest backup ended)")
    assert check.details == {
        "restore_point": "2026-01-01T13:00:00+01:00", "rpo_seconds": 3600.0,
        "restore_point_from": "the restored server's last replayed transaction",
        "backup_end": "2026-01-01T12:05:00+00:00",
        "newest": ["shop.main.events.created: no timestamp (the column is empty or all NULL)",
                   "newest row in shop.main.lookup.updated: 2025-06-01T00:00:00+00:00, 214.5 days before the restore "
                   "point (214.5 days before the newest backup ended)",
                   "newest row in shop.main.orders.created_at: 2026-01-01T11:59:58+00:00, 2 s before the restore point "
                   "(5.0 min before the newest backup ended)"],
        "notes": ["shop.main.events.created: no timestamp to judge freshness by"],
        "data_point": "2026-01-01T11:59:58+00:00", "data_rpo_seconds": 2.0, "naive_timestamps_read_as": "UTC"}


def test_every_automatic_column_stale_beyond_the_rpo_fails_naming_the_tables(shop, tmp_path):
    point = POINT + timedelta(days=2)
    named, _ = run(tmp_path, checks(baselines={"enabled": False}), access({"shop": shop[1]}, point=point))
    assert list(named) == [CheckName.DATA_FRESHNESS]
    check = named[CheckName.DATA_FRESHNESS]
    finding = ("the newest row of every table with a timestamp is older than the RPO allows (60.0 min before the "
               "restore point 2026-01-03T12:00:00+00:00): shop.main.lookup.updated (2025-06-01T00:00:00+00:00), "
               "shop.main.orders.created_at (2026-01-01T11:59:58+00:00)")
    assert (check.status, check.summary, check.findings) == (CheckStatus.FAILED, finding, [finding])
    assert check.details["data_rpo_seconds"] == 172802.0


def test_a_configured_column_stale_or_missing_fails_each_named(shop, tmp_path):
    columns = {"shop": [{"table": "lookup", "column": "updated", "max_age_seconds": 86400},
                        {"table": "main.orders", "column": "shipped_at"},
                        {"table": "refunds", "column": "created", "database": "shop"}]}
    named, _ = run(tmp_path, checks(baselines={"enabled": False}, freshness={"columns": columns}),
                   access({"shop": shop[1]}))
    check = named[CheckName.DATA_FRESHNESS]
    assert check.status is CheckStatus.FAILED
    assert check.findings == [
        "freshness column main.orders.shipped_at (database shop) does not exist in the restored data",
        "freshness column refunds.created (database shop) does not exist in the restored data",
        "shop.main.lookup.updated: newest row 2025-06-01T00:00:00+00:00 is 214.5 days older than the restore point "
        "2026-01-01T12:00:00+00:00; at most 24.0 h is allowed"]
    assert check.summary == check.findings[0]
    assert check.details["newest"] == [  # lookup.updated once: configured, so not also found automatically
        "shop.main.events.created: no timestamp (the column is empty or all NULL)",
        "newest row in shop.main.lookup.updated: 2025-06-01T00:00:00+00:00, 214.5 days before the restore point "
        "(214.5 days before the newest backup ended)",
        "newest row in shop.main.orders.created_at: 2026-01-01T11:59:58+00:00, 2 s before the restore point "
        "(5.0 min before the newest backup ended)"]
    # orders.created_at, found automatically, keeps the data fresh: no finding of its own.
    assert check.details["data_point"] == "2026-01-01T11:59:58+00:00"


def test_a_configured_column_within_its_limit_passes(shop, tmp_path):
    columns = {"shop": [{"table": "orders", "column": "created_at", "max_age_seconds": 5}]}
    named, _ = run(tmp_path, checks(baselines={"enabled": False}, freshness={"columns": columns, "auto": False}),
                   access({"shop": shop[1]}))
    check = named[CheckName.DATA_FRESHNESS]
    assert (check.status, check.summary) == (CheckStatus.PASSED, (
        "newest row in shop.main.orders.created_at: 2026-01-01T11:59:58+00:00, 2 s before the restore point "
        "(5.0 min before the newest backup ended)"))
    assert len(check.details["newest"]) == 1  # auto: false watches only what is named


def test_without_a_replayed_transaction_freshness_is_measured_at_the_backup_end_or_skipped(shop, tmp_path):
    named, _ = run(tmp_path, checks(baselines={"enabled": False}), access({"shop": shop[1]}, point=None))
    check = named[CheckName.DATA_FRESHNESS]
    assert (check.details["restore_point"], check.details["restore_point_from"]) == (
        "2026-01-01T12:05:00+00:00", "the end of the newest backup (the server replayed no transaction after it)")
    named, _ = run(tmp_path / "none", checks(baselines={"enabled": False}),
                   access({"shop": shop[1]}, point=None, backup_end=None))
    check = named[CheckName.DATA_FRESHNESS]
    assert (check.status, check.summary, check.required, check.kind) == (
        CheckStatus.SKIPPED, "not judged: neither the server nor the backup said which point was restored", False,
        CheckKind.DATA)


def test_without_a_timestamp_column_freshness_is_skipped_saying_how_to_name_one(tmp_path):
    database = sqlite_file(tmp_path / "shop.db", "create table plain (id integer primary key, shipped date);")
    named, _ = run(tmp_path, checks(baselines={"enabled": False}), access({"shop": database}))
    check = named[CheckName.DATA_FRESHNESS]
    assert (check.status, check.summary, check.required) == (
        CheckStatus.SKIPPED, "no table has a timestamp column that says when its rows were written (name one in "
        "checks.freshness.columns)", False)


def test_a_configured_column_missing_fails_even_when_no_other_column_is_watched(tmp_path):
    database = sqlite_file(tmp_path / "shop.db", "create table plain (id integer primary key, shipped date);")
    columns = {"shop": [{"table": "plain", "column": "shipped_at"}]}
    named, _ = run(tmp_path, checks(baselines={"enabled": False}, freshness={"columns": columns}),
                   access({"shop": database}))
    check = named[CheckName.DATA_FRESHNESS]
    assert (check.status, check.findings) == (CheckStatus.FAILED, [
        "freshness column plain.shipped_at (database shop) does not exist in the restored data"])
    assert check.details["newest"] == []


def test_two_columns_whose_results_come_back_in_another_order_are_each_judged_by_their_own(tmp_path, monkeypatch):
    """GX need not return results in the suite's order (simulated: the suite it is given runs the
    freshness expectations last first): each result is still the one of its own column."""
    from great_expectations.core import expectation_suite

    class Reversed(expectation_suite.ExpectationSuite):
        def __init__(self, *args: Any, expectations: list[Any] | None = None, **kwargs: Any) -> None:
            if args and expectations:  # the runner's call, not GX's own
                expectations = expectations[::-1]
            super().__init__(*args, expectations=expectations, **kwargs)

    monkeypatch.setattr(expectation_suite, "ExpectationSuite", Reversed)
    database = sqlite_file(tmp_path / "shop.db", """
        create table orders (id integer primary key, created_at timestamp, updated_at timestamp);
        insert into orders (created_at, updated_at) values ('2025-06-01 00:00:00', '2026-01-01 11:59:58');""")
    columns = {"shop": [{"table": "orders", "column": "created_at", "max_age_seconds": 60},
                        {"table": "orders", "column": "updated_at", "max_age_seconds": 60}]}
    named, _ = run(tmp_path, checks(baselines={"enabled": False}, freshness={"columns": columns, "auto": False}),
                   access({"shop": database}))
    check = named[CheckName.DATA_FRESHNESS]
    assert (check.status, check.findings) == (CheckStatus.FAILED, [
        "shop.main.orders.created_at: newest row 2025-06-01T00:00:00+00:00 is 214.5 days older than the restore "
        "point 2026-01-01T12:00:00+00:00; at most 60 s is allowed"])
    assert check.details["newest"] == [
        "newest row in shop.main.orders.created_at: 2025-06-01T00:00:00+00:00, 214.5 days before the restore point "
        "(214.5 days before the newest backup ended)",
        "newest row in shop.main.orders.updated_at: 2026-01-01T11:59:58+00:00, 2 s before the restore point "
        "(5.0 min before the newest backup ended)"]
