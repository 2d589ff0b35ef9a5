"""JUnit XML from the sample report, read back with junitparser as a CI system would read it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from junitparser import Error, Failure, JUnitXml, SystemOut, TestCase, TestSuite

from tests.conftest import TESTS
from tests.unit.factories import typed_report
from verification.report_model import PhaseEntry
from verification.reports.junit import phase_table, render_junit

SAMPLE = TESTS / "fixtures" / "reports" / "report-1.3.json"


@pytest.fixture
def report() -> dict[str, Any]:
    sample: dict[str, Any] = json.loads(SAMPLE.read_text())
    return sample


def parse(xml: str) -> tuple[TestSuite, dict[str, TestCase]]:
    suites = list(JUnitXml.fromstring(xml))
    assert len(suites) == 1
    suite = suites[0]
    return suite, {case.name: case for case in suite}


def database(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(d for d in report["databases"] if d["database"] == name)


def test_one_suite_with_run_properties(report: dict[str, Any]) -> None:
    suite, cases = parse(render_junit(typed_report(report)))

    assert suite.name == "restoreproof postgres /srv/backups/pgbackrest"
    assert suite.timestamp == "2026-11-22T01:00:00"
    assert suite.time == pytest.approx(48.0)
    assert (suite.tests, suite.failures, suite.errors) == (2, 1, 0)
    assert {p.name: p.value for p in suite.properties()} == {
        "run_id": "20261122T010000Z-abc123", "engine": "postgres", "source": "/srv/backups/pgbackrest"}
    assert sorted(cases) == ["demo1", "demo2"]
    assert {case.classname for case in cases.values()} == {"restoreproof.postgres"}


def test_passed_database_shows_what_was_proven_and_the_phases(report: dict[str, Any]) -> None:
    _, cases = parse(render_junit(typed_report(report)))
    demo1 = cases["demo1"]

    assert demo1.is_passed
    assert demo1.time == pytest.approx(4.82)
    out = demo1.system_out
    for reason in database(report, "demo1")["reasons"]:
        assert reason in out
    transfer = next(line for line in out.splitlines() if line.startswith("transfer"))
    assert transfer.split() == ["transfer", "measured", "2.10", "s", "2.05", "s", "-2.4", "%"]
    zeroing = next(line for line in out.splitlines() if line.startswith("zeroing"))
    assert zeroing.split() == ["zeroing", "absent", "-", "-", "-"]


def test_failed_database_is_a_failure_carrying_every_reason(report: dict[str, Any]) -> None:
    demo2 = database(report, "demo2")
    demo2["reasons"] = ["pg_amcheck: 2 corrupt blocks in public.t", "RTO missed by 3 s"]
    suite, cases = parse(render_junit(typed_report(report)))

    [failure] = cases["demo2"].result
    assert isinstance(failure, Failure)
    assert failure.type == "restore-failed"
    assert failure.message == "pg_amcheck: 2 corrupt blocks in public.t"
    assert failure.text.splitlines() == demo2["reasons"]
    assert cases["demo2"].time == pytest.approx(5.32)
    # Drift alerts are shown beside the phases.
    assert "recalibration needed" in cases["demo2"].system_out
    assert suite.failures == 1


def test_error_database_and_missing_recovery_time(report: dict[str, Any]) -> None:
    demo2 = database(report, "demo2")
    demo2.update(verdict="error", recovery_seconds=None,
                 reasons=["the server never came online", "see server.log"])
    suite, cases = parse(render_junit(typed_report(report)))

    [error] = cases["demo2"].result
    assert isinstance(error, Error)
    assert error.message == "the server never came online"
    assert "see server.log" in error.text
    assert cases["demo2"].time == 0
    assert (suite.failures, suite.errors) == (0, 1)


def test_not_verified_corrupt_and_unread_files_become_cases(report: dict[str, Any]) -> None:
    report["not_verified"] = [{"database": "sales", "reason": "no backup found for sales"}]
    report["unreadable"] = [
        {"path": "mssql/sales_full.bak", "kind": "corrupt", "reason": "MTF header checksum mismatch"},
        {"path": "mssql/tde.bak", "kind": "needs-server", "reason": "natively compressed"},
        {"path": "mssql/README.txt", "kind": "not-a-backup", "reason": "first bytes 'Backups '"},
    ]
    suite, cases = parse(render_junit(typed_report(report)))

    assert sorted(cases) == ["demo1", "demo2", "mssql/sales_full.bak", "mssql/tde.bak", "sales"]
    assert (suite.tests, suite.failures, suite.errors) == (5, 2, 2)
    [error] = cases["sales"].result
    assert isinstance(error, Error)
    assert (error.type, error.message) == ("not-verified", "no backup found for sales")
    [failure] = cases["mssql/sales_full.bak"].result
    assert isinstance(failure, Failure)
    assert failure.message == "MTF header checksum mismatch"
    # A backup file that went unread is an error case: CI must not show green over it.
    [unread] = cases["mssql/tde.bak"].result
    assert isinstance(unread, Error)
    assert (unread.type, unread.message) == ("unread-file (needs-server)", "natively compressed")
    # A file that is no backup at all is listed, not a case.
    system_out = suite.child(SystemOut)
    assert system_out is not None
    assert "mssql/README.txt (not-a-backup): first bytes 'Backups '" in system_out.text


def test_a_run_with_no_database_is_an_erroring_case(report: dict[str, Any]) -> None:
    report["databases"] = []
    suite, cases = parse(render_junit(typed_report(report)))
    assert (suite.tests, suite.failures, suite.errors) == (1, 0, 1)
    [error] = cases["(no database)"].result
    assert isinstance(error, Error)
    assert error.type == "nothing-verified"
    assert error.message.startswith("the run verified no database")


def test_special_characters_round_trip(report: dict[str, Any]) -> None:
    nasty = 'table "a<b" & <script>\'x\'</script> ]]> done'
    demo2 = database(report, "demo2")
    demo2["reasons"] = [nasty, "second: <&\">"]
    report["not_verified"] = [{"database": 'db<&">', "reason": nasty}]
    _, cases = parse(render_junit(typed_report(report)))

    [failure] = cases["demo2"].result
    assert failure.message == nasty
    assert failure.text.splitlines() == [nasty, "second: <&\">"]
    assert cases['db<&">'].result[0].message == nasty


def test_control_characters_do_not_break_the_xml(report: dict[str, Any]) -> None:
    database(report, "demo2")["reasons"] = ["log said \x00\x1b[31mFATAL\x1b[0m"]
    _, cases = parse(render_junit(typed_report(report)))

    assert cases["demo2"].result[0].message == "log said [31mFATAL[0m"


def test_phase_table_aligns_columns() -> None:
    table = phase_table(_phases([
        {"name": "transfer", "status": "measured", "seconds": 12.5, "bytes": None, "predicted_seconds": 2.0,
         "error_percent": -84.0},
        {"name": "redo", "status": "not_reached", "seconds": None, "bytes": None, "predicted_seconds": None,
         "error_percent": None},
    ]))
    header, transfer, redo = table.splitlines()
    assert header.split() == ["phase", "status", "measured", "predicted", "error"]
    # Right-aligned numbers end in the same column as their headers.
    assert transfer.index("12.50 s") + len("12.50 s") == header.index("measured") + len("measured")
    assert redo.split() == ["redo", "not_reached", "-", "-", "-"]


def test_suite_time_falls_back_to_the_cases_when_unfinished(report: dict[str, Any]) -> None:
    unfinished = copy.deepcopy(report)
    unfinished["finished_at"] = None
    suite, _ = parse(render_junit(typed_report(unfinished)))

    assert suite.time == pytest.approx(4.82 + 5.32)


def _phases(phases: list[dict[str, Any]]) -> list[PhaseEntry]:
    return [PhaseEntry.model_validate(p) for p in phases]
