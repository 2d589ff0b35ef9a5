"""PostgreSQL 13's index check by amcheck's SQL functions (amcheck_sql.py), function by function, on the
outputs captured in the 13 image (tests/fixtures/postgres/majors/capture.sh). A variant the captures do
not hold is a real capture edited as little as the case needs, with why beside it."""

from __future__ import annotations

import json
import shlex

from tests.conftest import FIXTURES
from verification.config import PostgresSettings
from verification.engines.postgres.amcheck_sql import (
    WHAT_IS_CHECKED,
    DatabaseRun,
    amcheck_result,
    amcheck_sql_argv,
    options_not_applied,
    run_database,
)
from verification.engines.postgres.databases import Database, parse_catalog
from verification.model import CheckName, CheckStatus

MAJORS = FIXTURES / "majors"
EXIT_CODES = dict(line.split() for line in (MAJORS / "exit-codes.txt").read_text().splitlines())
DATABASES = ["app", "postgres", "shop", "template0", "template1"]


def outputs(stem: str) -> tuple[list[str], str]:
    """A capture's standard output, line by line, and its standard error."""
    return (MAJORS / f"{stem}.stdout").read_text().splitlines(), (MAJORS / f"{stem}.stderr").read_text()


def sql_run(stem: str, database: str) -> DatabaseRun:
    stdout, stderr = outputs(stem)
    return run_database(database, "\n".join(stdout), stderr, int(EXIT_CODES[stem]))


def clean_runs() -> list[DatabaseRun]:
    return [sql_run(f"pg13-amcheck-clean-{name}", name) for name in DATABASES]


def catalog() -> list[Database]:
    return parse_catalog((MAJORS / "pg13-pg_database.json").read_text())


def catalogue_names(stdout: list[str]) -> dict[int, str]:
    return {index["oid"]: index["name"] for index in json.loads(stdout[0])["indexes"]}


# -- what is run ------------------------------------------------------------------------------------------


def test_psql_is_run_as_the_captures_ran_it() -> None:
    # capture.sh's amcheck_sql() ran the fixtures with this command: what the parser reads is what it prints.
    body = (MAJORS / "capture.sh").read_text().split("amcheck_sql() {", 1)[1].split("\n}", 1)[0]
    captured = shlex.split(body.split(" -- \\\n", 1)[1].replace("\\\n", " "))
    assert amcheck_sql_argv("$SOCK", 5432, "postgres", "$3") == captured
    assert captured[:4] == ["bash", "-c", 'psql "$@" <<<"$RESTOREPROOF_AMCHECK_SQL"', "amcheck"]


def test_only_pg_amcheck_options_the_functions_cannot_apply_are_said_not_applied() -> None:
    assert options_not_applied(PostgresSettings().amcheck_options) == []  # --heapallindexed: always done
    # The jobs, in each of pg_amcheck's spellings, are not a check of their own: the indexes go one by one.
    for jobs in (["--jobs=4"], ["--jobs", "4"], ["-j", "4"], ["-j4"]):
        assert options_not_applied(["--heapallindexed", *jobs]) == [], jobs
    assert options_not_applied(["-j", "2", "--rootdescend"]) == ["--rootdescend"]
    assert options_not_applied(["--rootdescend", "--jobs", "2"]) == ["--rootdescend"]
    assert options_not_applied(["--jobs=2", "--parent-check", "--exclude-relation", "app.public.pages"]) == [
        "--parent-check", "--exclude-relation", "app.public.pages"]


# -- one database's outputs -------------------------------------------------------------------------------


def test_an_output_cut_inside_a_line_is_an_error_quoting_its_start() -> None:
    stdout, stderr = outputs("pg13-amcheck-clean-app")
    # psql stopped by the check's timeout (exit 124) while it printed the catalogue.
    cut = stdout[0][:1000]
    run = run_database("app", cut, stderr, 124)
    assert run.errors == [f"psql printed a line restoreproof does not know: {cut[:300]!r}"]


