"""Integrity-tool outputs captured from real runs, clean and on corrupted data."""

from tests.conftest import fixture_text
from verification.engines.postgres.integrity import parse_pg_amcheck, parse_pg_checksums
from verification.engines.postgres.verify_output import parse_pgbackrest_verify
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


# Real pgBackRest 2.45 outputs on copies of the demo repository, each with one fault.

def test_verify_manifest_missing_fails_although_the_stanza_status_is_ok():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-manifest-missing.out"), 0, "demo1")
    assert check.details["statuses"] == ["ok", "ok"]  # pgBackRest itself calls this fine
    assert check.status is CheckStatus.FAILED
    assert check.findings == ["backup 20261124-001501F_20261124-001520I: status manifest missing"]


def test_verify_unreadable_wal_file_fails_naming_it_and_the_archive_count():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-wal-truncated.out"), 0, "demo1")
    assert check.status is CheckStatus.FAILED
    assert check.findings[0] == (
        "invalid result: archive/demo1/15-1/0000000100000000/00000001000000000000000C-"
        "7d6807736d177e2a7750e78fa69ab6ec94455231.gz: [29] raised from local-1 protocol: unexpected eof in "
        "compressed data")
    assert "WAL archive 15-1: 12 of 13 WAL files valid" in check.findings
    assert "archive 15-1: other 1" in check.findings


def test_verify_without_backup_info_fails():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-info-gone.out"), 0, "demo1")
    assert check.status is CheckStatus.FAILED
    assert check.findings == ["stanza demo1: No usable backup.info file"]


def test_verify_in_progress_backup_is_named_not_verified_and_does_not_fail_the_others():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-in-progress.out"), 0, "demo1")
    assert check.status is CheckStatus.PASSED
    assert check.summary == ("3 backups and 1 WAL archive(s) valid; in progress, not verified: "
                             "20261124-001501F_20261124-002000I")


def test_verify_does_not_see_a_missing_segment_in_the_middle_so_the_planner_must():
    # pgBackRest 2.45 checks the WAL files that exist; a gap passes its verify (the chain planner fails it).
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-wal-missing.out"), 0, "demo1")
    assert check.status is CheckStatus.PASSED


def test_verify_rules_each_fail_on_their_own():
    clean = fixture_text("pgbackrest-verify-clean.out")
    assert parse_pgbackrest_verify(clean, 0, "demo1").status is CheckStatus.PASSED
    # valid < checked, though the status says valid
    fewer = clean.replace("total files checked: 984, total valid files: 984", "total files checked: 984, total valid "
                          "files: 983", 1)
    assert parse_pgbackrest_verify(fewer, 0, "demo1").status is CheckStatus.FAILED
    # a non-zero count under a backup
    counted = clean.replace("missing: 0, checksum invalid: 0, size invalid: 0, other: 0",
                            "missing: 1, checksum invalid: 0, size invalid: 0, other: 0", 1)
    assert parse_pgbackrest_verify(counted, 0, "demo1").status is CheckStatus.FAILED
    # a status this version does not know
    odd = clean.replace("status: valid", "status: quarantined", 1)
    assert parse_pgbackrest_verify(odd, 0, "demo1").status is CheckStatus.ERROR
    # a stanza status that is not ok in one copy
    half = clean.replace("status: ok", "status: maybe", 1)
    assert parse_pgbackrest_verify(half, 0, "demo1").status is CheckStatus.ERROR
    # another stanza's summary
    assert parse_pgbackrest_verify(clean, 0, "demo2").status is CheckStatus.ERROR
    # an unknown warning
    warned = clean + "2026-11-22 19:52:53.600 P00   WARN: something new happened\n"
    assert parse_pgbackrest_verify(warned, 0, "demo1").status is CheckStatus.ERROR
    # a missing WAL file is a WARN that pgBackRest does not count: restoreproof does
    missing = clean + "2026-11-22 19:52:53.600 P01   WARN: file missing '15-1/0000000100000000/000000010000000000000005-abc.gz'\n"
    failed = parse_pgbackrest_verify(missing, 0, "demo1")
    assert failed.status is CheckStatus.FAILED
    assert failed.findings == ["file missing: archive/demo1/15-1/0000000100000000/000000010000000000000005-abc.gz"]
    # a non-zero exit with a clean-looking summary
    assert parse_pgbackrest_verify(clean, 1, "demo1").status is CheckStatus.ERROR


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


