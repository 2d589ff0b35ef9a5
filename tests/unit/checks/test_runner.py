"""The data checks run for real: Great Expectations 1.x against SQLite files standing in for a restored
server (its SQL data source and SQLAlchemy's inspector read them as they read PostgreSQL). Users'
suites, deprecated SQL checks, what cannot be placed or evaluated, and the evidence written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.checks.sqlite import access, checks, run, sqlite_file
from verification.model import CheckKind, CheckResult, CheckStatus

SHOP = """
create table orders (id integer primary key, customer_id integer not null, total real,
                     created_at timestamp default current_timestamp);
insert into orders (customer_id, total, created_at) values (1, 10.5, '2026-01-01 10:00:00'),
    (2, 20.0, '2026-01-01 11:00:00'), (2, 7.25, '2026-01-01 11:59:58');
create table customers (id integer primary key, email text);
insert into customers (email) values ('a@example.com'), (null);
"""


def _expect(kind: str, **kwargs: Any) -> dict[str, Any]:
    return {"type": kind, "kwargs": kwargs}


SUITES = [
    {"table": "orders", "expect": [_expect("expect_table_row_count_to_be_between", min_value=3, max_value=3),
                                   _expect("expect_column_max_to_be_between", column="total", max_value=100)]},
    {"table": "main.customers", "expect": [_expect("expect_column_values_to_not_be_null", column="email")]},
    {"query": "select customer_id, sum(total) as spent from orders group by customer_id", "name": "spend",
     "expect": [_expect("expect_column_values_to_be_between", column="spent", min_value=0)]},
    {"table": "orders", "name": "orders-shipped", "expect": [_expect("expect_column_values_to_not_be_null",
                                                                     column="shipped")]},
    {"table": "refunds", "required": False, "expect": [_expect("expect_table_row_count_to_be_between", min_value=1)]},
    {"table": "public.ledger", "database": "billing", "required": False,
     "expect": [_expect("expect_table_row_count_to_be_between", min_value=1)]},
]
SQL = [{"name": "orders", "query": "select count(*) from orders", "expect": 3, "database": "shop"},
       {"name": "customers", "query": "select count(*) from customers", "expect": "5", "database": "shop"},
       {"name": "nothing", "query": "select null", "expect": "1", "database": "shop"}]


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, CheckResult], Any, Path]:
    folder = tmp_path_factory.mktemp("shop")
    database = sqlite_file(folder / "shop.db", SHOP)
    named, evidence = run(folder, checks(expectations={"shop": SUITES}, sql=SQL), access({"shop": database}))
    return named, evidence, folder


def test_every_check_comes_back_once_in_order_and_of_kind_data(shop):
    named, _, _ = shop
    assert list(named) == ["data:orders", "data:main.customers", "data:spend", "data:orders-shipped", "sql:orders",
                           "sql:customers", "sql:nothing", "data:refunds", "data:public.ledger", "data_baseline",
                           "data_freshness"]
    assert {check.kind for check in named.values()} == {CheckKind.DATA}


def test_a_suite_that_passes_says_what_was_observed(shop):
    check = shop[0]["data:orders"]
    assert check.status is CheckStatus.PASSED
    assert check.summary == ("2 expectations met on database shop, table main.orders (observed "
                             "expect_table_row_count_to_be_between: 3; expect_column_max_to_be_between: 20.0)")
    assert check.findings == []
    assert check.evidence == "ev/data-checks/user-0.json"
    assert check.details == {
        "origin": "checks.expectations.shop[0] (orders)", "database": "shop", "table": "main.orders",
        "expectations": [
            {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 3, "max_value": 3},
             "success": True, "observed": 3},
            {"type": "expect_column_max_to_be_between", "kwargs": {"column": "total", "max_value": 100.0},
             "success": True, "observed": 20.0}]}


def test_a_query_suite_passes_on_the_rows_of_its_query(shop):
    check = shop[0]["data:spend"]
    assert (check.status, check.summary) == (CheckStatus.PASSED, (
        "1 expectations met on database shop, query spend (observed expect_column_values_to_be_between: "
        "'0 unexpected (0% of rows)')"))
    assert check.details["query"] == "select customer_id, sum(total) as spent from orders group by customer_id"
    assert "table" not in check.details


def test_a_failed_expectation_names_database_table_expectation_and_observed_value(shop):
    check = shop[0]["data:main.customers"]
    assert check.status is CheckStatus.FAILED
    assert check.required is True
    assert check.summary == "1 of 1 expectations failed on database shop, table main.customers"
    assert check.findings == ["database shop, table main.customers: expect_column_values_to_not_be_null("
                              "column='email') failed, observed '1 unexpected (50% of rows), e.g. [None]'"]
    assert check.details["expectations"] == [{"type": "expect_column_values_to_not_be_null",
                                              "kwargs": {"column": "email"}, "success": False,
                                              "observed": "1 unexpected (50% of rows), e.g. [None]"}]


def test_an_expectation_gx_cannot_evaluate_is_an_error_never_a_pass(shop):
    check = shop[0]["data:orders-shipped"]
    assert check.status is CheckStatus.ERROR
    assert check.summary == "database shop, table main.orders: 1 of 1 expectations could not be evaluated"
    assert check.findings == ["database shop, table main.orders: expect_column_values_to_not_be_null(column='shipped'): "
                              'Error: The column "shipped" in BatchData does not exist.']
    assert check.details["expectations"][0]["success"] is None


def test_a_suite_on_a_missing_table_fails_naming_it(shop):
    check = shop[0]["data:refunds"]
    assert (check.status, check.summary, check.findings) == (
        CheckStatus.FAILED, "table refunds does not exist in database shop", ["database shop: table refunds is missing"])
    assert check.details == {"origin": "checks.expectations.shop[4] (refunds)"}
    assert check.evidence is None
    assert check.required is False  # as the suite said


def test_a_suite_naming_a_database_the_server_does_not_hold_is_an_error(shop):
    check = shop[0]["data:public.ledger"]
    assert (check.status, check.summary) == (
        CheckStatus.ERROR, "not run: it names database billing, which the restored server does not hold (it holds shop)")
    assert check.required is False  # as the suite said
    assert check.details == {"origin": "checks.expectations.shop[5] (public.ledger)"}


def test_a_deprecated_sql_check_that_holds_passes_with_its_value(shop):
    check = shop[0]["sql:orders"]
    assert check.status is CheckStatus.PASSED
    assert (check.details["value"], check.details["expect"]) == ("3", "3")
    assert check.details["origin"] == "checks.sql (orders)"
    assert check.details["query"] == "select count(*) from orders"
    assert check.summary == ("2 expectations met on database shop, query orders (observed unexpected_rows_expectation: 0; "
                             "expect_column_values_to_be_in_set: '0 unexpected (0% of rows)')")


def test_a_deprecated_sql_check_that_does_not_hold_fails_saying_the_value_it_got(shop):
    check = shop[0]["sql:customers"]
    assert check.status is CheckStatus.FAILED
    assert (check.details["value"], check.details["expect"]) == ("2", "5")
    assert check.summary == "2 of 2 expectations failed on database shop, query customers"
    assert check.findings == [
        "database shop, query customers: unexpected_rows_expectation(unexpected_rows_query=\"SELECT * FROM {batch} "
        "WHERE value IS NULL OR value NOT IN ('5')\") failed, observed 1",
        "database shop, query customers: expect_column_values_to_be_in_set(column='value', value_set=['5']) failed, "
        "observed \"1 unexpected (100% of rows), e.g. ['2']\""]


def test_a_deprecated_sql_check_whose_query_gives_null_fails_with_no_value(shop):
    check = shop[0]["sql:nothing"]
    assert check.status is CheckStatus.FAILED
    assert (check.details["value"], check.details["expect"]) == (None, "1")
    assert check.findings == ["database shop, query nothing: unexpected_rows_expectation(unexpected_rows_query=\"SELECT * "
                              "FROM {batch} WHERE value IS NULL OR value NOT IN ('1')\") failed, observed 1"]


def test_each_validation_result_and_the_data_docs_are_in_the_evidence(shop):
    _, evidence, folder = shop
    # One validation per table, named after its first suite: orders holds user-0, user-3 and its
    # baseline (table-1), customers user-1 and its baseline (table-0); each query is one of its own.
    assert sorted(evidence.files) == [
        "data-checks/user-0.json", "data-checks/user-1.json", "data-checks/user-2.json", "data-checks/user-6.json",
        "data-checks/user-7.json", "data-checks/user-8.json", "data-docs/index.html"]
    assert evidence.files["data-docs/index.html"] == "ev/data-docs/index.html"
    assert shop[0]["data:orders-shipped"].evidence == shop[0]["data:orders"].evidence == "ev/data-checks/user-0.json"
    written = json.loads((folder / "ev" / "data-checks" / "user-1.json").read_text())
    assert (written["suite_name"], written["success"]) == ("user-1", False)
    by_batch = {(r["expectation_config"]["meta"]["restoreproof_batch"], r["expectation_config"]["type"]): r
                for r in written["results"]}
    assert sorted(by_batch) == [("table-0", "expect_column_values_to_be_unique"),
                                ("table-0", "expect_column_values_to_not_be_null"),
                                ("table-0", "expect_table_row_count_to_be_between"),
                                ("user-1", "expect_column_values_to_not_be_null")]
    assert by_batch[("user-1", "expect_column_values_to_not_be_null")]["result"]["unexpected_count"] == 1
    index = (folder / "ev" / "data-docs" / "index.html").read_text()
    for suite in ("user-0", "user-1", "user-8"):
        assert suite in index
    assert (folder / "ev" / "data-docs" / "expectations" / "user-1.html").is_file()


def test_with_several_databases_a_suite_must_say_which(tmp_path):
    files = {"shop": sqlite_file(tmp_path / "shop.db", "create table orders (id integer primary key);"),
             "billing": sqlite_file(tmp_path / "billing.db", "create table ledger (id integer primary key);"
                                                             "insert into ledger values (1), (2);")}
    settings = checks(baselines={"enabled": False}, freshness={"enabled": False}, expectations={"shop": [
        {"table": "orders", "expect": [_expect("expect_table_row_count_to_be_between", min_value=0)]},
        {"table": "ledger", "database": "billing", "expect": [_expect("expect_table_row_count_to_be_between",
                                                                       min_value=2)]}]})
    named, evidence = run(tmp_path, settings, access(files, main=None))
    assert list(named) == ["data:ledger", "data:orders"]  # placed ones first, then what could not be
    assert (named["data:orders"].status, named["data:orders"].summary) == (
        CheckStatus.ERROR, "not run: the restored server holds several databases: say which with database:")
    assert (named["data:ledger"].status, named["data:ledger"].summary) == (
        CheckStatus.PASSED, "1 expectations met on database billing, table main.ledger (observed "
        "expect_table_row_count_to_be_between: 2)")
    assert sorted(evidence.files) == ["data-checks/user-1.json", "data-docs/index.html"]


def test_checks_that_cannot_run_are_one_error_with_secrets_scrubbed(tmp_path):
    def broken(database: str) -> str:
        raise RuntimeError(f"cannot reach {database} as admin:hunter2")

    reach = access({"shop": tmp_path / "shop.db"}, secrets=("hunter2",))
    reach = type(reach)(broken, reach.databases, reach.main_database, reach.restore_point, reach.backup_end,
                        reach.secrets)
    named, evidence = run(tmp_path, checks(), reach)
    assert list(named) == ["data_checks"]
    check = named["data_checks"]
    assert (check.status, check.summary, check.kind) == (
        CheckStatus.ERROR, "the data checks could not run: RuntimeError: cannot reach shop as admin:********",
        CheckKind.DATA)
    written = (tmp_path / "ev" / "data-checks.error.txt").read_text()
    assert "RuntimeError: cannot reach shop as admin:********" in written
    assert "hunter2" not in written
    assert evidence.files == {"data-checks.error.txt": "ev/data-checks.error.txt"}


def test_a_result_not_recognised_is_an_error_naming_it_never_a_pass(tmp_path, monkeypatch):
    from verification.checks import runner
    from verification.checks.results import UnrecognisedResult

    def unrecognised(result: Any) -> Any:
        if result.expectation_config.type == "expect_column_max_to_be_between":
            raise UnrecognisedResult("expect_column_max_to_be_between: a result that says neither success nor failure "
                                     "('maybe')")
        return runner_outcome_of(result)

    runner_outcome_of = runner.outcome_of
    monkeypatch.setattr(runner, "outcome_of", unrecognised)
    database = sqlite_file(tmp_path / "shop.db", SHOP)
    settings = checks(baselines={"enabled": False}, freshness={"enabled": False},
                      expectations={"shop": SUITES[:2]})
    named, _ = run(tmp_path, settings, access({"shop": database}))
    check = named["data:orders"]
    assert (check.status, check.summary, check.findings) == (CheckStatus.ERROR, (
        "database shop, table main.orders: not evaluated: an output not recognised: expect_column_max_to_be_between: "
        "a result that says neither success nor failure ('maybe')"), [])
    assert check.evidence == "ev/data-checks/user-0.json"  # GX's own result is kept all the same
    assert named["data:main.customers"].status is CheckStatus.FAILED


def test_fewer_results_than_expectations_is_an_error_never_a_pass(tmp_path, monkeypatch):
    """A GX that lost an expectation on the way (simulated: its suite keeps all but the last)."""
    from great_expectations.core import expectation_suite

    class Losing(expectation_suite.ExpectationSuite):
        def __init__(self, *args: Any, expectations: list[Any] | None = None, **kwargs: Any) -> None:
            if args and expectations:  # the runner's call, not GX's own
                expectations = expectations[:-1]
            super().__init__(*args, expectations=expectations, **kwargs)

    monkeypatch.setattr(expectation_suite, "ExpectationSuite", Losing)
    database = sqlite_file(tmp_path / "shop.db", SHOP)
    settings = checks(baselines={"enabled": False}, freshness={"enabled": False}, expectations={"shop": SUITES[:1]})
    named, _ = run(tmp_path, settings, access({"shop": database}))
    check = named["data:orders"]
    assert (check.status, check.summary) == (CheckStatus.ERROR, (
        "database shop, table main.orders: not evaluated: 2 expectations, 1 results: an output not recognised"))


def test_a_relative_evidence_folder_still_gets_its_data_docs(tmp_path, monkeypatch):
    # report_dir defaults to ./reports: the evidence folder is relative, and GX wants an absolute one.
    monkeypatch.chdir(tmp_path)
    database = sqlite_file(tmp_path / "shop.db", "create table orders (id integer primary key);")
    named, _ = run(Path("relative"), checks(), access({"shop": database}))
    assert named["data_baseline"].status is CheckStatus.PASSED, named["data_baseline"].summary
    assert (tmp_path / "relative" / "ev" / "data-docs" / "index.html").is_file()


SECRET = "s3cr3t-Hunter2-xyz"


def test_the_targets_secrets_are_in_no_evidence_file_and_no_check(tmp_path):
    """A password of the target's (DataAccess.secrets) wherever GX could carry it: in the rows it
    quotes as unexpected, in a query's text, in the connection's URL (here the SQLite file's path)."""
    folder = tmp_path / f"server-{SECRET}"
    folder.mkdir()
    database = sqlite_file(folder / "shop.db", f"""
        create table notes (id integer primary key, body text);
        insert into notes (body) values ('fine'), ('the password is {SECRET}');""")
    settings = checks(expectations={"shop": [
        {"table": "notes", "expect": [_expect("expect_column_values_to_be_in_set", column="body", value_set=["fine"])]},
        {"query": f"select body, '{SECRET}' as tag from notes", "name": "tagged",
         "expect": [_expect("expect_column_values_to_be_in_set", column="tag", value_set=["none"])]}]},
        sql=[{"name": "said", "query": f"select '{SECRET}'", "expect": "x", "database": "shop"}])
    named, evidence = run(tmp_path, settings, access({"shop": database}, secrets=(SECRET,)))
    assert named["data:notes"].status is CheckStatus.FAILED
    assert named["data:notes"].findings == ["database shop, table main.notes: expect_column_values_to_be_in_set("
                                            "column='body', value_set=['fine']) failed, observed \"1 unexpected (50% "
                                            "of rows), e.g. ['the password is ********']\""]
    assert named["data:tagged"].details["query"] == "select body, '********' as tag from notes"
    assert named["sql:said"].details["value"] == "********"
    said = json.dumps([vars(check) for check in named.values()], default=str)
    assert SECRET not in said and "********" in said
    written = [path for path in (tmp_path / "ev").rglob("*") if path.is_file()]
    assert "data-docs/index.html" in evidence.files and len(written) > 10
    assert [path for path in written if SECRET.encode() in path.read_bytes()] == []
    docs = (tmp_path / "ev" / "data-docs" / "validations").rglob("*.html")
    assert any("the password is ********" in path.read_text() for path in docs)


def test_gx_s_deprecation_of_a_table_asset_s_schema_is_not_raised(tmp_path):
    import warnings

    database = sqlite_file(tmp_path / "shop.db", SHOP)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        named, _ = run(tmp_path, checks(expectations={"shop": SUITES[:2]}), access({"shop": database}))
    assert named["data:orders"].status is CheckStatus.PASSED
    assert [str(w.message) for w in caught if "schema_name" in str(w.message)] == []


# -- checks.timeout ---------------------------------------------------------------------------------

@pytest.fixture
def held(monkeypatch):
    """SQLite's `hold(x)`: a query that waits until the test lets it go, standing in for a slow server."""
    import threading

    import sqlalchemy

    from verification.checks.runner import import_gx

    import_gx()  # imported beforehand: its seconds are not what is timed here
    release = threading.Event()

    def connect(connection: Any, _: Any) -> None:
        connection.create_function("hold", 1, lambda value: release.wait(60) and value)

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", connect)
    yield release
    release.set()
    sqlalchemy.event.remove(sqlalchemy.engine.Engine, "connect", connect)


def test_checks_still_running_at_the_timeout_are_errors_naming_it_and_nothing_is_written_after(tmp_path, held):
    import time

    from verification.checks.runner import DataCheckRunner
    from verification.checks.suites import load_suites
    from verification.config import Settings
    from verification.engines.base import Evidence

    database = sqlite_file(tmp_path / "shop.db", SHOP)
    settings = Settings(state_dir=tmp_path / "state", checks=checks(timeout=5, freshness={"enabled": False}, expectations={
        "shop": [SUITES[0], {"query": "select hold(id) as id from orders", "name": "slow",
                             "expect": [_expect("expect_column_values_to_not_be_null", column="id")]}]}))
    runner = DataCheckRunner(settings, "shop", load_suites(settings.checks, "shop"), {}, 3600.0)
    evidence = Evidence(tmp_path / "ev")
    started = time.monotonic()
    results = runner(access({"shop": database}), evidence)
    assert time.monotonic() - started < 6.5
    named = {check.name: check for check in results}
    assert list(named) == ["data:orders", "data:slow", "data_baseline", "data_checks"]
    assert named["data:orders"].status is CheckStatus.PASSED  # evaluated before the time ran out
    assert (named["data:slow"].status, named["data:slow"].summary) == (
        CheckStatus.ERROR, "database shop, query slow: not evaluated: the data checks ran out of time "
        "(checks.timeout: 5 s)")
    # The baseline of orders was in the validation of data:orders (evaluated); that of customers was not.
    assert named["data_baseline"].status is CheckStatus.ERROR
    assert named["data_baseline"].findings == [
        "database shop, table main.customers: the data checks ran out of time (checks.timeout: 5 s)"]
    done = named["data_checks"]
    assert (done.status, done.kind, done.required) == (CheckStatus.ERROR, CheckKind.DATA, True)
    assert done.summary == ("the data checks did not finish in time (checks.timeout: 5 s): 2 of 3 validations not "
                            "evaluated (stopped while validating database shop, query slow); the Data Docs were not "
                            "built")
    assert done.findings == ["database shop, query slow", "database shop, table main.customers"]
    assert evidence.files == {"data-checks/user-0.json": "ev/data-checks/user-0.json"}
    # Let the query end: the worker goes on, and neither records nor writes anything more.
    held.set()
    assert runner.worker is not None
    runner.worker.join(30)
    assert not runner.worker.is_alive()
    assert evidence.files == {"data-checks/user-0.json": "ev/data-checks/user-0.json"}
    assert sorted(p.relative_to(tmp_path / "ev").as_posix() for p in (tmp_path / "ev").rglob("*") if p.is_file()) == [
        "data-checks/user-0.json"]
    assert [check.summary for check in results if check.name == "data:slow"] == [named["data:slow"].summary]


def test_a_server_that_does_not_answer_while_the_tables_are_read_is_one_error_naming_the_timeout(tmp_path, held):
    database = sqlite_file(tmp_path / "shop.db", SHOP)

    def answering_late(name: str) -> str:
        held.wait(60)
        return f"sqlite:///{database}"

    reach = access({"shop": database})
    reach = type(reach)(answering_late, reach.databases, reach.main_database, reach.restore_point, reach.backup_end)
    named, evidence = run(tmp_path, checks(timeout=0.5), reach)
    assert list(named) == ["data_checks"]
    assert (named["data_checks"].status, named["data_checks"].summary) == (
        CheckStatus.ERROR, "the data checks did not finish in time (checks.timeout: 0.5 s): stopped while reading the "
        "tables of the restored databases; nothing was evaluated")
    assert evidence.files == {}


def test_a_batch_with_nothing_unexpected_is_validated_once_without_asking_for_examples(tmp_path, monkeypatch):
    """The examples of unexpected values cost GX a second pass over a table (for a uniqueness check, a
    window over every row): asked for only where something was unexpected, and then shown as before."""
    from verification.checks import runner

    passes: list[tuple[str, str]] = []
    original = runner.DataCheckRunner._checkpoint

    def noted(self: Any, gx: Any, context: Any, definition: Any, validation: Any,
              result_format: dict[str, Any]) -> tuple[Any, Any]:
        passes.append((validation.label, "first" if result_format is runner.FIRST_PASS else "samples"))
        return original(self, gx, context, definition, validation, result_format)

    monkeypatch.setattr(runner.DataCheckRunner, "_checkpoint", noted)
    database = sqlite_file(tmp_path / "shop.db", SHOP)
    unique = [{"table": "customers", "name": "unique-ids",
               "expect": [_expect("expect_column_values_to_be_unique", column="id")]},
              {"table": "orders", "name": "one-order-each",
               "expect": [_expect("expect_column_values_to_be_unique", column="customer_id")]},
              {"table": "orders", "name": "mostly-one-order-each",
               "expect": [_expect("expect_column_values_to_be_unique", column="customer_id", mostly=0.3)]}]
    settings = checks(baselines={"enabled": False}, freshness={"enabled": False}, expectations={"shop": unique})
    named, evidence = run(tmp_path, settings, access({"shop": database}))
    # customers (unique ids): nothing unexpected. orders: both suites on it are one validation,
    # validated again for the examples once, as something in it was unexpected.
    assert passes == [("database shop, table main.customers", "first"),
                      ("database shop, table main.orders", "first"), ("database shop, table main.orders", "samples")]
    assert named["data:unique-ids"].status is CheckStatus.PASSED
    failed = named["data:one-order-each"]
    assert failed.status is CheckStatus.FAILED
    assert failed.findings == ["database shop, table main.orders: expect_column_values_to_be_unique("
                               "column='customer_id') failed, observed '2 unexpected (66.7% of rows), e.g. [2, 2]'"]
    # Passed within `mostly`: what was unexpected is still shown with its examples.
    mostly = named["data:mostly-one-order-each"]
    assert mostly.status is CheckStatus.PASSED and "e.g. [2, 2]" in mostly.summary
    # The Data Docs show one run of each validation: the one whose results were read.
    pages = sorted(path.relative_to(evidence.folder / "data-docs" / "validations").parts[0]
                   for path in (evidence.folder / "data-docs" / "validations").rglob("*.html"))
    assert pages == ["user-0", "user-1"]


# -- one validation per table ----------------------------------------------------------------------

@pytest.fixture
def statements():
    """Every SQL statement sent, as SQLAlchemy sends it (whitespace folded)."""
    import sqlalchemy

    sent: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        sent.append(" ".join(statement.split()))

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", note)
    yield sent
    sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", note)


def test_a_suite_and_the_baseline_of_its_table_read_each_metric_once(tmp_path, statements):
    """The user's row count and uniqueness, and the baseline's row count, uniqueness and not-null of the
    same key: one validation, so one count(*), one uniqueness window and one null count of the table,
    not one per suite; every expectation still has its own result, in its own check."""
    database = sqlite_file(tmp_path / "shop.db", SHOP)
    settings = checks(freshness={"enabled": False}, expectations={"shop": [
        {"table": "orders", "expect": [_expect("expect_table_row_count_to_equal", value=3),
                                       _expect("expect_column_values_to_be_unique", column="id")]}]})
    named, evidence = run(tmp_path, settings, access({"shop": database}))
    orders = [s for s in statements if "orders" in s and "sqlite_master" not in s and "PRAGMA" not in s.upper()]
    assert len([s for s in orders if s.startswith('SELECT count(*) AS "table.row_count"')]) == 1, orders
    assert len([s for s in orders if "OVER (PARTITION BY id)" in s and "unexpected_count" in s]) == 1, orders
    assert len([s for s in orders if '"column_values.nonnull.unexpected_count"' in s]) == 1, orders
    assert named["data:orders"].status is CheckStatus.PASSED
    assert named["data:orders"].summary == (
        "2 expectations met on database shop, table main.orders (observed expect_table_row_count_to_equal: 3; "
        "expect_column_values_to_be_unique: '0 unexpected (0% of rows)')")
    assert [e["type"] for e in named["data:orders"].details["expectations"]] == [
        "expect_table_row_count_to_equal", "expect_column_values_to_be_unique"]
    baseline = named["data_baseline"]
    assert baseline.status is CheckStatus.PASSED
    assert baseline.details["tables"]["shop.main.orders"] == {"rows": 3, "columns": [
        "id", "customer_id", "total", "created_at"]}
    assert sorted(evidence.files) == ["data-checks/table-0.json", "data-checks/user-0.json", "data-docs/index.html"]


def test_a_failure_in_a_suite_stays_in_that_suite_when_its_table_s_baseline_passes(tmp_path):
    """The same expectation type on the same table from a suite (fails: customer_id repeats) and from
    the baseline (passes: the key is unique): each result read back into its own check."""
    database = sqlite_file(tmp_path / "shop.db", SHOP)
    settings = checks(freshness={"enabled": False}, expectations={"shop": [
        {"table": "orders", "expect": [_expect("expect_column_values_to_be_unique", column="customer_id"),
                                       _expect("expect_table_row_count_to_be_between", min_value=4)]}]})
    named, _ = run(tmp_path, settings, access({"shop": database}))
    failed = named["data:orders"]
    assert failed.status is CheckStatus.FAILED
    assert failed.summary == "2 of 2 expectations failed on database shop, table main.orders"
    assert failed.findings == [
        "database shop, table main.orders: expect_column_values_to_be_unique(column='customer_id') failed, observed "
        "'2 unexpected (66.7% of rows), e.g. [2, 2]'",
        "database shop, table main.orders: expect_table_row_count_to_be_between(min_value=4) failed, observed 3"]
    assert named["data_baseline"].status is CheckStatus.PASSED, named["data_baseline"].findings
    assert named["data_baseline"].details["tables"]["shop.main.orders"]["rows"] == 3


def test_a_result_not_recognised_is_an_error_of_its_own_suite_only(tmp_path, monkeypatch):
    from verification.checks import runner

    def unrecognised(result: Any) -> Any:
        if result.expectation_config.type == "expect_column_max_to_be_between":
            raise runner.UnrecognisedResult("expect_column_max_to_be_between: not a result")
        return runner_outcome_of(result)

    runner_outcome_of = runner.outcome_of
    monkeypatch.setattr(runner, "outcome_of", unrecognised)
    database = sqlite_file(tmp_path / "shop.db", SHOP)
    named, _ = run(tmp_path, checks(freshness={"enabled": False}, expectations={"shop": SUITES[:1]}),
                   access({"shop": database}))
    assert (named["data:orders"].status, named["data:orders"].summary) == (CheckStatus.ERROR, (
        "database shop, table main.orders: not evaluated: an output not recognised: expect_column_max_to_be_between: "
        "not a result"))
    assert named["data_baseline"].status is CheckStatus.PASSED  # the same validation, its own results read


class _Result:
    """A validation result as GX 1.x gives one: its expectation's configuration, success and result."""

    def __init__(self, kind: str, batch: str | None, success: bool = True) -> None:
        from types import SimpleNamespace

        self.expectation_config = SimpleNamespace(type=kind, kwargs={}, meta={} if batch is None else {
            "restoreproof_batch": batch})
        self.success, self.result, self.exception_info = success, {"observed_value": 1}, None


def test_results_are_given_back_by_the_batch_their_meta_names_never_by_position():
    from verification.checks.runner import _Batch, _outcomes_by_batch, _Validation

    mine = _Batch("user-0", "shop", None, "select 1", "q", [{"type": "a"}, {"type": "b"}])
    made = _Batch("table-0", "shop", None, "select 1", "q", [{"type": "c"}])
    validation = _Validation([mine, made])
    outcomes, errors = _outcomes_by_batch(validation, [_Result("c", "table-0"), _Result("b", "user-0"),
                                                       _Result("a", "user-0", success=False)])
    assert errors == {}
    assert [o.type for o in outcomes["user-0"]] == ["b", "a"] and [o.type for o in outcomes["table-0"]] == ["c"]
    # One result short for a batch: that batch is an error, the other stands.
    outcomes, errors = _outcomes_by_batch(validation, [_Result("c", "table-0"), _Result("a", "user-0")])
    assert errors == {"user-0": "2 expectations, 1 results: an output not recognised"}
    assert [o.type for o in outcomes["table-0"]] == ["c"]
    # A result that names no batch of the validation: nothing of it can be trusted.
    outcomes, errors = _outcomes_by_batch(validation, [_Result("a", None), _Result("b", "user-0"),
                                                       _Result("c", "table-0")])
    assert set(errors) == {"user-0", "table-0"} and outcomes == {"user-0": [], "table-0": []}
    assert errors["user-0"] == "an output not recognised: a result for no suite of this validation (a())"


def test_an_unrecognised_result_naming_no_batch_of_the_validation_errs_them_all(monkeypatch):
    from verification.checks import runner

    read = runner.outcome_of

    def unrecognised(result):  # type: ignore[no-untyped-def]
        if result.expectation_config.type == "x":
            raise runner.UnrecognisedResult("x: not a result")
        return read(result)

    monkeypatch.setattr(runner, "outcome_of", unrecognised)
    mine = runner._Batch("user-0", "shop", None, "select 1", "q", [{"type": "a"}])
    made = runner._Batch("table-0", "shop", None, "select 1", "q", [{"type": "c"}])
    # Every batch's own result is there and readable; the stray one names a batch this validation has not.
    outcomes, errors = runner._outcomes_by_batch(runner._Validation([mine, made]), [
        _Result("a", "user-0"), _Result("c", "table-0"), _Result("x", "user-9")])
    assert errors == {"user-0": "an output not recognised: x: not a result",
                      "table-0": "an output not recognised: x: not a result"}
    assert outcomes == {"user-0": [], "table-0": []}


def test_batches_on_the_same_table_are_one_validation_in_the_order_planned_and_queries_their_own():
    from verification.checks.profile import Table
    from verification.checks.runner import _Batch, validations

    orders, other = Table("shop", "main", "orders", []), Table("billing", "main", "orders", [])

    def batch(key: str, table: Table | None) -> _Batch:
        return _Batch(key, table.database if table else "shop", table, None if table else "select 1", key, [])

    found = validations([batch("user-0", orders), batch("user-1", None), batch("user-2", other),
                         batch("user-3", orders), batch("table-0", other), batch("table-1", orders)])
    assert [[b.key for b in v.batches] for v in found] == [["user-0", "user-3", "table-1"], ["user-1"],
                                                           ["user-2", "table-0"]]
    assert [v.key for v in found] == ["user-0", "user-1", "user-2"]


def test_the_import_begun_alongside_is_settled_before_anyone_takes_its_modules():
    # A run whose every database is refused before its target starts reaches its report at once, while
    # Great Expectations is still being imported alongside: the report's charts (plotly) then took a
    # half-imported pandas from sys.modules and the run ended in an internal error, with no report.
    import subprocess
    import sys

    script = ("import sys\n"
              "from verification.checks.runner import import_gx_alongside, imports_settled, _importing\n"
              "import_gx_alongside()\n"
              "imports_settled()\n"
              "assert not any(thread.is_alive() for thread in _importing)\n"
              "import plotly.graph_objects as go\n"
              "go.Figure(go.Bar(x=['a'], y=[1]))\n"
              "print(hasattr(sys.modules['pandas'], 'Series'))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "True"), done.stderr[-2000:]
