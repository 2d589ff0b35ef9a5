"""The suites users write (configuration and GX suite files), checked against Great Expectations'
own expectation classes before any restore: every mistake is a ConfigError naming where it was written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.unit.checks.sqlite import checks
from verification.checks.suites import (
    Batch,
    Suite,
    check_all,
    configured_suites,
    file_suites,
    load_suites,
    read_suite_file,
    unknown_databases,
    validate_expectation,
)
from verification.errors import ConfigError

ROWS = {"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}}
NOT_NULL = {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "customer_id"}}


def _error(call: Any, *args: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        call(*args)
    return str(raised.value)


def _file(folder: Path, name: str, data: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


# -- one expectation ------------------------------------------------------------------------------

def test_a_valid_expectation_is_accepted():
    validate_expectation(dict(NOT_NULL), "here")
    validate_expectation({"type": "expect_table_row_count_to_be_between"}, "here")  # kwargs default to {}


@pytest.mark.parametrize(("expectation", "said"), [
    ({"kwargs": {}}, "here: an expectation needs a type (its Great Expectations name, e.g. "
                     "expect_table_row_count_to_be_between)"),
    ({"type": "", "kwargs": {}}, "here: an expectation needs a type (its Great Expectations name, e.g. "
                                 "expect_table_row_count_to_be_between)"),
    ({"type": 3}, "here: an expectation needs a type (its Great Expectations name, e.g. "
                  "expect_table_row_count_to_be_between)"),
    ({"type": "expect_orders_to_be_fine"}, "here: expect_orders_to_be_fine is not a Great Expectations expectation "
                                           "(expect_orders_to_be_fine not found)"),
    ({"type": "expect_column_values_to_not_be_null", "kwargs": ["customer_id"]},
     "here: expect_column_values_to_not_be_null: kwargs must be a mapping"),
    ({"type": "expect_column_values_to_not_be_null", "kwargs": {}},
     "here: expect_column_values_to_not_be_null: invalid kwargs: column field required"),
    ({"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1, "minimum": 2}},
     "here: expect_table_row_count_to_be_between: invalid kwargs: minimum extra fields not permitted"),
])
def test_an_expectation_gx_cannot_build_is_a_config_error_saying_why(expectation, said):
    assert _error(validate_expectation, expectation, "here") == said


# -- in the configuration -------------------------------------------------------------------------

def test_configured_suites_keep_table_query_database_and_required_with_where_they_were_written():
    settings = checks(expectations={"shop": [
        {"table": "public.orders", "expect": [ROWS, dict(NOT_NULL, meta={"owner": "sales"})]},
        {"query": "select 1 as one", "name": "one", "database": "billing", "required": False,
         "expect": [{"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "one", "value_set": [1]}}]}],
        "other": [{"table": "x", "expect": [ROWS]}]},
        sql=[{"name": "count", "query": "select count(*) from t", "expect": 3, "database": "shop", "required": False}])
    assert configured_suites(settings, "shop") == [
        Suite("data:public.orders", "public.orders", Batch("public.orders", None, None),
              [{"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}, "meta": {}},
               {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "customer_id"},
                "meta": {"owner": "sales"}}],
              True, "checks.expectations.shop[0] (public.orders)"),
        Suite("data:one", "one", Batch(None, "select 1 as one", "billing"),
              [{"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "one", "value_set": [1]},
                "meta": {}}], False, "checks.expectations.shop[1] (one)"),
        Suite("sql:count", "count", Batch(None, "select count(*) from t", "shop"), [
            {"type": "unexpected_rows_expectation", "kwargs": {
                "unexpected_rows_query": "SELECT * FROM {batch} WHERE value IS NULL OR value NOT IN ('3')",
                "description": "count: the query returns '3'"}, "meta": {}},
            {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "value", "value_set": ["3"]},
             "meta": {}}], False, "checks.sql (count)", expected_value="3", meta={"deprecated_sql_check": True})]
    assert [suite.check for suite in configured_suites(settings, "none")] == ["sql:count"]


def test_a_deprecated_sql_checks_expected_value_is_quoted_as_sql_text():
    settings = checks(sql=[{"name": "who", "query": "select name from t", "expect": "O'Brien"}])
    suite = configured_suites(settings, "shop")[0]
    assert suite.expectations[0]["kwargs"]["unexpected_rows_query"] == (
        "SELECT * FROM {batch} WHERE value IS NULL OR value NOT IN ('O''Brien')")
    assert suite.batch == Batch(None, "select name from t", "postgres")  # SqlCheck's own default


def test_an_invalid_expectation_in_the_configuration_names_its_config_path():
    settings = checks(expectations={"shop": [
        {"table": "orders", "expect": [ROWS]},
        {"table": "items", "expect": [ROWS, {"type": "expect_column_values_to_not_be_null", "kwargs": {"col": "x"}}]}]})
    assert _error(configured_suites, settings, "shop") == (
        "checks.expectations.shop[1] (items).expect[1]: expect_column_values_to_not_be_null: invalid kwargs: column "
        "field required; col extra fields not permitted")
    unknown = checks(expectations={"shop": [{"table": "orders", "expect": [{"type": "expect_it_to_work"}]}]})
    assert _error(configured_suites, unknown, "shop") == (
        "checks.expectations.shop[0] (orders).expect[0]: expect_it_to_work is not a Great Expectations expectation "
        "(expect_it_to_work not found)")


# -- GX suite files -------------------------------------------------------------------------------

def test_a_gx_1x_suite_file_says_what_it_is_validated_against_in_its_meta(tmp_path):
    path = _file(tmp_path / "shop", "orders.json", {
        "name": "orders-suite", "expectations": [dict(ROWS, meta={"notes": "x"}), NOT_NULL],
        "meta": {"great_expectations_version": "1.3.0",
                 "restoreproof": {"table": "sales.orders", "database": "billing", "required": False}}})
    assert read_suite_file(path) == Suite(
        "data:orders-suite", "orders-suite", Batch("sales.orders", None, "billing"),
        [{"type": "expect_table_row_count_to_be_between", "kwargs": {"min_value": 1}, "meta": {"notes": "x"}},
         {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "customer_id"}, "meta": {}}],
        False, f"suite file {path}")


def test_a_suite_file_without_meta_is_validated_against_the_table_its_file_names(tmp_path):
    path = _file(tmp_path, "public.orders.json", {"expectations": [ROWS]})
    suite = read_suite_file(path)
    assert (suite.check, suite.label, suite.batch, suite.required) == (
        "data:public.orders", "public.orders", Batch("public.orders", None, None), True)


def test_a_suite_file_on_a_query_has_no_table_and_takes_its_restoreproof_name(tmp_path):
    path = _file(tmp_path, "spend.json", {"name": "gx-name", "expectations": [ROWS], "meta": {"restoreproof": {
        "query": "select * from orders", "name": "big-spenders"}}})
    suite = read_suite_file(path)
    assert (suite.check, suite.batch) == ("data:big-spenders", Batch(None, "select * from orders", None))


def test_a_gx_0x_suite_file_with_expectation_type_is_accepted(tmp_path):
    path = _file(tmp_path, "orders.json", {
        "expectation_suite_name": "orders.warning", "data_asset_type": None,
        "expectations": [{"expectation_type": "expect_column_values_to_not_be_null",
                          "kwargs": {"column": "customer_id"}, "meta": {}}],
        "meta": {"great_expectations_version": "0.18.8"}})
    suite = read_suite_file(path)
    assert suite.expectations == [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "customer_id"},
                                   "meta": {}}]
    assert suite.check == "data:orders"


def test_suite_files_that_are_not_gx_suites_are_config_errors_naming_the_file(tmp_path):
    def said(name: str, data: Any) -> str:
        return _error(read_suite_file, _file(tmp_path, name, data))

    assert re.fullmatch(rf"suite file {tmp_path}/a\.json is not JSON: Expecting value: line 1 column 1 \(char 0\)",
                        said("a.json", "expectations: []"))
    path = tmp_path / "b.json"
    path.write_bytes(b"\xff\xfe{")
    assert _error(read_suite_file, path).startswith(f"suite file {path} is not JSON: 'utf-8' codec can't decode")
    assert said("c.json", [ROWS]) == (f"suite file {tmp_path}/c.json is not a Great Expectations suite: it needs an "
                                      "\"expectations\" list")
    assert said("d.json", {"expectations": {"0": ROWS}}) == (
        f"suite file {tmp_path}/d.json is not a Great Expectations suite: it needs an \"expectations\" list")
    assert said("e.json", {"expectations": []}) == f"suite file {tmp_path}/e.json holds no expectations"
    assert said("f.json", {"expectations": [ROWS, "expect_table_row_count_to_be_between"]}) == (
        f"suite file {tmp_path}/f.json, expectations[1]: not an expectation (a mapping with type and kwargs)")
    assert said("g.json", {"expectations": [{"type": "expect_column_values_to_not_be_null"}]}) == (
        f"suite file {tmp_path}/g.json, expectations[0]: expect_column_values_to_not_be_null: invalid kwargs: column "
        "field required")
    assert said("h.json", {"expectations": [{"expectation_type": "expect_nothing_much"}]}) == (
        f"suite file {tmp_path}/h.json, expectations[0]: expect_nothing_much is not a Great Expectations expectation "
        "(expect_nothing_much not found)")
    assert said("i.json", {"expectations": [ROWS], "meta": {"restoreproof": "public.orders"}}) == (
        f"suite file {tmp_path}/i.json: meta.restoreproof must be a mapping (table, database or query)")
    assert said("j.json", {"expectations": [ROWS], "meta": {"restoreproof": {"table": "t", "schema": "s",
                                                                             "db": "x"}}}) == (
        f"suite file {tmp_path}/j.json: meta.restoreproof has unknown keys ['db', 'schema']")
    (tmp_path / "k.json").mkdir()
    assert _error(read_suite_file, tmp_path / "k.json") == f"suite file {tmp_path}/k.json cannot be read: Is a directory"


def test_the_suites_folder_holds_a_folder_per_verified_database_read_in_name_order(tmp_path):
    assert file_suites(None, "shop") == []
    _file(tmp_path / "shop", "b.json", {"expectations": [ROWS]})
    _file(tmp_path / "shop", "a.json", {"expectations": [ROWS]})
    _file(tmp_path / "shop", "notes.txt", "not a suite")
    _file(tmp_path / "other", "c.json", {"expectations": [ROWS]})
    assert [suite.check for suite in file_suites(tmp_path, "shop")] == ["data:a", "data:b"]
    assert file_suites(tmp_path, "billing") == []
    assert _error(file_suites, tmp_path / "nowhere", "shop") == f"checks.suites_dir {tmp_path}/nowhere is not a folder"


def test_two_checks_of_one_name_are_a_config_error_naming_both_places(tmp_path):
    path = _file(tmp_path / "shop", "orders.json", {"expectations": [ROWS]})
    settings = checks(expectations={"shop": [{"table": "orders", "expect": [ROWS]}]}, suites_dir=str(tmp_path))
    assert _error(load_suites, settings, "shop") == (
        f"two data checks are named data:orders: checks.expectations.shop[0] (orders) and suite file {path}")
    twice = checks(expectations={"shop": [{"table": "orders", "expect": [ROWS]},
                                          {"table": "items", "name": "orders", "expect": [ROWS]}]})
    assert _error(load_suites, twice, "shop") == ("two data checks are named data:orders: checks.expectations.shop[0] "
                                                  "(orders) and checks.expectations.shop[1] (orders)")
    # A deprecated SQL check of the same name is another check (sql:orders).
    assert [s.check for s in load_suites(checks(expectations={"shop": [{"table": "orders", "expect": [ROWS]}]},
                                                sql=[{"name": "orders", "query": "select 1", "expect": 1}]),
                                         "shop")] == ["data:orders", "sql:orders"]


def test_check_all_loads_every_database_before_any_restore_and_nothing_when_disabled(tmp_path):
    _file(tmp_path / "billing", "ledger.json", {"expectations": [ROWS]})
    settings = checks(expectations={"shop": [{"table": "orders", "expect": [ROWS]}]}, suites_dir=str(tmp_path))
    loaded = check_all(settings, ["shop", "billing", "empty"])
    assert {database: [s.check for s in suites] for database, suites in loaded.items()} == {
        "shop": ["data:orders"], "billing": ["data:ledger"], "empty": []}
    _file(tmp_path / "billing", "zz.json", "{")
    assert _error(check_all, settings, ["shop", "billing"]).startswith(f"suite file {tmp_path}/billing/zz.json is not "
                                                                        "JSON")
    disabled = settings.model_copy(update={"enabled": False})
    assert check_all(disabled, ["shop", "billing"]) == {}


def test_a_deprecated_check_expecting_psql_s_t_also_takes_true_as_sql_casts_a_boolean():
    from verification.checks.suites import _from_sql
    from verification.config import SqlCheck

    suite = _from_sql(SqlCheck(name="present", query="select count(*) > 0 from t", expect="t"))
    assert suite.expectations[0]["kwargs"]["unexpected_rows_query"] == (
        "SELECT * FROM {batch} WHERE value IS NULL OR value NOT IN ('t', 'true')")
    assert suite.expectations[1]["kwargs"]["value_set"] == ["t", "true"]
    assert _from_sql(SqlCheck(name="n", query="select 1", expect="1")).expectations[1]["kwargs"]["value_set"] == ["1"]


def test_configuration_naming_a_database_the_source_lacks_is_said_key_by_key(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shpo").mkdir()
    (tmp_path / "stray.json").write_text("{}")  # not a database's folder: not a database named
    settings = checks(expectations={"shop": [{"table": "t", "expect": [ROWS]}], "billing": [{"table": "t",
                                                                                              "expect": [ROWS]}]},
                      freshness={"columns": {"shop": [{"table": "t", "column": "at"}],
                                             "crm": [{"table": "t", "column": "at"}]}},
                      suites_dir=str(tmp_path))
    assert unknown_databases(settings, ["shop", "orders"]) == [
        "checks.expectations.billing names database billing, which the source does not have (it has: orders, "
        "shop): nothing of it is checked",
        "checks.freshness.columns.crm names database crm, which the source does not have (it has: orders, shop): "
        "nothing of it is checked",
        f"checks.suites_dir {tmp_path / 'shpo'} names database shpo, which the source does not have (it has: "
        "orders, shop): nothing of it is checked"]
    assert unknown_databases(settings, ["shop", "shpo", "billing", "crm"]) == []
    assert unknown_databases(settings, [])[0] == ("checks.expectations.billing names database billing, which the "
                                                  "source does not have (it has: none): nothing of it is checked")
    assert unknown_databases(settings.model_copy(update={"enabled": False}), ["shop"]) == []
    assert unknown_databases(checks(suites_dir=str(tmp_path / "missing")), ["shop"]) == []
