"""pgbackrest verify (pgBackRest 2.45) outputs captured from real runs on copies of one real repository."""


from tests.conftest import fixture_text
from verification.engines.postgres.verify_output import VERSIONS, parse_pgbackrest_verify
from verification.model import CheckStatus

# pgbackrest verify. Real outputs of pgBackRest 2.45 (Debian 12) on copies of one real repository,
# each copy with one fault, made by scripts/capture-pgbackrest-verify-fixtures.sh: the command line is
# restoreproof's own (engine.py, repository_verify), the text is stdout then stderr (ExecResult.output).
# Every run exited 0 except bad-option (31): pgBackRest exits 0 whatever it finds.

FULL = "20261124-020904F"
DIFF = "20261124-020904F_20261124-020909D"
INCR = "20261124-020904F_20261124-020913I"
WAL_05 = "15-1/0000000100000000/000000010000000000000005-f92a67bcb34bd83723eac5dd87edfbd336a91b3c.gz"
WAL_08 = "15-1/0000000100000000/000000010000000000000008-e81ded42b60270ca2cedf0f98c03b1be0d44dab8.gz"
STAMP = "2026-11-24 02:09:38.676 P00 "


def verify(fault: str, exit_code: int = 0, stanza: str = "demo1"):
    return parse_pgbackrest_verify(fixture_text(f"pgbackrest-verify-{fault}.out"), exit_code, stanza)


def baseline() -> str:
    return fixture_text("pgbackrest-verify-baseline.out")


ZERO = "    missing: 0, checksum invalid: 0, size invalid: 0, other: 0"


def with_lines(changes: dict[int, list[str]]) -> str:
    """The baseline with lines of the summary on stdout (lines 12 to 20) replaced, and the same lines of
    the logged copy (2 to 10, indented under the log line)."""
    out = []
    for index, line in enumerate(baseline().splitlines()):
        if 2 <= index <= 10 and index + 10 in changes:
            out += [" " * 36 + new for new in changes[index + 10]]
        elif 12 <= index <= 20 and index in changes:
            out += changes[index]
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def both_copies(old: str, new: str, text: str | None = None) -> str:
    """The same change in the logged summary and the one on stdout (so they still agree)."""
    text = baseline() if text is None else text
    assert text.count(old) >= 2, old
    return text.replace(old, new)


def test_verify_baseline_passes_with_every_count_kept():
    check = verify("baseline")
    assert (check.name, check.status, check.summary, check.findings) == (
        "pgbackrest_verify", CheckStatus.PASSED, "3 backups and 1 WAL archive(s) valid", [])
    zero = {"missing": 0, "checksum invalid": 0, "size invalid": 0, "other": 0}
    assert check.details == {
        "backups": {FULL: "valid", DIFF: "valid", INCR: "valid"},
        "archives": {"15-1": "13/13 valid"}, "exit_code": 0, "statuses": ["ok", "ok"], "in_progress": [],
        "unrecognised": [], "stanza": "demo1", "version": "2.45", "summary_copies": 2,
        "backup_files": {FULL: {"checked": 977, "valid": 977, **zero}, DIFF: {"checked": 978, "valid": 978, **zero},
                         INCR: {"checked": 981, "valid": 981, **zero}},
        "archive_wal": {"15-1": {"checked": 13, "valid": 13, **zero}},
        "invalid_files": [], "warnings": [], "notes": [], "tool_errors": []}


def test_verify_manifest_and_copy_removed_fails_naming_the_backup_though_pgbackrest_says_ok():
    check = verify("manifest-and-copy-removed")
    assert check.details["statuses"] == ["ok", "ok"]
    assert check.status is CheckStatus.FAILED
    assert check.findings == [f"backup {DIFF}: status manifest missing"]
    assert check.summary == f"the repository has 1 problem(s); backups not valid: {DIFF}"


def test_verify_main_manifest_removed_passes_because_pgbackrest_verified_every_file_from_the_copy():
    check = verify("manifest-copy-only")
    assert check.status is CheckStatus.PASSED
    assert check.details["backup_files"][DIFF]["valid"] == check.details["backup_files"][DIFF]["checked"] == 978


def test_verify_backup_folder_with_only_its_manifest_copy_names_every_missing_file():
    check = verify("backup-folder-copy-only")
    assert check.status is CheckStatus.FAILED
    missing = [f for f in check.findings if f.startswith("file missing: ")]
    assert len(missing) == 25 and all(f.startswith(f"file missing: backup/demo1/{INCR}/pg_data/") for f in missing)
    assert f"file missing: backup/demo1/{INCR}/pg_data/global/pg_control.gz" in missing
    assert check.findings[25:] == [f"backup {INCR}: status invalid", f"backup {INCR}: 956 of 981 files valid",
                                   f"backup {INCR}: missing 25"]
    assert check.details["backups"] == {FULL: "valid", DIFF: "valid", INCR: "invalid"}