def test_a_json_object_the_script_does_not_print_is_an_error_quoting_its_start() -> None:
    stdout, stderr = outputs("pg13-amcheck-clean-app")
    # The catalogue as another script would name it: an object, but none the script prints.
    other = stdout[0].replace('"indexes" :', '"relations" :')
    run = run_database("app", "\n".join([other, *stdout[1:]]), stderr, 0)
    assert run.errors == [f"psql printed a line restoreproof does not know: {other[:300]!r}"]
    assert not run.proven


def test_a_catalogue_alone_says_its_start_as_the_last_thing_said() -> None:
    stdout, stderr = outputs("pg13-amcheck-clean-app")
    assert stderr == ""
    run = run_database("app", stdout[0], stderr, 124)  # stopped by the timeout after the catalogue
    assert run.errors[0] == f"the check did not reach its end (psql exit 124): {stdout[0][:300]}"


def test_a_run_that_said_nothing_at_all_says_so() -> None:
    _, stderr = outputs("pg13-amcheck-clean-app")
    run = run_database("app", "", stderr, 124)  # stopped by the timeout before it printed anything
    assert run.errors == ["the check did not reach its end (psql exit 124): (nothing said)"]
    assert run.catalogued == 0 and not run.proven


def test_the_server_s_warnings_are_kept_and_its_data_corrupted_ones_are_findings() -> None:
    _, stderr = outputs("pg13-amcheck-checksum-app")
    run = sql_run("pg13-amcheck-checksum-app", "app")
    warned = [line for line in stderr.splitlines() if line.startswith("WARNING:  ")]
    assert len(warned) == 2 and run.warnings == warned
    assert run.corrupt[:2] == [f'database "app": {line}' for line in warned]


def test_a_failed_index_s_detail_and_hint_are_kept_in_that_order() -> None:
    stdout, stderr = outputs("pg13-amcheck-damaged-app")
    run = run_database("app", "\n".join(stdout), stderr, 0)
    assert run.corrupt[1] == (
        'btree index "app.public.lost_id": XX001: heap tuple (1,75) from table "lost" lacks matching index tuple '
        'within index "lost_id"; HINT: Retrying verification using the function bt_index_parent_check() might '
        "provide a more specific error.")
    # No captured error carries both a detail and a hint (the script prints both fields for every error):
    # the order error is given lost_id's hint too.
    both = [line.replace('"hint" : ""', '"hint" : "Retrying verification using the function '
                         'bt_index_parent_check() might provide a more specific error."')
            if '"state" : "XX002"' in line else line for line in stdout]
    order = run_database("app", "\n".join(both), stderr, 0).corrupt[0]
    assert order == ('btree index "app.public.ordered_id": XX002: item order invariant violated for index '
                     '"ordered_id"; DETAIL: Lower index tid=(1,300) (points to heap tid=(1,74)) higher index '
                     "tid=(1,301) (points to heap tid=(1,75)) page lsn=0/1639D78.; HINT: Retrying verification "
                     "using the function bt_index_parent_check() might provide a more specific error.")


def test_an_index_error_that_is_not_corruption_is_an_error_not_a_finding() -> None:
    stdout, stderr = outputs("pg13-amcheck-damaged-app")
    # lost_id's check cancelled by a statement timeout (SQLSTATE 57014, the server's words) instead
    # of finding its missing row: it says nothing of the data.
    lost = json.loads(stdout[-2])
    assert lost["state"] == "XX001"
    cancelled = {**lost, "state": "57014", "message": "canceling statement due to statement timeout", "hint": ""}
    run = run_database("app", "\n".join([*stdout[:-2], json.dumps(cancelled), stdout[-1]]), stderr, 0)
    assert run.damaged == ["app.public.ordered_id"]
    assert run.errors == ['btree index "app.public.lost_id": 57014: canceling statement due to statement timeout']


def test_a_result_for_an_index_not_in_the_catalogue_is_named_by_its_oid() -> None:
    stdout, stderr = outputs("pg13-amcheck-damaged-app")
    # The index was made after the catalogue was read (each statement is its own transaction, the
    # \gexec list is read after it): the catalogue without ordered_id.
    catalogue = json.loads(stdout[0])
    (ordered,) = [index for index in catalogue["indexes"] if index["name"] == "public.ordered_id"]
    catalogue["indexes"].remove(ordered)
    run = run_database("app", "\n".join([json.dumps(catalogue), *stdout[1:]]), stderr, 0)
    assert run.damaged == [f"app.oid {ordered['oid']}", "app.public.lost_id"]
    assert run.corrupt[0].startswith(f'btree index "app.oid {ordered["oid"]}": XX002: item order invariant violated')
    assert run.errors == [f"results not asked for (not a checkable index of the catalogue, or twice): "
                          f"[{ordered['oid']}]"]


