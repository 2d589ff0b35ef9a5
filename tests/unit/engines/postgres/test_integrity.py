"""pg_amcheck and pg_checksums outputs captured from real runs, clean and on corrupted data."""

import dataclasses
import json
import os

import pytest

from tests.conftest import TESTS, fixture_text
from verification.engines.postgres.integrity import parse_pg_amcheck, parse_pg_checksums
from verification.model import CheckStatus


def test_amcheck_clean():
    check = parse_pg_amcheck(fixture_text("pg_amcheck-clean.out"), 0)
    assert check.status is CheckStatus.PASSED
    assert check.details["databases"] == ["postgres", "template1"]
    assert check.details["heap_tables"] == 222 and check.details["btree_indexes"] == 329
    assert check.findings == []


def test_amcheck_corruption_is_a_failure_naming_the_relation_and_block():
    check = parse_pg_amcheck(fixture_text("pg_amcheck-corrupt.out"), 2)
    assert check.status is CheckStatus.FAILED
    assert any("invalid page in block 3 of relation base/5/16396" in line for line in check.findings)
    assert any('heap table "postgres.public.pgbench_accounts"' in line for line in check.findings)


def test_amcheck_exit_zero_but_nothing_checked_is_not_a_pass():
    check = parse_pg_amcheck('pg_amcheck: including database "postgres"\n', 0)
    assert check.status is CheckStatus.ERROR


def test_amcheck_that_could_not_connect_is_an_error_not_a_failure():
    out = ('pg_amcheck: error: connection to server on socket "/tmp/.s.PGSQL.5432" failed: FATAL:  the database '
           'system is not accepting connections\n')
    check = parse_pg_amcheck(out, 1)
    assert check.status is CheckStatus.ERROR


CONNECTION_FAILURES = {
    # Real pg_amcheck 15.18 outputs (scripts/capture-postgres-start-fixtures.sh), each with its exit code.
    "pg_amcheck-in-recovery.out": 'FATAL:  the database system is not accepting connections',
    "pg_amcheck-no-server.out": "No such file or directory",
    "pg_amcheck-no-role.out": 'FATAL:  role "restoreproof_absent" does not exist',
}


@pytest.mark.parametrize("fixture", sorted(CONNECTION_FAILURES))
def test_amcheck_that_could_not_connect_did_not_run_whatever_lines_follow_the_error(fixture: str) -> None:
    output = fixture_text(fixture)
    check = parse_pg_amcheck(output, 1)
    assert (check.status, check.summary) == (CheckStatus.ERROR, "pg_amcheck could not run (exit 1)")
    assert check.findings == output.splitlines()  # the server's and libpq's words kept
    assert check.findings[0].endswith(CONNECTION_FAILURES[fixture])


def test_amcheck_connection_failure_lines_are_exactly_what_was_captured() -> None:
    # The DETAIL and the indented hint that made a refused connection read as corruption.
    assert fixture_text("pg_amcheck-in-recovery.out").splitlines()[1] == "DETAIL:  Hot standby mode is disabled."
    assert fixture_text("pg_amcheck-no-server.out").splitlines()[1] == (
        "\tIs the server running locally and accepting connections on that socket?")
    hint = parse_pg_amcheck(fixture_text("pg_amcheck-bad-option.out"), 1)
    assert (hint.status, hint.findings) == (CheckStatus.ERROR, [
        "pg_amcheck: unrecognized option '--restoreproof-absent-option'",
        'pg_amcheck: hint: Try "pg_amcheck --help" for more information.'])