def test_verify_byte_flipped_in_a_backup_file_names_the_file_and_the_backup():
    check = verify("backup-byte-flipped")
    assert (check.name, check.status) == ("pgbackrest_verify", CheckStatus.FAILED)
    assert check.details["invalid_files"] == [f"invalid checksum: backup/demo1/{FULL}/pg_data/base/5/16396.gz"]
    assert check.findings == [f"invalid checksum: backup/demo1/{FULL}/pg_data/base/5/16396.gz",
                              f"backup {FULL}: status invalid", f"backup {FULL}: 976 of 977 files valid",
                              f"backup {FULL}: checksum invalid 1"]


def test_verify_bad_file_shared_with_later_backups_fails_each_of_them_though_only_one_line_names_it():
    check = verify("backup-referenced-file-flipped")
    assert check.status is CheckStatus.FAILED
    assert check.details["invalid_files"] == [f"invalid checksum: backup/demo1/{FULL}/pg_data/base/1/1247.gz"]
    for label, checked in ((FULL, 977), (DIFF, 978), (INCR, 981)):
        assert f"backup {label}: status invalid" in check.findings
        assert f"backup {label}: {checked - 1} of {checked} files valid" in check.findings
        assert f"backup {label}: checksum invalid 1" in check.findings
    assert check.summary == f"the repository has 10 problem(s); backups not valid: {FULL}, {DIFF}, {INCR}"


def test_verify_file_listed_in_the_manifest_but_missing_is_named():
    check = verify("backup-file-missing")
    assert check.status is CheckStatus.FAILED
    assert check.findings == [f"file missing: backup/demo1/{FULL}/pg_data/global/pg_control.gz",
                              f"backup {FULL}: status invalid", f"backup {FULL}: 976 of 977 files valid",
                              f"backup {FULL}: missing 1"]


def test_verify_truncated_wal_segment_is_named_with_pgbackrests_error_and_its_retries_are_known():
    check = verify("wal-segment-truncated")
    assert check.status is CheckStatus.FAILED
    assert check.findings == [
        f"invalid result: archive/demo1/{WAL_05}: [29] raised from local-1 protocol: unexpected eof in compressed data",
        "WAL archive 15-1: 12 of 13 WAL files valid", "archive 15-1: other 1"]
    assert check.details["invalid_files"] == check.findings[:1] and check.details["unrecognised"] == []


def test_verify_deleted_wal_segment_in_the_middle_is_not_seen_by_pgbackrest_so_the_planner_must():
    # pgBackRest 2.45 checks the WAL files there are (verify.c: the WAL reconciliation is left to do).
    check = verify("wal-segment-deleted")
    assert check.status is CheckStatus.PASSED
    assert check.details["archive_wal"]["15-1"]["checked"] == 12


def test_verify_wal_file_gone_when_read_is_a_failure_though_pgbackrest_only_warns_and_says_ok():
    check = verify("wal-vanished")
    assert check.details["statuses"] == ["ok", "ok"]
    assert check.status is CheckStatus.FAILED
    assert check.findings == [f"file missing: archive/demo1/{WAL_08}",  # the WARN line, from stderr
                              "WAL archive 15-1: 12 of 13 WAL files valid", "archive 15-1: missing 1"]


def test_verify_duplicate_wal_segment_names_the_segment_and_the_archive():
    check = verify("wal-duplicate")
    assert (check.status, check.summary) == (CheckStatus.FAILED, "the repository has 2 problem(s)")
    assert check.findings == ["duplicate WAL '000000010000000000000005' for '15-1' exists, skipping",
                              "WAL archive 15-1: 12 of 14 WAL files valid"]


def test_verify_archive_id_not_in_history_is_named():
    check = verify("archive-id-not-in-history")
    assert check.status is CheckStatus.FAILED
    assert check.findings == ["archiveIds '15-2' are not in the archive.info history list"]
    assert check.details["archives"] == {"15-1": "13/13 valid", "15-2": "0/0 valid"}


def test_verify_counts_that_do_not_add_up_fail_though_pgbackrest_says_ok():
    # An archive folder 14-1 beside 15-1: pgBackRest 2.45 matches archive ids on the database id only,
    # says nothing, and counts 15-1's valid WAL under 14-1.
    check = verify("archive-id-other-version")
    assert check.details["statuses"] == ["ok", "ok"]
    assert check.status is CheckStatus.FAILED
    assert check.findings == ["WAL archive 14-1: 13 WAL files valid of 0 checked (the counts do not add up)",
                              "WAL archive 15-1: 0 of 13 WAL files valid"]


