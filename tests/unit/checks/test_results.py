"""Great Expectations' validation results read into outcomes: only recognised shapes count, an
expectation that raised (wherever GX put its exception) is an error, never a pass."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from verification.checks.results import Outcome, UnrecognisedResult, observed_value, outcome_of


def _result(success: Any = True, result: dict[str, Any] | None = None, exception_info: Any = None,
            kind: Any = "expect_column_values_to_not_be_null", kwargs: dict[str, Any] | None = None,
            meta: dict[str, Any] | None = None) -> SimpleNamespace:
    """A validation result as GX 1.x gives one (ExpectationValidationResult's attributes)."""
    config = SimpleNamespace(type=kind, kwargs={"batch_id": "database-0-shop-user-0", "column": "email"}
                             if kwargs is None else kwargs, meta=meta)
    return SimpleNamespace(expectation_config=config, success=success, result=result,
                           exception_info=exception_info or {"raised_exception": False, "exception_message": None})


def test_a_failed_column_expectation_keeps_its_kwargs_without_batch_id_and_its_unexpected_values():
    outcome = outcome_of(_result(False, {"element_count": 8, "unexpected_count": 7, "unexpected_percent": 87.5,
                                         "partial_unexpected_list": [None] * 7}, meta={"owner": "sales"}))
    assert outcome == Outcome("expect_column_values_to_not_be_null", {"column": "email"}, {"owner": "sales"}, False,
                              "7 unexpected (87.5% of rows), e.g. [None, None, None, None, None]", None,
                              [None, None, None, None, None], 8)
    assert outcome.describe() == "expect_column_values_to_not_be_null(column='email')"
    assert outcome.to_json() == {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "email"},
                                 "success": False,
                                 "observed": "7 unexpected (87.5% of rows), e.g. [None, None, None, None, None]"}


def test_an_aggregate_expectation_observes_its_value():
    outcome = outcome_of(_result(True, {"observed_value": 1000}, kind="expect_table_row_count_to_be_between",
                                 kwargs={"min_value": 10, "max_value": None}))
    assert (outcome.success, outcome.observed, outcome.error, outcome.sample) == (True, 1000, None, [])
    assert outcome.describe() == "expect_table_row_count_to_be_between(min_value=10, max_value=None)"


def test_observed_values_as_the_report_says_them():
    assert observed_value({"observed_value": None, "unexpected_count": 3}) is None  # the value wins
    assert observed_value({"unexpected_count": 0, "unexpected_percent": 0.0}) == "0 unexpected (0% of rows)"
    assert observed_value({"unexpected_count": 1, "unexpected_percent": 33.33333}) == "1 unexpected (33.3% of rows)"
    assert observed_value({"unexpected_count": 2, "unexpected_percent": None, "partial_unexpected_list": ["a", "b"]}
                          ) == "2 unexpected, e.g. ['a', 'b']"
    assert observed_value({"element_count": 3}) is None
    assert observed_value({}) is None


def test_values_that_are_not_json_are_said_as_text_in_the_json():
    from datetime import date
    from decimal import Decimal

    outcome = Outcome("t", {}, {}, True, {"max": Decimal("1.5"), 2: [date(2026, 1, 1), (True, None)]}, None)
    assert outcome.to_json()["observed"] == {"max": "1.5", "2": ["2026-01-01", [True, None]]}
    assert Outcome("t", {}, {}, None, None, "boom").to_json() == {"type": "t", "kwargs": {}, "success": None,
                                                                 "observed": None, "error": "boom"}


def test_an_expectation_that_raised_is_an_error_whatever_success_says():
    raised = {"raised_exception": True, "exception_message": "column shipped does not exist",
              "exception_traceback": "Traceback ..."}
    outcome = outcome_of(_result(True, {}, raised))
    assert (outcome.success, outcome.error) == (None, "column shipped does not exist")
    assert outcome_of(_result(None, None, {"raised_exception": True, "exception_message": None})).error == (
        "an exception without a message")


def test_an_exception_gx_put_per_metric_is_found_in_the_nested_info():
    nested = {"('table.columns', 'batch_id=x', ())": {"raised_exception": False, "exception_message": None},
              "('column_values.nonnull.unexpected_count', 'batch_id=x', ())": {
                  "exception_traceback": "Traceback ...", "exception_message": 'column "shipped" does not exist',
                  "raised_exception": True}}
    outcome = outcome_of(_result(False, {}, nested))
    assert (outcome.success, outcome.error) == (None, 'column "shipped" does not exist')
    quiet = {"m1": {"raised_exception": False, "exception_message": "ignored"}, "m2": "not a mapping"}
    assert outcome_of(_result(False, {}, quiet)).error is None


@pytest.mark.parametrize(("result", "said"), [
    (SimpleNamespace(success=True, result={}), "a validation result without its expectation: SimpleNamespace"),
    (SimpleNamespace(expectation_config=None, success=True), "a validation result without its expectation: "
                                                              "SimpleNamespace"),
    (_result(kind=None), "a validation result without its expectation: SimpleNamespace"),
    ({"success": True, "expectation_config": {"type": "x"}}, "a validation result without its expectation: dict"),
    (_result(success=None), "expect_column_values_to_not_be_null: a result that says neither success nor failure "
                            "(None)"),
    (_result(success="true"), "expect_column_values_to_not_be_null: a result that says neither success nor failure "
                              "('true')"),
    (_result(success=1), "expect_column_values_to_not_be_null: a result that says neither success nor failure (1)"),
])
def test_a_result_of_an_unrecognised_shape_is_never_read_as_a_pass(result, said):
    with pytest.raises(UnrecognisedResult) as raised:
        outcome_of(result)
    assert str(raised.value) == said


def test_a_result_missing_optional_parts_reads_as_none_said_never_an_attribute_error():
    """GX leaves out what it has nothing for: an expectation without kwargs or meta, a result without
    exception_info; a result without `success` is unrecognised, never a crash."""
    bare = SimpleNamespace(expectation_config=SimpleNamespace(type="expect_table_row_count_to_be_between"),
                           success=True, result={"observed_value": 3})
    outcome = outcome_of(bare)
    assert (outcome.kwargs, outcome.meta, outcome.success, outcome.error, outcome.observed) == ({}, {}, True, None, 3)
    silent = SimpleNamespace(expectation_config=SimpleNamespace(type="expect_x"), result={})
    with pytest.raises(UnrecognisedResult, match=r"^expect_x: a result that says neither success nor failure \(None\)$"):
        outcome_of(silent)


def test_rows_are_gx_s_element_count_only_when_it_is_a_number():
    assert outcome_of(_result(True, {"element_count": 3, "unexpected_count": 0})).rows == 3
    assert outcome_of(_result(True, {"element_count": "3", "unexpected_count": 0})).rows is None
    assert outcome_of(_result(True, {"unexpected_count": 0})).rows is None