def test_many_indexes_without_a_result_or_given_twice_are_counted_and_the_first_five_named() -> None:
    stdout, stderr = outputs("pg13-amcheck-clean-app")
    names = catalogue_names(stdout)
    dropped = [json.loads(line)["oid"] for line in stdout[1:7]]
    run = run_database("app", "\n".join([stdout[0], *stdout[7:]]), stderr, 0)
    assert run.errors == [f"6 of {run.catalogued} btree indexes have no result: "
                          + ", ".join(names[oid] for oid in sorted(dropped)[:5])]
    twice = run_database("app", "\n".join([*stdout[:7], *stdout[1:]]), stderr, 0)
    assert twice.errors == [f"results not asked for (not a checkable index of the catalogue, or twice): "
                            f"{dropped[:5]}"]


def test_a_temporary_index_is_not_checkable_and_says_why() -> None:
    stdout, stderr = outputs("pg13-amcheck-clean-app")
    # A temporary table's index left by a session the restore ended: the script lists it as temporary
    # and does not check it (another session's temporary relation cannot be read).
    catalogue = json.loads(stdout[0])
    temporary = catalogue["indexes"][-1]
    temporary["temporary"] = True
    results = [line for line in stdout[1:] if json.loads(line).get("oid") != temporary["oid"]]
    run = run_database("app", "\n".join([json.dumps(catalogue), *results]), stderr, 0)
    assert run.errors == [] and run.checked == run.catalogued - 1
    assert run.not_checkable == {temporary["name"]: "a temporary index (of a session that no longer exists): "
                                                    "nothing to check"}


# -- the check over every database ------------------------------------------------------------------------


def test_a_passed_check_says_per_database_what_was_catalogued_and_checked() -> None:
    runs = clean_runs()
    check = amcheck_result(13, runs, catalog())
    assert (check.name, check.status) == (CheckName.AMCHECK, CheckStatus.PASSED)
    details = check.details
    assert details["postgres_major"] == 13
    assert details["method"] == "the amcheck extension's SQL functions (PostgreSQL 13 has no pg_amcheck program)"
    assert details["checked"] == WHAT_IS_CHECKED
    assert details["btree_indexes_catalogued"] == sum(run.catalogued for run in runs) == details["btree_indexes"] + 1
    assert details["per_database"] == {run.database: {"catalogued": run.catalogued, "checked": run.checked,
                                                      "amcheck_version": "1.2"} for run in runs}
    assert details["per_database"]["app"]["checked"] > 100


def test_an_unread_list_of_databases_is_an_error_that_keeps_what_was_checked() -> None:
    check = amcheck_result(13, clean_runs(), None)
    assert (check.name, check.status) == (CheckName.AMCHECK, CheckStatus.ERROR)
    assert check.summary == ("the restored server's list of databases (pg_database) could not be read: no database "
                             "is known to be checked")
    assert check.details["postgres_major"] == 13 and check.details["per_database"]["shop"]["checked"] > 100


def test_damage_with_a_database_not_checked_fails_and_says_what_was_not_checked() -> None:
    check = amcheck_result(13, [sql_run("pg13-amcheck-damaged-app", "app")], catalog())
    assert (check.name, check.status) == (CheckName.AMCHECK, CheckStatus.FAILED)
    assert check.summary == ("amcheck found damage in 2 btree indexes on PostgreSQL 13: app.public.ordered_id, "
                             "app.public.lost_id; 1 of 5 databases checked, not checked: postgres: amcheck was not "
                             "run in it; shop: amcheck was not run in it; template0: amcheck was not run in it; "
                             "template1: amcheck was not run in it")
    assert check.details["databases_checked"] == ["app"] and check.details["postgres_major"] == 13