def test_verify_without_backup_info_and_its_copy_fails():
    check = verify("backup-info-and-copy-removed")
    assert (check.status, check.findings) == (CheckStatus.FAILED, ["stanza demo1: No usable backup.info file"])


def test_verify_info_files_of_two_clusters_fail_with_both_system_ids():
    check = verify("history-mismatch")
    assert check.status is CheckStatus.FAILED
    assert check.findings == [
        "stanza demo1: backup info file and archive info file do not match; archive: id = 1, version = 15, "
        "system-id = 7711554340276889858; backup : id = 1, version = 15, system-id = 7711554254637572940; "
        "HINT: this may be a symptom of repository corruption!"]


def test_verify_backup_of_another_cluster_is_named():
    check = verify("foreign-backup")
    assert check.status is CheckStatus.FAILED
    assert check.findings == [
        "'20261124-020922F' may not be recoverable - PG data (id 1, version 15, system-id 7711554340276889858) is "
        "not in the backup.info history, skipping", "backup 20261124-020922F: status invalid"]


def test_verify_repository_with_nothing_to_verify_is_an_error():
    check = verify("nothing-to-verify")
    assert check.details["statuses"] == ["ok", "ok"]
    assert (check.status, check.summary, check.findings) == (
        CheckStatus.ERROR, "pgbackrest verify verified no backup",
        ["stanza demo1: no archives or backups exist in the repo"])


IN_PROGRESS = "in progress, not in backup.info (being written, or interrupted): no restore uses it, not verified"


def test_verify_interrupted_backup_in_progress_is_noted_not_a_finding():
    # A backup being written while the nightly verification runs, or one killed: no restore can use it.
    check = verify("backup-interrupted")
    assert check.details["statuses"] == ["ok", "ok"]
    assert (check.status, check.findings) == (CheckStatus.PASSED, [])
    assert check.details["notes"] == [f"backup 20261124-020917F: {IN_PROGRESS}"]
    assert check.details["in_progress"] == ["20261124-020917F"]
    assert check.summary.endswith("; in progress, not a backup yet, so not verified: 20261124-020917F")


def test_verify_configuration_warning_is_an_error_even_on_a_clean_repository():
    check = verify("config-warning")
    assert (check.status, check.summary, check.findings) == (
        CheckStatus.ERROR, "pgBackRest warned about its own configuration",
        ["pgBackRest configuration: environment contains invalid option 'not-an-option'"])


def test_verify_option_refused_is_an_error_quoting_pgbackrest():
    check = verify("bad-option", 31)
    assert (check.name, check.status, check.summary) == (
        "pgbackrest_verify", CheckStatus.ERROR, "pgbackrest verify could not run (exit 31)")
    assert check.findings == [
        "ERROR: [031]: option 'type' not valid for command 'verify'", "pgbackrest verify printed no summary",
        f"pgBackRest version none: restoreproof reads the verify output of pgBackRest {VERSIONS} only (verify "
        "command begin)",
        "the command did not end successfully (no verify command end)", "pgbackrest verify exited 31"]


# Earlier captures (another repository, same pgBackRest), kept: the same rules on other labels.

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


def test_verify_manifest_missing_fails_although_the_stanza_status_is_ok():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-manifest-missing.out"), 0, "demo1")
    assert check.details["statuses"] == ["ok", "ok"]
    assert check.status is CheckStatus.FAILED
    assert check.findings == ["backup 20261124-001501F_20261124-001520I: status manifest missing"]


def test_verify_unreadable_wal_file_fails_naming_it_and_the_archive_count():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-wal-truncated.out"), 0, "demo1")
    assert check.status is CheckStatus.FAILED
    assert check.findings == [
        "invalid result: archive/demo1/15-1/0000000100000000/00000001000000000000000C-"
        "7d6807736d177e2a7750e78fa69ab6ec94455231.gz: [29] raised from local-1 protocol: unexpected eof in "
        "compressed data", "WAL archive 15-1: 12 of 13 WAL files valid", "archive 15-1: other 1"]


def test_verify_without_backup_info_fails():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-info-gone.out"), 0, "demo1")
    assert check.status is CheckStatus.FAILED
    assert check.findings == ["stanza demo1: No usable backup.info file"]


def test_verify_in_progress_backup_is_noted_and_the_others_still_judged():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-in-progress.out"), 0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.PASSED, [])
    assert check.details["notes"] == [f"backup 20261124-001501F_20261124-002000I: {IN_PROGRESS}"]
    assert check.summary == ("3 backups and 1 WAL archive(s) valid; in progress, not a backup yet, so not verified: "
                             "20261124-001501F_20261124-002000I")


def test_verify_does_not_see_a_missing_segment_in_the_middle_so_the_planner_must():
    check = parse_pgbackrest_verify(fixture_text("pgbackrest-verify-wal-missing.out"), 0, "demo1")
    assert check.status is CheckStatus.PASSED


