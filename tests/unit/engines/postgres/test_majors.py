"""The integrity checks of each PostgreSQL major, read from real outputs captured in that major's own image
(tests/fixtures/postgres/majors/capture.sh): pg_amcheck and pg_checksums of 17 and 18; on 13, which has
no pg_amcheck program, the missing program and the amcheck extension's SQL functions (amcheck_sql.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES
from verification.engines.postgres.amcheck_sql import (
    SCRIPT,
    DatabaseRun,
    amcheck_result,
    heap_pages_said,
    run_database,
)
from verification.engines.postgres.databases import Database, amcheck_relations, covered, parse_catalog
from verification.engines.postgres.integrity import parse_pg_amcheck, parse_pg_checksums
from verification.model import CheckName, CheckStatus

MAJORS = FIXTURES / "majors"
EXIT_CODES = dict(line.split() for line in (MAJORS / "exit-codes.txt").read_text().splitlines())
PG_AMCHECK_MAJORS = ["17", "18"]
EVERY_MAJOR = ["13", *PG_AMCHECK_MAJORS]
DATABASES = ["app", "postgres", "shop", "template0", "template1"]


def captured(stem: str) -> tuple[str, int]:
    """A joined capture (stdout then stderr, as ExecResult.output) and its exit code."""
    return (MAJORS / f"{stem}.out").read_text(), int(EXIT_CODES[stem])


def catalog(major: str) -> list[Database]:
    return parse_catalog((MAJORS / f"pg{major}-pg_database.json").read_text())


# -- pg_checksums, every major ------------------------------------------------------------------------


@pytest.mark.parametrize("major", EVERY_MAJOR)
def test_pg_checksums_of_a_clean_cluster_passes_with_its_counts(major: str) -> None:
    output, code = captured(f"pg{major}-pg_checksums-clean")
    check = parse_pg_checksums(output, code)
    assert (check.status, code) == (CheckStatus.PASSED, 0)
    assert check.details["bad_checksums"] == 0 and check.details["blocks_scanned"] > 1000
    assert check.summary == f"{check.details['blocks_scanned']} blocks in {check.details['files_scanned']} files: " \
                            "0 bad checksums"


@pytest.mark.parametrize("major", EVERY_MAJOR)
def test_pg_checksums_names_the_flipped_page_as_a_failure(major: str) -> None:
    output, code = captured(f"pg{major}-pg_checksums-corrupt")
    check = parse_pg_checksums(output, code)
    assert (check.status, check.summary, code) == (CheckStatus.FAILED, "1 bad checksums", 1)
    (finding,) = check.findings
    assert finding.startswith('pg_checksums: error: checksum verification failed in file "/var/lib/restoreproof/'
                              'data/base/') and ", block 0: calculated checksum " in finding


@pytest.mark.parametrize("major", EVERY_MAJOR)
def test_pg_checksums_of_a_cluster_without_checksums_is_skipped_not_passed(major: str) -> None:
    output, code = captured(f"pg{major}-pg_checksums-disabled")
    check = parse_pg_checksums(output, code)
    assert (check.status, check.required, code) == (CheckStatus.SKIPPED, False, 1)


# -- pg_amcheck, 14 and later -------------------------------------------------------------------------


@pytest.mark.parametrize("major", PG_AMCHECK_MAJORS)
def test_pg_amcheck_of_a_clean_cluster_passes_for_every_database(major: str) -> None:
    output, code = captured(f"pg{major}-pg_amcheck-clean")
    check = covered(parse_pg_amcheck(output, code), catalog(major), amcheck_relations(output), [])
    assert check.status is CheckStatus.PASSED, check
    assert check.details["databases_checked"] == DATABASES
    heaps, indexes = check.details["heap_tables"], check.details["btree_indexes"]
    assert heaps > 5 * 60 and indexes > 5 * 100
    assert check.summary == f"{heaps} tables and {indexes} indexes in 5 of 5 databases: no corruption"
    # pg_amcheck lists the invalid index a refused CREATE INDEX CONCURRENTLY left in shop; its query
    # (indisvalid) passes it by without a word, as amcheck_sql's catalogue names it not checkable.
    assert 'pg_amcheck: checking btree index "shop.public.dup_v"' in output


@pytest.mark.parametrize("major", PG_AMCHECK_MAJORS)
def test_pg_amcheck_names_the_flipped_page_as_corruption(major: str) -> None:
    output, code = captured(f"pg{major}-pg_amcheck-corrupt")
    check = covered(parse_pg_amcheck(output, code), catalog(major), amcheck_relations(output), [])
    assert (check.status, code) == (CheckStatus.FAILED, 2)
    assert 'heap table "app.public.pages":' in check.findings
    # 18 quotes the file's path and says it in the error alone (no "page verification failed" warning).
    path = '"base/' if major == "18" else "base/"
    assert any(line.startswith(f"    ERROR:  XX001: invalid page in block 0 of relation {path}") for line in check.findings)
    warned = any(line.startswith("WARNING:  XX001: page verification failed") for line in check.findings)
    assert warned is (major != "18")


# -- PostgreSQL 13: no pg_amcheck program ---------------------------------------------------------------


def test_the_missing_pg_amcheck_of_13_is_an_error_never_a_finding() -> None:
    output, code = captured("pg13-pg_amcheck-missing")
    check = parse_pg_amcheck(output, code)
    assert check.status is CheckStatus.ERROR, check
    assert check.summary.startswith("pg_amcheck could not run: pg_amcheck was not found in the target")
    assert check.findings == [output.strip()]


def sql_run(stem: str, database: str) -> DatabaseRun:
    stdout = (MAJORS / f"{stem}.stdout").read_text()
    stderr = (MAJORS / f"{stem}.stderr").read_text()
    return run_database(database, stdout, stderr, int(EXIT_CODES[stem]))


def clean_runs() -> list[DatabaseRun]:
    return [sql_run(f"pg13-amcheck-clean-{name}", name) for name in DATABASES]


def test_13_every_btree_index_of_every_database_checked_passes_and_says_heap_pages_were_not() -> None:
    runs = clean_runs()
    check = amcheck_result(13, runs, catalog("13"))
    assert (check.name, check.status) == (CheckName.AMCHECK, CheckStatus.PASSED)
    details = check.details
    counts = {run.database: (run.catalogued, run.checked) for run in runs}
    # Every index the catalogue lists was checked, but the invalid one (shop.public.dup_v).
    assert all(catalogued == checked for name, (catalogued, checked) in counts.items() if name != "shop")
    assert counts["shop"][0] == counts["shop"][1] + 1
    assert details["indexes_not_checkable"] == {"shop.public.dup_v": (
        "not valid (an interrupted CREATE INDEX CONCURRENTLY or REINDEX): no query uses it, amcheck refuses it")}
    assert details["btree_indexes"] == sum(checked for _, checked in counts.values())
    assert details["databases_checked"] == DATABASES and details["databases_not_checked"] == {}
    assert details["heap_pages_checked"] is False
    assert {run.amcheck_version for run in runs} == {"1.2"}
    assert check.summary == (
        f"PostgreSQL 13: {details['btree_indexes']} btree indexes in 5 of 5 databases checked by amcheck's "
        "bt_index_check with heapallindexed (every row an index should hold looked up in it): no corruption; heap "
        "pages not checked by amcheck (PostgreSQL 13 has no verify_heapam)")
    assert details["not_checked"].startswith("heap pages (tuple headers, line pointers, TOAST links) were not "
                                             "checked by amcheck: PostgreSQL 13 has no verify_heapam")


def test_13_a_damaged_index_and_a_row_its_index_lacks_fail_in_the_server_s_words() -> None:
    damaged = sql_run("pg13-amcheck-damaged-app", "app")
    check = amcheck_result(13, [damaged, *clean_runs()[1:]], catalog("13"))
    assert check.status is CheckStatus.FAILED
    order, lacking = check.findings
    assert order.startswith('btree index "app.public.ordered_id": XX002: item order invariant violated for index '
                            '"ordered_id"; DETAIL: Lower index tid=')
    assert lacking.startswith('btree index "app.public.lost_id": XX001: heap tuple (')
    assert 'from table "lost" lacks matching index tuple within index "lost_id"' in lacking
    assert check.summary == "amcheck found damage in 2 btree indexes on PostgreSQL 13: app.public.ordered_id, " \
                            "app.public.lost_id"


def test_13_a_page_failing_its_checksum_fails_the_indexes_reading_it() -> None:
    run = sql_run("pg13-amcheck-checksum-app", "app")
    check = amcheck_result(13, [run, *clean_runs()[1:]], catalog("13"))
    assert check.status is CheckStatus.FAILED
    assert check.summary == "amcheck found damage in 2 btree indexes on PostgreSQL 13: app.public.pages_pkey, " \
                            "app.public.pages_note"
    assert any(line.startswith('database "app": WARNING:  XX001: page verification failed, calculated checksum ')
               for line in check.findings)
    assert any(line.startswith('btree index "app.public.pages_pkey": XX001: invalid page in block 0 of relation ')
               for line in check.findings)


def test_13_an_image_without_the_amcheck_extension_is_an_error_naming_it() -> None:
    run = sql_run("pg13-amcheck-no-extension-bare", "bare")
    assert run.checked == 0 and run.corrupt == []
    (why,) = run.errors
    assert why.startswith("the check did not reach its end (psql exit 3): ")
    assert 'could not open extension control file' in why and "amcheck.control" in why
    check = amcheck_result(13, [run], [Database("bare", True, False, False)])
    assert check.status is CheckStatus.ERROR
    assert check.summary == f"amcheck checked 0 of 1 databases; not checked: bare: {why}"


def test_13_a_database_left_out_or_unreachable_keeps_the_check_from_passing() -> None:
    runs = clean_runs()
    check = amcheck_result(13, runs[1:], catalog("13"))
    assert (check.status, check.summary) == (CheckStatus.ERROR, "amcheck checked 4 of 5 databases; not checked: app: "
                                                                "amcheck was not run in it")
    invalid = [*catalog("13"), Database("halfdropped", False, False, True)]
    check = amcheck_result(13, runs, invalid)
    assert check.status is CheckStatus.ERROR and check.details["databases_not_checked"]["halfdropped"].startswith(
        "invalid (pg_database.datconnlimit = -2")
    unlisted = amcheck_result(13, runs, None)
    assert unlisted.status is CheckStatus.ERROR and "could not be read" in unlisted.summary


def _clean_app() -> tuple[list[str], str]:
    stdout = (MAJORS / "pg13-amcheck-clean-app.stdout").read_text().splitlines()
    return stdout, (MAJORS / "pg13-amcheck-clean-app.stderr").read_text()


def test_13_an_index_of_the_catalogue_with_no_result_is_an_error_naming_it() -> None:
    stdout, stderr = _clean_app()
    dropped = json.loads(stdout[1])
    name = next(i["name"] for i in json.loads(stdout[0])["indexes"] if i["oid"] == dropped["oid"])
    run = run_database("app", "\n".join([stdout[0], *stdout[2:]]), stderr, 0)
    assert run.errors == [f"1 of {run.catalogued} btree indexes have no result: {name}"]


def test_13_an_output_cut_short_or_unknown_is_an_error_never_a_pass() -> None:
    stdout, stderr = _clean_app()
    cut = run_database("app", "\n".join(stdout[:-1]), stderr, 0)
    assert not cut.proven and cut.errors[0].startswith("the check did not reach its end (psql exit 0): ")
    unknown = run_database("app", "\n".join([*stdout, "something else"]), stderr, 0)
    assert unknown.errors == ["psql printed a line restoreproof does not know: 'something else'"]
    assert not run_database("app", "\n".join(stdout), stderr, 1).proven  # the script's end, but psql failed
    missing = run_database("app", "", "bash: line 1: psql: command not found\n", 127)
    assert missing.errors == ["psql was not found in the target (exit 127: bash: line 1: psql: command not found)"]


def test_13_a_server_warning_keeps_a_clean_run_from_passing() -> None:
    runs = clean_runs()
    runs[0].warnings.append('WARNING:  01000: database "app" has a collation version mismatch')
    check = amcheck_result(13, runs, catalog("13"))
    assert check.status is CheckStatus.ERROR
    assert check.summary.startswith('amcheck\'s findings are not proof: the server warned "database "app" has a '
                                    'collation version mismatch": the target\'s collation library')
    runs[0].warnings[-1] = "WARNING:  01000: something else"
    assert amcheck_result(13, runs, catalog("13")).summary == (
        "amcheck found no corruption, but the server warned: something else")


def test_the_13_captures_ran_the_script_restoreproof_runs() -> None:
    assert (MAJORS / "amcheck-script.sql").read_text() == SCRIPT


def test_13_a_result_twice_or_a_catalogue_not_the_one_asked_for_is_an_error() -> None:
    stdout, stderr = _clean_app()
    twice = run_database("app", "\n".join([*stdout[:2], stdout[1], *stdout[2:]]), stderr, 0)
    assert twice.errors == [f"results not asked for (not a checkable index of the catalogue, or twice): "
                            f"{[json.loads(stdout[1])['oid']] * 2}"]
    other = run_database("shop", "\n".join(stdout), stderr, 0)  # app's catalogue read as shop's
    assert not other.proven and other.errors[-1].startswith("the catalogue of btree indexes was not the one asked for")
    catalogue = json.loads(stdout[0])
    catalogue["indexes"][0].pop("valid")
    broken = run_database("app", "\n".join([json.dumps(catalogue), *stdout[1:]]), stderr, 0)
    assert broken.errors == [f"the catalogue of btree indexes was not the one asked for: {json.dumps(catalogue)[:300]}"]


def test_13_says_what_checked_its_heap_pages_pg_checksums_or_nothing() -> None:
    checked = amcheck_result(13, clean_runs(), catalog("13"))
    summary = checked.summary
    heap_pages_said(checked, parse_pg_checksums(*captured("pg13-pg_checksums-clean")))
    assert checked.details["heap_pages"] == "every page's checksum read by pg_checksums: passed"
    assert checked.summary == summary
    unchecked = amcheck_result(13, clean_runs(), catalog("13"))
    heap_pages_said(unchecked, parse_pg_checksums(*captured("pg13-pg_checksums-disabled")))
    assert unchecked.status is CheckStatus.PASSED  # the indexes' proof stands; what it does not cover is said
    assert unchecked.details["heap_pages"] == ("checked by nothing: the cluster has no data checksums "
                                               "(pg_checksums skipped)")
    assert unchecked.summary == summary + "; the cluster has no data checksums, so no check verified its heap pages"
    off = amcheck_result(13, clean_runs(), catalog("13"))
    heap_pages_said(off, None)
    assert off.details["heap_pages"].startswith("pg_checksums did not check them")
    pg_amcheck = parse_pg_amcheck(*captured("pg17-pg_amcheck-clean"))
    heap_pages_said(pg_amcheck, None)
    assert "heap_pages" not in pg_amcheck.details  # verify_heapam checked them