def test_corruption_reported_after_pg_amcheck_own_error_is_still_corruption() -> None:
    # pg_amcheck lost one database and checked another: the report after the next progress line is
    # about the data, whatever the exit code.
    corrupt = fixture_text("pg_amcheck-corrupt.out")
    output = fixture_text("pg_amcheck-in-recovery.out") + corrupt
    check = parse_pg_amcheck(output, 1)
    assert (check.status, check.summary) == (CheckStatus.FAILED, "pg_amcheck found corruption (17 lines)")
    # A report right after an error, with no progress line between, belongs to the error.
    assert parse_pg_amcheck("pg_amcheck: error: x\nheap table \"postgres.public.t\", block 0:\n", 1).status \
        is CheckStatus.ERROR
    # A report before any pg_amcheck line is about the data.
    assert parse_pg_amcheck("heap table \"postgres.public.t\", block 0:\npg_amcheck: error: x\n", 1).status \
        is CheckStatus.FAILED


def test_checksums_clean():
    check = parse_pg_checksums(fixture_text("pg_checksums-clean.out"), 0)
    assert check.status is CheckStatus.PASSED
    assert check.details == {"files_scanned": 966, "blocks_scanned": 6697, "bad_checksums": 0, "exit_code": 0}


def test_checksums_bad_block_names_file_and_block():
    check = parse_pg_checksums(fixture_text("pg_checksums-corrupt.out"), 1)
    assert check.status is CheckStatus.FAILED
    assert check.details["bad_checksums"] == 1
    assert check.findings == ['pg_checksums: error: checksum verification failed in file '
                              '"/var/lib/restoreproof/data/base/5/16396", block 3: calculated checksum BDD but '
                              'block contains 488B']


def test_checksums_disabled_is_skipped_and_optional():
    check = parse_pg_checksums("pg_checksums: error: data checksums are not enabled in cluster\n", 1)
    assert check.status is CheckStatus.SKIPPED
    assert check.required is False


def test_checksums_without_summary_is_not_a_pass():
    assert parse_pg_checksums("", 0).status is CheckStatus.ERROR


# Summaries and statuses pinned exactly, and each branch of the parsers on its own (mutation testing).

def test_amcheck_and_checksums_summaries_say_exactly_what_was_checked():
    clean = parse_pg_amcheck(fixture_text("pg_amcheck-clean.out"), 0)
    assert clean.summary == "222 tables and 329 indexes in 2 databases: no corruption"
    assert clean.details == {"heap_tables": 222, "btree_indexes": 329, "databases": ["postgres", "template1"],
                             "exit_code": 0}
    corrupt = parse_pg_amcheck(fixture_text("pg_amcheck-corrupt.out"), 2)
    assert corrupt.summary == "pg_amcheck found corruption (15 lines)" and len(corrupt.findings) == 15
    assert corrupt.findings[0] == ("WARNING:  XX001: page verification failed, calculated checksum 3037 but "
                                   "expected 18571")
    assert parse_pg_checksums(fixture_text("pg_checksums-clean.out"), 0).summary == (
        "6697 blocks in 966 files: 0 bad checksums")
    bad = parse_pg_checksums(fixture_text("pg_checksums-corrupt.out"), 1)
    assert (bad.summary, bad.details["blocks_scanned"]) == ("1 bad checksums", 16300)


def test_amcheck_branches():
    clean = fixture_text("pg_amcheck-clean.out")
    # A clean output with a non-zero exit is not a pass.
    assert parse_pg_amcheck(clean, 1).status is not CheckStatus.PASSED
    # An extra, unknown line on exit 0 is a finding, never ignored.
    extra = parse_pg_amcheck(clean + "heap table \"postgres.public.t\", block 0:\n", 0)
    assert extra.status is CheckStatus.FAILED and extra.findings == ['heap table "postgres.public.t", block 0:']
    error = parse_pg_amcheck("pg_amcheck: error: could not connect\n", 1)
    assert (error.status, error.summary) == (CheckStatus.ERROR, "pg_amcheck could not run (exit 1)")
    assert parse_pg_amcheck("pg_amcheck: error: could not connect\n", 2).status is CheckStatus.FAILED
    nothing = parse_pg_amcheck('pg_amcheck: including database "postgres"\n', 0)
    assert (nothing.summary, nothing.details["databases"]) == ("pg_amcheck checked no table", ["postgres"])