def test_verify_that_printed_nothing_is_an_error():
    check = parse_pgbackrest_verify("ERROR: [031]: option 'lock-path' not valid for command 'verify'\n", 31, "d")
    assert check.status is CheckStatus.ERROR
    assert parse_pgbackrest_verify("", 0, "demo1").status is CheckStatus.ERROR


# Each rule on its own, on the baseline: every one of these fails if its rule is taken out.

def test_verify_rule_valid_fewer_than_checked_fails_though_the_status_says_valid():
    text = both_copies("total files checked: 978, total valid files: 978", "total files checked: 978, total valid "
                       "files: 977")
    check = parse_pgbackrest_verify(text, 0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.FAILED, [f"backup {DIFF}: 977 of 978 files valid"])
    text = both_copies("total WAL checked: 13, total valid WAL: 13", "total WAL checked: 13, total valid WAL: 11")
    check = parse_pgbackrest_verify(text, 0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.FAILED, ["WAL archive 15-1: 11 of 13 WAL files valid"])


def test_verify_rule_more_valid_than_checked_fails():
    text = both_copies("total files checked: 978, total valid files: 978", "total files checked: 978, total valid "
                       "files: 979")
    check = parse_pgbackrest_verify(text, 0, "demo1")
    assert (check.status, check.findings) == (
        CheckStatus.FAILED, [f"backup {DIFF}: 979 files valid of 978 checked (the counts do not add up)"])


def test_verify_rule_any_non_zero_count_fails_naming_backup_or_archive_and_what():
    for kind in ("missing", "checksum invalid", "size invalid", "other"):
        for index, subject in ((14, "archive 15-1"), (18, f"backup {DIFF}")):
            counts = ZERO.replace(f"{kind}: 0", f"{kind}: 2")
            check = parse_pgbackrest_verify(with_lines({index: [counts]}), 0, "demo1")
            assert (check.status, check.findings) == (CheckStatus.FAILED, [f"{subject}: {kind} 2"]), (kind, subject)


def test_verify_rule_only_valid_passes_and_each_other_status_fails_naming_the_backup():
    for status in ("invalid", "manifest missing"):
        text = both_copies(f"backup: {INCR}, status: valid", f"backup: {INCR}, status: {status}")
        check = parse_pgbackrest_verify(text, 0, "demo1")
        assert check.status is CheckStatus.FAILED
        assert check.findings[0].startswith(f"backup {INCR}: status {status}")
        assert check.summary.endswith(f"backups not valid: {INCR}")
        assert check.details["in_progress"] == []
    text = both_copies(f"backup: {INCR}, status: valid", f"backup: {INCR}, status: in-progress")
    check = parse_pgbackrest_verify(text, 0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.PASSED, [])
    assert check.details["in_progress"] == [INCR] and check.details["notes"] == [f"backup {INCR}: {IN_PROGRESS}"]


def test_verify_rule_unknown_backup_status_is_an_error_not_a_pass():
    for status in ("quarantined", "Valid", "valid ", "manifest-missing"):
        text = both_copies(f"backup: {INCR}, status: valid", f"backup: {INCR}, status: {status}")
        check = parse_pgbackrest_verify(text, 0, "demo1")
        assert check.status is CheckStatus.ERROR, status
        assert check.findings == [f"unrecognised: backup {INCR}: status {status!r}, which pgBackRest 2.45 does not "
                                  "print"]


def test_verify_rule_several_non_zero_counts_are_said_together():
    check = parse_pgbackrest_verify(with_lines({18: [ZERO.replace("missing: 0", "missing: 1").replace(
        "other: 0", "other: 3")]}), 0, "demo1")
    assert check.findings == [f"backup {DIFF}: missing 1, other 3"]


def test_verify_rule_valid_backup_with_no_file_checked_fails():
    text = with_lines({19: [f"  backup: {INCR}, status: valid, total files checked: 0, total valid files: 0"], 20: []})
    check = parse_pgbackrest_verify(text, 0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.FAILED, [f"backup {INCR}: status valid but no file checked"])


def test_verify_rule_counts_line_missing_under_something_checked_is_an_error():
    check = parse_pgbackrest_verify(with_lines({18: []}), 0, "demo1")
    assert check.status is CheckStatus.ERROR
    assert check.findings == [f"unrecognised: backup {DIFF}: no missing/checksum/size/other counts under it"]
    one = with_lines({17: [f"  backup: {DIFF}, status: valid, total files checked: 1, total valid files: 1"], 18: []})
    assert parse_pgbackrest_verify(one, 0, "demo1").status is CheckStatus.ERROR
    # None is wanted under a backup that checked nothing (pgBackRest prints none).
    text = with_lines({19: [f"  backup: {INCR}, status: in-progress, total files checked: 0, total valid files: 0"],
                       20: []})
    assert parse_pgbackrest_verify(text, 0, "demo1").details["unrecognised"] == []


