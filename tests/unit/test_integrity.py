"""Integrity-tool outputs captured from real runs, clean and on corrupted data."""

from tests.conftest import fixture_text
from verification.engines.postgres.integrity import parse_pg_amcheck, parse_pg_checksums, parse_pgbackrest_verify
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


def test_verify_clean_repository():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-clean.out"), 0, "demo1")
    assert check.status is CheckStatus.PASSED
    assert set(check.details["backups"].values()) == {"valid"} and len(check.details["backups"]) == 3


def test_verify_corrupt_repository_names_every_bad_file_even_though_pgbackrest_exits_zero():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-corrupt.out"), 0, "demo1")
    assert check.status is CheckStatus.FAILED
    assert "invalid checksum: backup/demo1/20261122-195034F/pg_data/base/5/16396.gz" in check.findings
    assert ("invalid checksum: backup/demo1/20261122-195034F_20261122-195042I/pg_data/base/5/16407.gz"
            in check.findings)
    assert check.details["backups"]["20261122-195034F_20261122-195039D"] == "valid"


def test_verify_that_printed_nothing_is_an_error():
    check = parse_pgbackrest_verify("ERROR: [031]: option 'lock-path' not valid for command 'verify'\n", 31, "d")
    assert check.status is CheckStatus.ERROR