def test_damage_in_more_than_five_indexes_names_five_and_counts_the_others() -> None:
    damaged, checksum = sql_run("pg13-amcheck-damaged-app", "app"), sql_run("pg13-amcheck-checksum-app", "app")
    # Runs of two captures of "app" (one damaged cluster, one with a failed checksum), one of them twice:
    # the summary counts every run's damaged indexes.
    six = amcheck_result(13, [damaged, checksum, damaged, *clean_runs()[1:]], catalog())
    assert six.summary == ("amcheck found damage in 6 btree indexes on PostgreSQL 13: app.public.ordered_id, "
                           "app.public.lost_id, app.public.pages_pkey, app.public.pages_note, app.public.ordered_id "
                           "and 1 more")
    # The checksum capture without its last failed index's result: one damaged index more, not two.
    stdout, stderr = outputs("pg13-amcheck-checksum-app")
    last = [line for line in stdout if '"checked" : false' in line][-1]
    one = run_database("app", "\n".join(line for line in stdout if line != last), stderr, 0)
    assert one.damaged == ["app.public.pages_pkey"]
    five = amcheck_result(13, [damaged, checksum, one], catalog())
    assert five.status is CheckStatus.FAILED
    assert five.summary.startswith("amcheck found damage in 5 btree indexes on PostgreSQL 13: app.public.ordered_id, "
                                   "app.public.lost_id, app.public.pages_pkey, app.public.pages_note, "
                                   "app.public.pages_pkey; ")


def test_a_database_not_checked_is_a_finding_of_the_error() -> None:
    check = amcheck_result(13, clean_runs()[1:], catalog())
    assert (check.name, check.status) == (CheckName.AMCHECK, CheckStatus.ERROR)
    assert check.findings == ["database app not checked: amcheck was not run in it"]
    assert check.details["databases_not_checked"] == {"app": "amcheck was not run in it"}


def test_every_error_of_a_database_is_said_of_it() -> None:
    stdout, stderr = outputs("pg13-amcheck-clean-app")
    cut = run_database("app", "\n".join(stdout[:-2]), stderr, 0)  # cut before its last result and the end
    assert len(cut.errors) == 2
    check = amcheck_result(13, [cut, *clean_runs()[1:]], catalog())
    assert check.status is CheckStatus.ERROR
    assert check.summary == f"amcheck checked 4 of 5 databases; not checked: app: {cut.errors[0]}; {cut.errors[1]}"


def test_a_database_with_no_index_checked_is_not_checked() -> None:
    stdout, stderr = outputs("pg13-amcheck-clean-app")
    # A catalogue with no btree index at all, and so no result: never a pass on nothing checked.
    catalogue = json.loads(stdout[0])
    catalogue["indexes"] = []
    run = run_database("app", "\n".join([json.dumps(catalogue), stdout[-1]]), stderr, 0)
    assert run.errors == [] and run.checked == 0
    check = amcheck_result(13, [run, *clean_runs()[1:]], catalog())
    assert (check.status, check.summary) == (CheckStatus.ERROR, "amcheck checked 4 of 5 databases; not checked: app: "
                                                                "amcheck checked none of its btree indexes")


def test_the_server_s_warnings_keep_a_clean_check_from_passing_each_said() -> None:
    runs = clean_runs()
    # The server's warning of a collation library other than the database's (as integrity.py reads it).
    collation = 'WARNING:  01000: database "app" has a collation version mismatch'
    runs[0].warnings.append(collation)
    check = amcheck_result(13, runs, catalog())
    assert (check.name, check.status, check.findings) == (CheckName.AMCHECK, CheckStatus.ERROR, [collation])
    assert check.summary == ('amcheck\'s findings are not proof: the server warned "database "app" has a collation '
                             'version mismatch": the target\'s collation library is not the one the database was '
                             "created with; verify with a target image whose ICU/glibc matches the source's "
                             "(docker.postgres_image)")
    assert check.details["postgres_major"] == 13
    runs[0].warnings[-1] = "WARNING:  01000: something else"
    runs[1].warnings.append("WARNING:  01000: and another")
    assert amcheck_result(13, runs, catalog()).summary == (
        "amcheck found no corruption, but the server warned: something else; and another")