def test_verify_rule_counts_line_belongs_to_one_item_only():
    for changes in ({12: ["status: ok", ZERO]}, {16: [ZERO, ZERO]}):
        check = parse_pgbackrest_verify(with_lines(changes), 0, "demo1")
        assert (check.status, check.findings) == (CheckStatus.ERROR, [f"unrecognised: {ZERO.strip()}"]), changes


def test_verify_rule_an_item_listed_twice_is_an_error():
    for index in (13, 15):
        lines = baseline().splitlines()
        check = parse_pgbackrest_verify(with_lines({index + 1: [lines[index + 1], lines[index], lines[index + 1]]}),
                                        0, "demo1")
        assert check.status is CheckStatus.ERROR
        assert check.findings[0].endswith("listed twice")


def test_verify_rule_stanza_status_must_be_ok_in_both_copies():
    half = baseline().replace("status: ok", "status: maybe", 1)
    check = parse_pgbackrest_verify(half, 0, "demo1")
    assert check.status is CheckStatus.ERROR
    assert "unrecognised: stanza status 'maybe', which pgBackRest 2.45 does not print" in check.findings
    assert check.details["statuses"] == ["maybe", "ok"]
    check = parse_pgbackrest_verify(both_copies("status: ok", "status: maybe"), 0, "demo1")
    assert (check.status, check.summary) == (CheckStatus.ERROR, "pgbackrest verify gave no status ok (statuses: "
                                             "maybe, maybe)")
    lines = baseline().splitlines()
    no_status = "\n".join(lines[:2] + lines[3:12] + lines[13:]) + "\n"
    check = parse_pgbackrest_verify(no_status, 0, "demo1")
    assert (check.status, check.summary, check.details["statuses"]) == (
        CheckStatus.ERROR, "a summary without its status line", ["none", "none"])


def test_verify_rule_stanza_status_error_fails_even_without_a_reason():
    check = parse_pgbackrest_verify(both_copies("status: ok", "status: error"), 0, "demo1")
    assert (check.status, check.findings) == (
        CheckStatus.FAILED, ["stanza demo1: pgBackRest says status error and gives no reason restoreproof recognises"])


def test_verify_rule_the_summary_is_printed_twice_logged_and_on_stdout():
    lines = baseline().splitlines()
    only_logged = "\n".join(lines[:11] + lines[-1:]) + "\n"
    only_stdout = "\n".join(lines[:1] + lines[11:]) + "\n"
    three = "\n".join(lines[:-1] + lines[11:]) + "\n"
    for text in (only_logged, only_stdout, three):
        check = parse_pgbackrest_verify(text, 0, "demo1")
        assert check.status is CheckStatus.ERROR
        assert check.summary.startswith("the summary was printed ")
    assert parse_pgbackrest_verify(only_logged, 0, "demo1").summary == (
        "the summary was printed 1 time(s) (log); pgBackRest 2.45 prints it logged and on stdout")
    assert parse_pgbackrest_verify(three, 0, "demo1").summary == (
        "the summary was printed 3 time(s) (log, stdout, stdout); pgBackRest 2.45 prints it logged and on stdout")
    stdout_twice = "\n".join(lines[:1] + lines[11:-1] + lines[11:]) + "\n"
    assert parse_pgbackrest_verify(stdout_twice, 0, "demo1").status is CheckStatus.ERROR


def test_verify_rule_the_two_copies_must_say_the_same():
    logged_only = baseline().replace("total valid files: 977", "total valid files: 976", 1)
    lines = baseline().splitlines()
    lines[19] = lines[19].replace(INCR, "20261124-020904F_20261124-020999I")
    for text in (logged_only, "\n".join(lines) + "\n"):
        check = parse_pgbackrest_verify(text, 0, "demo1")
        assert check.status is not CheckStatus.PASSED
        assert "the logged summary and the one on stdout differ" in check.findings
    stdout_only = with_lines({20: [ZERO.replace("other: 0", "other: 1")]}).replace(" " * 36 + ZERO.replace(
        "other: 0", "other: 1"), " " * 36 + ZERO)
    check = parse_pgbackrest_verify(stdout_only, 0, "demo1")
    assert check.findings == [f"backup {INCR}: other 1", "the logged summary and the one on stdout differ"]


def test_verify_rule_the_summary_is_for_the_expected_stanza():
    check = parse_pgbackrest_verify(baseline(), 0, "demo2")
    assert (check.status, check.summary) == (CheckStatus.ERROR,
                                             "pgbackrest verify reported on stanza demo1, not demo2")
    no_stanza = baseline().replace("INFO: stanza: demo1", "INFO: status: ok", 1)
    assert parse_pgbackrest_verify(no_stanza, 0, "demo1").status is CheckStatus.ERROR