def test_checksums_branches():
    clean = fixture_text("pg_checksums-clean.out")
    assert parse_pg_checksums(clean, 1).status is CheckStatus.ERROR  # clean text, failed exit
    assert parse_pg_checksums(clean.replace("Checksum operation completed", "Checksum operation"), 0).status \
        is CheckStatus.ERROR
    failed = parse_pg_checksums("pg_checksums: error: checksum verification failed in file \"x\", block 1\n", 1)
    assert (failed.status, failed.summary) == (CheckStatus.FAILED, "pg_checksums found bad pages (exit 1)")
    broken = parse_pg_checksums("pg_checksums: error: could not open file \"x\"\n", 1)
    assert (broken.status, broken.summary, broken.findings) == (
        CheckStatus.ERROR, "pg_checksums could not run (exit 1)", ['pg_checksums: error: could not open file "x"'])
    silent = parse_pg_checksums("", 3)
    assert silent.findings == [] and silent.details["exit_code"] == 3


def _one_heap_table() -> str:
    """The real clean output cut down to a single table checked (and no index)."""
    lines = fixture_text("pg_amcheck-clean.out").splitlines()
    heap = next(line for line in lines if line.startswith("pg_amcheck: checking heap table"))
    return "\n".join([line for line in lines if "checking" not in line] + [heap]) + "\n"


INTEGRITY_CASES = {
    "amcheck-clean": (parse_pg_amcheck, lambda: fixture_text("pg_amcheck-clean.out"), 0),
    "amcheck-clean-but-exit-1": (parse_pg_amcheck, lambda: fixture_text("pg_amcheck-clean.out"), 1),
    "amcheck-one-table": (parse_pg_amcheck, _one_heap_table, 0),
    "amcheck-corrupt": (parse_pg_amcheck, lambda: fixture_text("pg_amcheck-corrupt.out"), 2),
    "amcheck-no-table": (parse_pg_amcheck, lambda: 'pg_amcheck: including database "postgres"\n', 0),
    "amcheck-no-table-and-a-warning": (
        parse_pg_amcheck, lambda: 'pg_amcheck: including database "postgres"\nWARNING:  something\n', 0),
    "amcheck-cannot-connect": (parse_pg_amcheck, lambda: "pg_amcheck: error: could not connect\n", 1),
    "amcheck-in-recovery": (parse_pg_amcheck, lambda: fixture_text("pg_amcheck-in-recovery.out"), 1),
    "amcheck-no-server": (parse_pg_amcheck, lambda: fixture_text("pg_amcheck-no-server.out"), 1),
    "amcheck-no-role": (parse_pg_amcheck, lambda: fixture_text("pg_amcheck-no-role.out"), 1),
    "amcheck-bad-option": (parse_pg_amcheck, lambda: fixture_text("pg_amcheck-bad-option.out"), 1),
    "checksums-clean": (parse_pg_checksums, lambda: fixture_text("pg_checksums-clean.out"), 0),
    "checksums-corrupt": (parse_pg_checksums, lambda: fixture_text("pg_checksums-corrupt.out"), 1),
    "checksums-disabled": (parse_pg_checksums,
                           lambda: "pg_checksums: error: data checksums are not enabled in cluster\n", 1),
    "checksums-failed-without-counts": (
        parse_pg_checksums, lambda: 'pg_checksums: error: checksum verification failed in file "x", block 1\n', 1),
    "checksums-cannot-open": (parse_pg_checksums, lambda: 'pg_checksums: error: could not open file "x"\n', 1),
    "checksums-nothing": (parse_pg_checksums, lambda: "", 3),
    "checksums-unknown-output": (parse_pg_checksums, lambda: "".join(f"line {n}\n" for n in range(1, 8)), 1),
}