def test_verify_every_line_kind_on_its_own():
    clean = fixture_text("pgbackrest-verify-clean.out")
    stamp = "2026-11-22 19:52:53.600 P00 "
    passed = parse_pgbackrest_verify(clean, 0, "demo1")
    assert passed.details == {
        "backups": {"20261122-195034F": "valid", "20261122-195034F_20261122-195039D": "valid",
                    "20261122-195034F_20261122-195042I": "valid"},
        "archives": {"15-1": "10/10 valid"}, "exit_code": 0, "statuses": ["ok", "ok"], "in_progress": [],
        "unrecognised": []}
    # Detail, debug and trace lines say nothing about the verdict.
    for level in ("DETAIL", "DEBUG", "TRACE"):
        assert parse_pgbackrest_verify(clean + f"{stamp}{level}: archive path '15-1' is empty\n", 0, "demo1").status \
            is CheckStatus.PASSED
    # An error or assertion of pgBackRest's own is "could not run", named.
    for level in ("ERROR", "ASSERT"):
        check = parse_pgbackrest_verify(clean + f"{stamp}{level}: [082]: lock timeout\n", 0, "demo1")
        assert (check.status, check.findings) == (CheckStatus.ERROR, [f"{level}: [082]: lock timeout"])
    # A note that says the repository is inconsistent fails it, in pgBackRest's words.
    note = "archiveIds '14-1' are not in the archive.info history list"
    check = parse_pgbackrest_verify(clean + f"{stamp}INFO: {note}\n", 0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.FAILED, [note])
    # An INFO line nobody knows is not waved through as progress.
    check = parse_pgbackrest_verify(clean + f"{stamp}INFO: something new\n", 0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.ERROR, ["unrecognised: INFO: something new"])
    # A backup in progress named only by its log line is still named.
    check = parse_pgbackrest_verify(clean + f"{stamp}INFO: backup 'L1' appears to be in progress, skipping\n", 0,
                                    "demo1")
    assert check.details["in_progress"] == ["L1"] and check.summary.endswith("in progress, not verified: L1")
    # A blank line in the middle does not end the reading.
    lines = clean.splitlines()
    gapped = "\n".join([*lines[:3], "", *lines[3:]]) + "\n"
    assert parse_pgbackrest_verify(gapped, 0, "demo1").details["backups"] == passed.details["backups"]
    # Counts before any archive or backup line belong to the repository.
    check = parse_pgbackrest_verify(clean.replace("stanza: demo1\n", "stanza: demo1\n    missing: 1\n", 1), 0, "demo1")
    assert "repository: missing 1" in check.findings
    # "none found" lines are known; a repository with nothing verified is an error for that reason.
    empty = "stanza: demo1\nstatus: ok\n  archiveId: none found\n  backup: none found\n"
    check = parse_pgbackrest_verify(empty, 0, "demo1")
    assert (check.status, check.summary) == (CheckStatus.ERROR, "pgbackrest verify verified no backup")
    # An unknown summary line is an error, quoted.
    check = parse_pgbackrest_verify(clean + "  something else entirely\n", 0, "demo1")
    assert check.findings == ["unrecognised: something else entirely"]
    # A status this version does not know is said as such.
    odd = parse_pgbackrest_verify(clean.replace("status: valid", "status: quarantined", 1), 0, "demo1")
    assert odd.findings == ["unrecognised: backup 20261122-195034F: status 'quarantined', which this version does "
                            "not know"]
    fewer = parse_pgbackrest_verify(clean.replace("total valid files: 984", "total valid files: 983", 1), 0, "demo1")
    assert "backup 20261122-195034F_20261122-195039D: 983 of 984 files valid" in fewer.findings