def test_verify_rule_pgbackrest_245_begun_and_ended_successfully():
    text = baseline()
    newer = text.replace("verify command begin 2.45:", "verify command begin 2.54.2:")
    check = parse_pgbackrest_verify(newer, 0, "demo1")
    assert (check.status, check.summary) == (
        CheckStatus.ERROR, f"pgBackRest version 2.54.2: restoreproof reads the verify output of pgBackRest {VERSIONS} "
        "only (verify command begin)")
    no_begin = "\n".join(text.splitlines()[1:]) + "\n"
    assert parse_pgbackrest_verify(no_begin, 0, "demo1").summary == (
        f"pgBackRest version none: restoreproof reads the verify output of pgBackRest {VERSIONS} only (verify "
        "command begin)")
    no_end = "\n".join(text.splitlines()[:-1]) + "\n"
    check = parse_pgbackrest_verify(no_end, 0, "demo1")
    assert (check.status, check.summary) == (CheckStatus.ERROR,
                                             "the command did not end successfully (no verify command end)")
    aborted = text.replace("completed successfully (618ms)", "aborted with exception [029]")
    assert parse_pgbackrest_verify(aborted, 0, "demo1").summary == (
        "the command did not end successfully (verify command end: aborted with exception [029])")
    twice = text + text.splitlines()[-1] + "\n"
    assert parse_pgbackrest_verify(twice, 0, "demo1").summary == (
        "the command did not end successfully (verify command end: completed successfully (618ms); "
        "verify command end: completed successfully (618ms))")
    begun_twice = text.splitlines()[0] + "\n" + text
    assert parse_pgbackrest_verify(begun_twice, 0, "demo1").summary == (
        f"pgBackRest version 2.45, 2.45: restoreproof reads the verify output of pgBackRest {VERSIONS} only (verify "
        "command begin)")
    untimed = text.replace(" (618ms)", "")
    assert parse_pgbackrest_verify(untimed, 0, "demo1").status is CheckStatus.PASSED


def test_verify_rule_a_non_zero_exit_is_never_a_pass():
    check = parse_pgbackrest_verify(baseline(), 1, "demo1")
    assert (check.status, check.summary) == (CheckStatus.ERROR, "pgbackrest verify could not run (exit 1)")
    assert check.findings == ["pgbackrest verify exited 1"]


def test_verify_rule_nothing_verified_is_an_error():
    text = with_lines({13: ["  archiveId: none found"], 14: [], 15: ["  backup: none found"], 16: [], 17: [],
                       18: [], 19: [], 20: []})
    check = parse_pgbackrest_verify(text, 0, "demo1")
    assert (check.status, check.summary, check.findings) == (
        CheckStatus.ERROR, "pgbackrest verify verified no backup", ["stanza demo1: backup: none found"])


def test_verify_backups_without_any_wal_archive_pass_and_say_so():
    check = parse_pgbackrest_verify(with_lines({13: ["  archiveId: none found"], 14: []}), 0, "demo1")
    assert (check.status, check.summary) == (CheckStatus.PASSED, "3 backups and no WAL archive valid")
    assert check.details["archives"] == {}


def test_verify_warnings_each_handled():
    # The only WARN verify has: a WAL file gone when read, counted by restoreproof as a failure.
    for line in (f"WARN: file missing '{WAL_08}'", f"{STAMP}  WARN: file missing '{WAL_08}'"):
        check = parse_pgbackrest_verify(baseline() + line + "\n", 0, "demo1")
        assert (check.status, check.findings) == (CheckStatus.FAILED, [f"file missing: archive/demo1/{WAL_08}"])
    # pgBackRest's warnings about its own settings: the verdict cannot be taken.
    for warning in ("environment contains invalid negate option 'no-x'", "environment contains invalid reset "
                    "option 'reset-x'", "configuration file contains invalid option 'x'",
                    "configuration file contains negate option 'no-x'", "configuration file contains reset option "
                    "'reset-x'", "configuration file contains command-line only option 'stanza'",
                    "configuration file contains option 'x' invalid for section 'global:backup'",
                    "configuration file contains stanza-only option 'pg1-path' in global section 'global'"):
        check = parse_pgbackrest_verify(baseline() + f"WARN: {warning}\n", 0, "demo1")
        assert (check.status, check.findings) == (CheckStatus.ERROR, [f"pgBackRest configuration: {warning}"])
    # Any other warning is an error, quoted.
    for line in ("WARN: something new happened", f"{STAMP}  WARN: backup '{FULL}' found in backup.info but not in "
                 "the repository", "WARN: configuration file contains invalid option 'x'\n      HINT: more"):
        check = parse_pgbackrest_verify(baseline() + line + "\n", 0, "demo1")
        assert check.status is CheckStatus.ERROR, line
        assert check.findings[0].startswith("unrecognised: WARN: "), line