def test_every_integrity_output_word_for_word() -> None:
    """Every field of every result (name, status, summary, findings, details, required), compared with
    reviewed expectations in tests/fixtures/golden/integrity-outputs.json (`RESTOREPROOF_GOLDEN=write`)."""
    found = {name: dataclasses.asdict(parse(text(), exit_code))
             for name, (parse, text, exit_code) in INTEGRITY_CASES.items()}
    path = TESTS / "fixtures" / "golden" / "integrity-outputs.json"
    if os.environ.get("RESTOREPROOF_GOLDEN") == "write":
        path.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    assert json.loads(path.read_text()) == json.loads(json.dumps(found))


# Real outputs of `timeout` in the target image when the program is missing (PostgreSQL 13 has no
# pg_amcheck) or not executable: the tool never ran, so nothing was found about the data.
@pytest.mark.parametrize(("fixture", "exit_code", "why"), [
    ("timeout-program-missing.out", 127, "was not found"),
    ("timeout-program-not-executable.out", 126, "is not executable"),
])
@pytest.mark.parametrize("parse", [parse_pg_amcheck, parse_pg_checksums])
def test_a_program_that_never_started_is_an_error_not_a_finding(parse, fixture, exit_code, why):  # type: ignore[no-untyped-def]
    output = fixture_text(fixture)
    check = parse(output, exit_code)
    assert check.status is CheckStatus.ERROR
    name = check.name
    assert check.summary == f"{name} could not run: {name} {why} in the target (exit {exit_code}: {output.strip()})"
    assert check.findings == [output.strip()] and check.details == {"exit_code": exit_code}


def test_exit_one_of_a_program_that_ran_is_still_read_as_its_own_words() -> None:
    # 1 is pg_amcheck's "could not run" and pg_checksums' "bad checksums": not a program missing.
    assert parse_pg_checksums(fixture_text("pg_checksums-corrupt.out"), 1).status is CheckStatus.FAILED
    assert parse_pg_amcheck(fixture_text("pg_amcheck-corrupt.out"), 2).status is CheckStatus.FAILED


# Real pg_amcheck 15 outputs on a database created with another collation library version than the
# target image's (ICU 70 as on Ubuntu 22.04 / RHEL 9; a glibc version recorded where the target has none).
@pytest.mark.parametrize(("fixture", "warning"), [
    ("pg_amcheck-collation-icu-mismatch.out", 'database "app" has a collation version mismatch'),
    ("pg_amcheck-collation-glibc-recorded.out",
     'database "app" has no actual collation version, but a version was recorded'),
])
@pytest.mark.parametrize("exit_code", [0, 2])
def test_a_collation_library_other_than_the_sources_is_an_error_never_corruption(fixture, warning, exit_code):  # type: ignore[no-untyped-def]
    check = parse_pg_amcheck(fixture_text(fixture), exit_code)
    assert check.status is CheckStatus.ERROR
    assert check.summary.startswith(f'pg_amcheck\'s findings are not proof: the server warned "{warning}": the '
                                    "target's collation library is not the one the database was created with")


def test_a_server_warning_restoreproof_does_not_know_keeps_a_clean_run_from_passing():
    output = fixture_text("pg_amcheck-clean.out") + "WARNING:  01000: something the server wants said\n"
    check = parse_pg_amcheck(output, 0)
    assert (check.status, check.summary) == (
        CheckStatus.ERROR, "pg_amcheck found no corruption, but the server warned: something the server wants said")


def test_a_data_corrupted_warning_is_a_report_on_the_data_whatever_the_exit_code():
    output = fixture_text("pg_amcheck-clean.out") + ("WARNING:  XX001: page verification failed, calculated "
                                                     "checksum 3037 but expected 18571\n")
    assert parse_pg_amcheck(output, 0).status is CheckStatus.FAILED
    assert parse_pg_amcheck(fixture_text("pg_amcheck-corrupt.out"), 2).status is CheckStatus.FAILED
