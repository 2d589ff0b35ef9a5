"""Which databases of a restored cluster each check looked at, on real captured outputs.

Fixtures (PostgreSQL 15.18, pg_amcheck with restoreproof's own options):
- pg_database-mixed.json: LIST_SQL on a cluster of 8 databases: `frozen` and template0 refusing
  connections, `gone` invalid (datconnlimit = -2), `tmpl_app` a user's template, `we|ird.na me`;
- pg_amcheck-all-skips-closed.out: `pg_amcheck --all` on it as it is (5 included: it passes by the
  closed and the invalid ones without a word, and exits 0);
- pg_amcheck-opened-invalid-left.out: once frozen and template0 allow connections (7 included);
- pg_database-closed-databases.json, pg_amcheck-every-database.out: a restored cluster of the fault
  tests (archive closed, tmpl_orders a closed template, template0), every database opened and checked;
- pg_amcheck-closed-database-corrupt.out: a damaged heap page in the closed database `archive`.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import fixture_text
from verification.engines.postgres.databases import (
    INVALID_CONNLIMIT,
    LIST_SQL,
    TEMPLATE_LEFT_OUT,
    Coverage,
    Database,
    UnrecognisedCatalog,
    allow_sql,
    amcheck_coverage,
    amcheck_relations,
    annotate,
    covered,
    data_coverage,
    opened,
    parse_catalog,
    quote_ident,
    to_open,
)
from verification.engines.postgres.integrity import parse_pg_amcheck
from verification.model import (
    DATABASES_CHECKED,
    DATABASES_EXISTING,
    DATABASES_NOT_CHECKED,
    CheckName,
    CheckResult,
    CheckStatus,
)

MIXED = ["app", "frozen", "gone", "postgres", "template0", "template1", "tmpl_app", "we|ird.na me"]
INVALID_GONE = ('invalid (pg_database.datconnlimit = -2: an interrupted DROP DATABASE left it half dropped); '
                'PostgreSQL refuses every connection to it, so no check could read it: drop it on the source '
                '(DROP DATABASE "gone")')


def mixed() -> list[Database]:
    return parse_catalog(fixture_text("pg_database-mixed.json"))


def all_opened(databases: list[Database]) -> list[Database]:
    return [opened(d, None) if d in to_open(databases) else d for d in databases]


def amcheck(fixture: str, exit_code: int = 0) -> tuple[CheckResult, dict[str, int]]:
    output = fixture_text(fixture)
    return parse_pg_amcheck(output, exit_code), amcheck_relations(output)


# -- pg_database -----------------------------------------------------------------------------------

def test_every_row_of_pg_database_is_read_with_what_keeps_a_check_out():
    databases = mixed()
    assert [d.name for d in databases] == MIXED
    by_name = {d.name: d for d in databases}
    assert by_name["frozen"] == Database("frozen", connections=False, template=False, invalid=False)
    assert by_name["template0"] == Database("template0", connections=False, template=True, invalid=False)
    assert by_name["tmpl_app"] == Database("tmpl_app", connections=True, template=True, invalid=False)
    # An interrupted DROP DATABASE leaves datallowconn as it was: only datconnlimit says it is invalid.
    assert by_name["gone"] == Database("gone", connections=True, template=False, invalid=True)
    assert by_name["we|ird.na me"].connections and not by_name["we|ird.na me"].invalid
    assert INVALID_CONNLIMIT == -2


def test_the_listing_asks_for_every_row_and_each_field_it_reads():
    # No WHERE: every database, whatever it allows; JSON, as a name may hold any character.
    assert LIST_SQL == ("select coalesce(json_agg(json_build_object('name', datname, 'connections', datallowconn, "
                        "'template', datistemplate, 'connlimit', datconnlimit) order by datname), '[]') "
                        "from pg_catalog.pg_database")


NOT_JSON = "not the JSON list asked for: "
NOT_A_LIST = "not a list of databases: "
NOT_A_ROW = "not a row of pg_database: "


@pytest.mark.parametrize(("said", "why"), [
    ("", NOT_JSON + "''"),
    ("psql: warning: extra command-line argument ignored\n",
     NOT_JSON + "'psql: warning: extra command-line argument ignored'"),
    ("[]\n", NOT_A_LIST + "'[]'"),
    ('{"name": "postgres"}', NOT_A_LIST + """'{"name": "postgres"}'"""),
    ('[{"name": "postgres", "connections": true, "template": false}]',
     NOT_A_ROW + "{'name': 'postgres', 'connections': True, 'template': False}"),
    ('[{"name": "postgres", "connections": "t", "template": false, "connlimit": -1}]',
     NOT_A_ROW + "{'name': 'postgres', 'connections': 't', 'template': False, 'connlimit': -1}"),
    ('[{"name": "postgres", "connections": true, "template": null, "connlimit": -1}]',
     NOT_A_ROW + "{'name': 'postgres', 'connections': True, 'template': None, 'connlimit': -1}"),
    ('[{"name": 5, "connections": true, "template": false, "connlimit": -1}]',
     NOT_A_ROW + "{'name': 5, 'connections': True, 'template': False, 'connlimit': -1}"),
    ('[{"name": "postgres", "connections": true, "template": false, "connlimit": true}]',
     NOT_A_ROW + "{'name': 'postgres', 'connections': True, 'template': False, 'connlimit': True}"),
    ('[{"name": "postgres", "connections": true, "template": false, "connlimit": "-2"}]',
     NOT_A_ROW + "{'name': 'postgres', 'connections': True, 'template': False, 'connlimit': '-2'}"),
    ('["postgres"]', NOT_A_ROW + "'postgres'"),
])
def test_anything_but_the_list_asked_for_is_unrecognised_never_an_empty_cluster(said: str, why: str):
    with pytest.raises(UnrecognisedCatalog) as raised:
        parse_catalog(said)
    assert str(raised.value) == why


def test_what_is_said_of_an_unrecognised_answer_is_cut_to_300_characters():
    with pytest.raises(UnrecognisedCatalog) as raised:
        parse_catalog("x" * 400)
    assert str(raised.value) == NOT_JSON + repr("x" * 300)
    with pytest.raises(UnrecognisedCatalog) as raised:
        parse_catalog(json.dumps({"rows": "y" * 400}))
    assert str(raised.value) == NOT_A_LIST + repr(json.dumps({"rows": "y" * 400})[:300])
    with pytest.raises(UnrecognisedCatalog) as raised:
        parse_catalog(json.dumps(["z" * 400]))
    assert str(raised.value) == NOT_A_ROW + repr("z" * 400)[:300]


def test_the_databases_to_open_are_those_refusing_connections_that_are_not_invalid():
    databases = mixed()
    shut_invalid = Database("dropping", connections=False, template=False, invalid=True)
    assert [d.name for d in to_open([*databases, shut_invalid])] == ["frozen", "template0"]


def test_a_database_opened_allows_connections_and_says_restoreproof_opened_it():
    frozen = mixed()[1]
    assert opened(frozen, None) == Database("frozen", connections=True, template=False, invalid=False, opened=True)
    refused = opened(frozen, "ERROR:  must be owner of database frozen")
    assert refused == Database("frozen", connections=False, template=False, invalid=False,
                               refused="ERROR:  must be owner of database frozen")


def test_why_no_check_can_reach_a_database():
    by_name = {d.name: d for d in mixed()}
    assert by_name["gone"].unreachable == INVALID_GONE
    assert by_name["frozen"].unreachable == ("it refuses connections (pg_database.datallowconn = false) and "
                                             "restoreproof could not allow them")
    assert opened(by_name["frozen"], "ERROR:  permission denied").unreachable == (
        "it refuses connections (pg_database.datallowconn = false) and restoreproof could not allow them: "
        "ERROR:  permission denied")
    assert opened(by_name["frozen"], None).unreachable is None
    assert by_name["template1"].unreachable is None


def test_names_are_quoted_as_sql_identifiers():
    assert quote_ident('we"ird') == '"we""ird"'
    assert allow_sql("we|ird.na me") == 'ALTER DATABASE "we|ird.na me" ALLOW_CONNECTIONS true'


# -- what pg_amcheck checked --------------------------------------------------------------------------

def test_pg_amcheck_all_passes_by_the_closed_and_the_invalid_databases_without_a_word():
    check, relations = amcheck("pg_amcheck-all-skips-closed.out")
    assert check.status is CheckStatus.PASSED  # the tool alone: 5 databases, no corruption, exit 0
    assert relations == {"app": 271, "postgres": 270, "template1": 270, "tmpl_app": 271, "we|ird.na me": 270}


def test_relations_are_counted_per_database_even_when_its_name_holds_a_dot():
    _, relations = amcheck("pg_amcheck-opened-invalid-left.out")
    assert relations == {"app": 271, "frozen": 273, "postgres": 270, "template0": 270, "template1": 270,
                         "tmpl_app": 271, "we|ird.na me": 270}


def test_a_relation_goes_to_the_longest_included_name_that_begins_it():
    output = ('pg_amcheck: including database "shop"\npg_amcheck: including database "shop.eu"\n'
              'pg_amcheck: checking heap table "shop.eu.public.orders"\n'
              'pg_amcheck: checking btree index "shop.public.orders_pkey"\n'
              'pg_amcheck: checking heap table "shopfloor.public.t"\n'
              'pg_amcheck: checking heap table "other.public.t"\n')
    assert amcheck_relations(output) == {"shop": 1, "shop.eu": 1}


def test_a_database_included_but_with_no_relation_checked_is_counted_as_none():
    assert amcheck_relations('pg_amcheck: including database "empty"\n') == {"empty": 0}


def test_unopened_databases_are_not_covered_and_each_says_why():
    _, relations = amcheck("pg_amcheck-all-skips-closed.out")
    coverage = amcheck_coverage(mixed(), relations, [])
    assert coverage.existing == tuple(MIXED)
    assert coverage.checked == ("app", "postgres", "template1", "tmpl_app", "we|ird.na me")
    refuses = "it refuses connections (pg_database.datallowconn = false) and restoreproof could not allow them"
    assert coverage.not_checked == {"frozen": refuses, "gone": INVALID_GONE, "template0": refuses}
    assert coverage.ratio == "5 of 8 databases"


def test_an_opened_database_pg_amcheck_did_not_include_is_named_with_the_options_that_may_explain_it():
    _, relations = amcheck("pg_amcheck-all-skips-closed.out")
    databases = all_opened(mixed())
    assert amcheck_coverage(databases, relations, []).not_checked == {
        "frozen": "pg_amcheck did not include it", "gone": INVALID_GONE, "template0": "pg_amcheck did not include it"}
    with_options = amcheck_coverage(databases, relations, ["--exclude-database=frozen"]).not_checked
    assert with_options["frozen"] == "pg_amcheck did not include it (postgres.amcheck_options: --exclude-database=frozen)"


def test_a_database_left_out_names_the_options_pg_amcheck_was_given():
    check, relations = amcheck("pg_amcheck-opened-invalid-left.out")
    del relations["frozen"]  # as if --exclude-database=frozen had kept it out
    result = covered(check, all_opened(mixed()), relations, ["--exclude-database=frozen"])
    assert result.details[DATABASES_NOT_CHECKED]["frozen"] == (
        "pg_amcheck did not include it (postgres.amcheck_options: --exclude-database=frozen)")


def test_an_included_database_with_no_relation_checked_is_not_covered():
    databases = [Database("postgres", True, False, False), Database("empty", True, False, False)]
    relations = {"postgres": 3, "empty": 0}
    assert amcheck_coverage(databases, relations, ["-S", "x"]).not_checked == {
        "empty": "pg_amcheck included it but checked none of its relations (postgres.amcheck_options: -S x)"}
    assert amcheck_coverage(databases, relations, []).not_checked == {
        "empty": "pg_amcheck included it but checked none of its relations"}


def test_opened_databases_all_checked_but_the_invalid_one():
    _, relations = amcheck("pg_amcheck-opened-invalid-left.out")
    coverage = amcheck_coverage(all_opened(mixed()), relations, [])
    assert coverage.not_checked == {"gone": INVALID_GONE}
    assert coverage.checked == tuple(name for name in MIXED if name != "gone")
    assert coverage.said() == f"gone: {INVALID_GONE}"


# -- the pg_amcheck check, covered --------------------------------------------------------------------

def test_a_pass_names_n_of_n_databases_and_which_restoreproof_opened():
    databases = all_opened(parse_catalog(fixture_text("pg_database-closed-databases.json")))
    check, relations = amcheck("pg_amcheck-every-database.out")
    heaps, indexes = check.details["heap_tables"], check.details["btree_indexes"]
    result = covered(check, databases, relations, [])
    assert result.status is CheckStatus.PASSED
    assert result.summary == f"{heaps} tables and {indexes} indexes in 5 of 5 databases: no corruption"
    assert result.details[DATABASES_EXISTING] == ["archive", "postgres", "template0", "template1", "tmpl_orders"]
    assert result.details[DATABASES_CHECKED] == result.details[DATABASES_EXISTING]
    assert result.details[DATABASES_NOT_CHECKED] == {}
    assert result.details["connections_allowed_by_restoreproof"] == ["archive", "template0", "tmpl_orders"]
    assert result.findings == []


def test_the_issues_case_no_corruption_in_5_databases_of_8_is_an_error_naming_each_left_out():
    check, relations = amcheck("pg_amcheck-all-skips-closed.out")
    result = covered(check, mixed(), relations, [])
    assert result.status is CheckStatus.ERROR
    refuses = "it refuses connections (pg_database.datallowconn = false) and restoreproof could not allow them"
    assert result.summary == "pg_amcheck checked 5 of 8 databases; not checked: frozen, gone, template0"
    assert result.findings == [f"database frozen not checked: {refuses}", f"database gone not checked: {INVALID_GONE}",
                               f"database template0 not checked: {refuses}"]
    assert result.details["connections_allowed_by_restoreproof"] == []


def test_an_invalid_database_left_out_keeps_pg_amcheck_from_passing():
    check, relations = amcheck("pg_amcheck-opened-invalid-left.out")
    result = covered(check, all_opened(mixed()), relations, [])
    assert result.status is CheckStatus.ERROR
    assert result.summary == "pg_amcheck checked 7 of 8 databases; not checked: gone"
    assert result.findings == [f"database gone not checked: {INVALID_GONE}"]


def test_corruption_in_a_closed_database_stays_a_failure_naming_the_relation():
    databases = all_opened(parse_catalog(fixture_text("pg_database-closed-corrupt.json")))
    check, relations = amcheck("pg_amcheck-closed-database-corrupt.out", 2)
    result = covered(check, databases, relations, [])
    assert result.status is CheckStatus.FAILED
    assert result.summary == f"pg_amcheck found corruption ({len(result.findings)} lines)"
    assert result.findings[0] == 'heap table "archive.public.cold", block 1, offset 61:'
    assert result.details[DATABASES_CHECKED] == ["archive", "postgres", "template0", "template1"]
    assert result.details["connections_allowed_by_restoreproof"] == ["archive", "template0"]


def test_a_failure_beside_a_database_left_out_says_both():
    check, relations = amcheck("pg_amcheck-closed-database-corrupt.out", 2)
    databases = [*all_opened(parse_catalog(fixture_text("pg_database-closed-corrupt.json"))),
                 Database("gone", True, False, True)]
    result = covered(check, databases, relations, [])
    assert result.status is CheckStatus.FAILED
    assert result.summary == (f"pg_amcheck found corruption ({len(result.findings)} lines); 4 of 5 databases checked, "
                              f"not checked: gone: {INVALID_GONE}")


def test_a_pass_without_the_list_of_databases_is_an_error():
    check, relations = amcheck("pg_amcheck-every-database.out")
    result = covered(check, None, relations, [])
    assert result.status is CheckStatus.ERROR
    assert result.summary == ("pg_amcheck checked 5 databases, but the restored server's list of databases could not "
                              "be read: none is known not to be left out")
    assert result.details[DATABASES_CHECKED] == ["archive", "postgres", "template0", "template1", "tmpl_orders"]
    assert DATABASES_EXISTING not in result.details


def test_a_failure_without_the_list_of_databases_stays_a_failure():
    check, relations = amcheck("pg_amcheck-closed-database-corrupt.out", 2)
    summary = check.summary
    result = covered(check, None, {**relations, "empty": 0}, [])
    assert (result.status, result.summary) == (CheckStatus.FAILED, summary)
    assert result.details[DATABASES_CHECKED] == ["archive", "postgres", "template0", "template1"]


# -- the data checks ---------------------------------------------------------------------------------

def test_the_data_checks_read_every_reachable_database_but_the_templates():
    coverage = data_coverage(all_opened(mixed()))
    assert coverage.checked == ("app", "frozen", "postgres", "we|ird.na me")
    assert coverage.not_checked == {"gone": INVALID_GONE, "template0": TEMPLATE_LEFT_OUT,
                                    "template1": TEMPLATE_LEFT_OUT, "tmpl_app": TEMPLATE_LEFT_OUT}
    assert TEMPLATE_LEFT_OUT == ("a template database (pg_database.datistemplate = true): the data checks read the "
                                 "databases applications use; pg_amcheck checks its pages")


def test_a_database_still_refusing_connections_is_left_out_of_the_data_checks_with_why():
    coverage = data_coverage(mixed())
    assert "frozen" not in coverage.checked
    assert coverage.not_checked["frozen"].startswith("it refuses connections")


def test_a_coverage_says_each_database_left_out_and_why_in_order():
    coverage = Coverage(("a", "b", "c"), ("a",), {"b": "closed", "c": "invalid"})
    assert coverage.said() == "b: closed; c: invalid"
    assert coverage.ratio == "1 of 3 databases"


def test_only_the_named_checks_are_told_which_databases_they_read():
    coverage = Coverage(("a", "b"), ("a",), {"b": "why"})
    baseline = CheckResult(CheckName.DATA_BASELINE, CheckStatus.PASSED, "ok", details={"tables": {}})
    suite = CheckResult("data:orders", CheckStatus.PASSED, "ok")
    annotate([baseline, suite], (CheckName.DATA_BASELINE,), coverage)
    assert baseline.details == {"tables": {}, DATABASES_CHECKED: ["a"], DATABASES_EXISTING: ["a", "b"],
                                DATABASES_NOT_CHECKED: {"b": "why"}}
    assert suite.details == {}