def test_verify_errors_of_pgbackrest_itself():
    for level in ("ERROR", "ASSERT"):
        check = parse_pgbackrest_verify(baseline() + f"{level}: [082]: lock timeout\n", 0, "demo1")
        assert (check.status, check.findings) == (CheckStatus.ERROR, [f"{level}: [082]: lock timeout"])
        check = parse_pgbackrest_verify(baseline() + f"{STAMP} {level}: [082]: lock timeout\n", 0, "demo1")
        assert check.status is CheckStatus.ERROR
    multi = parse_pgbackrest_verify(baseline() + "ERROR: [029]: bad\n       second line\n", 0, "demo1")
    assert multi.findings == ["ERROR: [029]: bad\nsecond line"]


def test_verify_info_notes_each_handled():
    for note in ("archiveIds '14-2, 15-3' are not in the archive.info history list",
                 "duplicate WAL '000000010000000000000005' for '15-1' exists, skipping",
                 f"backup '{DIFF}' manifest does not contain any target files to verify",
                 f"'{DIFF}' may not be recoverable - PG data (id 1, version 15, system-id 7711554340276889858) is not "
                 "in the backup.info history, skipping"):
        check = parse_pgbackrest_verify(baseline() + f"{STAMP}  INFO: {note}\n", 0, "demo1")
        assert (check.status, check.findings) == (CheckStatus.FAILED, [note])
    # A backup said in progress but not in the summary is still named, as a note.
    check = parse_pgbackrest_verify(baseline() + f"{STAMP}  INFO: backup 'L1' appears to be in progress, skipping\n",
                                    0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.PASSED, [])
    assert check.details["in_progress"] == ["L1"] and check.details["notes"] == [f"backup L1: {IN_PROGRESS}"]
    # Every file result pgBackRest 2.45 can log names the file in the repository.
    for what, path, said in (("invalid size", f"{FULL}/pg_data/PG_VERSION.gz", f"backup/demo1/{FULL}/pg_data/"
                              "PG_VERSION.gz"), ("invalid result", WAL_05, f"archive/demo1/{WAL_05}"),
                             ("invalid checksum", "9.6-1/0000000100000000/000000010000000000000001-ab.gz",
                              "archive/demo1/9.6-1/0000000100000000/000000010000000000000001-ab.gz")):
        check = parse_pgbackrest_verify(baseline() + f"{STAMP.replace('P00', 'P01')}  INFO: {what} '{path}'\n", 0,
                                        "demo1")
        assert (check.status, check.findings) == (CheckStatus.FAILED, [f"{what}: {said}"])


def test_verify_lines_nobody_knows_are_errors():
    cases = (
        f"{STAMP}  INFO: something new\n",
        f"{STAMP}  INFO: backup 'L1' appears to be in progress, skipping\n" + " " * 36 + "and then some\n",
        f"{STAMP}  INFO: invalid result {WAL_05}: [29] eof\n" + " " * 36 + "[FormatError] on retry after 0ms\n"
        + " " * 36 + "not a retry\n",
        "  something else entirely\n",
        "HINT: this may be a symptom of repository corruption!\n",
    )
    said = ("INFO: something new", "INFO: and then some", "INFO: not a retry", "something else entirely",
            "HINT: this may be a symptom of repository corruption!")
    for extra, line in zip(cases, said, strict=True):
        check = parse_pgbackrest_verify(baseline() + extra, 0, "demo1")
        assert check.status is not CheckStatus.PASSED, extra
        assert f"unrecognised: {line}" in check.findings, extra
    # Lines indented under a file result are not pgBackRest's: said.
    check = parse_pgbackrest_verify(baseline() + f"{STAMP}  INFO: file missing '{WAL_05}'\n" + " " * 36 + "why\n",
                                    0, "demo1")
    assert check.findings == [f"file missing: archive/demo1/{WAL_05}", "unrecognised: INFO: why"]
    # The lines that follow the mismatch message are known only after it.
    text = with_lines({12: ["status: error", "archive: id = 1, version = 15, system-id = 1"]})
    check = parse_pgbackrest_verify(text, 0, "demo1")
    assert "unrecognised: archive: id = 1, version = 15, system-id = 1" in check.findings
    check = parse_pgbackrest_verify(baseline() + cases[0], 0, "demo1")
    assert (check.status, check.findings) == (CheckStatus.ERROR, ["unrecognised: INFO: something new"])
    assert check.summary == "pgbackrest verify printed 1 line(s) restoreproof does not recognise"
    # An unknown line inside the summary, in both copies.
    text = both_copies(f"backup: {INCR}, status: valid", f"mystery\n  backup: {INCR}, status: valid")
    assert parse_pgbackrest_verify(text, 0, "demo1").status is CheckStatus.ERROR


def test_verify_detail_debug_and_trace_lines_and_blank_lines_change_nothing():
    for level in ("DETAIL", "DEBUG", "TRACE"):
        text = baseline() + f"{STAMP}{level}: archive path '15-1' is empty\n"
        assert parse_pgbackrest_verify(text, 0, "demo1").status is CheckStatus.PASSED
    lines = baseline().splitlines()
    gapped = "\n".join([*lines[:3], "", *lines[3:14], "", *lines[14:]]) + "\n"
    assert parse_pgbackrest_verify(gapped, 0, "demo1").details == parse_pgbackrest_verify(baseline(), 0,
                                                                                          "demo1").details


def test_verify_is_a_check_of_the_backup_files_whatever_it_found():
    # It reads the repository, not the restored cluster: it may fail a database, never stand in for
    # pg_amcheck or pg_checksums in a "passed" (verdict.decide counts only checks of the restored data).
    from verification.model import CheckKind

    found = {name: verify(name) for name in ("baseline", "backup-byte-flipped", "manifest-copy-only")}
    assert {name: (check.status, check.kind) for name, check in found.items()} == {
        "baseline": (CheckStatus.PASSED, CheckKind.BACKUP_FILES),
        "backup-byte-flipped": (CheckStatus.FAILED, CheckKind.BACKUP_FILES),
        "manifest-copy-only": (CheckStatus.PASSED, CheckKind.BACKUP_FILES)}
    assert parse_pgbackrest_verify("", 1, "demo1").kind is CheckKind.BACKUP_FILES  # an error too


def test_verify_a_file_the_storage_would_not_serve_is_an_error_not_a_bad_file():
    # The recorded truncated segment, as pgBackRest prints a job whose S3 request was refused: the file
    # was never read, so nothing is said about it; the other files' counts still are.
    text = fixture_text("pgbackrest-verify-wal-segment-truncated.out").replace(
        "[29] raised from local-1 protocol: unexpected eof in compressed data",
        "[39] raised from local-1 shim protocol: HTTP request failed with 403 (Forbidden):").replace(
        "[FormatError] on retry", "[ProtocolError] on retry")
    check = parse_pgbackrest_verify(text, 0, "demo1")
    assert check.status is CheckStatus.ERROR
    assert check.summary == (f"pgbackrest verify could not read archive/demo1/{WAL_05}: [039] ProtocolError: raised "
                             "from local-1 shim protocol: HTTP request failed with 403 (Forbidden)")
    assert check.details["invalid_files"] == [] and check.details["unrecognised"] == []
    # A file really bad beside it still fails the repository.
    text = text.replace("total valid files: 977\n", "total valid files: 976\n")
    assert parse_pgbackrest_verify(text, 0, "demo1").status is CheckStatus.FAILED


def test_a_verify_of_a_staged_copy_says_it_covered_the_staged_chain_only():
    from verification.engines.postgres.verify_output import scoped_to_staged_chain

    staged = "1028 objects staged from s3://backups/pg"
    check = scoped_to_staged_chain(verify("baseline"), [FULL, DIFF, INCR],
                                   ("000000010000000000000005", "000000010000000000000008"), staged)
    assert check.status is CheckStatus.PASSED
    assert check.summary == (f"3 backups and 1 WAL archive(s) valid; in the staged chain only (backup sets {FULL}, "
                             f"{DIFF}, {INCR}, WAL 000000010000000000000005 to 000000010000000000000008: {staged}), "
                             "not the whole repository: its other backups and WAL were not staged, so not verified")
    assert check.details["scope"] == {"staged_chain": True, "backups": [FULL, DIFF, INCR],
                                      "wal": ["000000010000000000000005", "000000010000000000000008"],
                                      "staged": staged}
    # What it found is kept as it is: a failure on the staged copy is still a failure, scoped.
    failed = scoped_to_staged_chain(verify("backup-byte-flipped"), [FULL], None, staged)
    assert failed.status is CheckStatus.FAILED
    assert failed.summary.startswith("the repository has ")
    assert failed.summary.endswith(f"; in the staged chain only (backup set {FULL}, no WAL: {staged}), not the whole "
                                   "repository: its other backups and WAL were not staged, so not verified")


def test_verify_whose_program_never_started_is_an_error_saying_so():
    output = fixture_text("timeout-program-missing.out")
    check = parse_pgbackrest_verify(output, 127, "demo1")
    assert check.status is CheckStatus.ERROR
    assert check.summary == f"pgbackrest verify could not run: pgbackrest was not found in the target (exit 127: {output.strip()})"
