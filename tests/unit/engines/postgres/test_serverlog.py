"""Recovery phases from real PostgreSQL 15.18 server logs."""

from datetime import UTC, datetime

import pytest

from tests.conftest import fixture_text
from verification.engines.postgres.serverlog import parse_pg_timestamp, parse_server_log
from verification.engines.postgres.wal import parse_lsn


def test_latest_recovery_phases():
    log = parse_server_log(fixture_text("server-recovery-latest.log"))
    assert log.server_started == datetime(2026, 11, 22, 19, 51, 8, 145000, tzinfo=UTC)
    assert log.redo_started == datetime(2026, 11, 22, 19, 51, 8, 349000, tzinfo=UTC)
    assert log.redo_done == datetime(2026, 11, 22, 19, 51, 8, 623000, tzinfo=UTC)
    assert log.redo_elapsed_seconds == 0.27
    assert log.ready == datetime(2026, 11, 22, 19, 51, 8, 776000, tzinfo=UTC)
    assert log.redo_bytes == parse_lsn("0/A000088") - parse_lsn("0/8000028")
    assert log.last_transaction == datetime(2026, 11, 22, 19, 50, 45, 852562, tzinfo=UTC)
    assert log.achieved == log.last_transaction
    # Segment A is fetched twice: during redo, and again when the new timeline is chosen.
    assert log.segments_restored == ["000000010000000000000008", "000000010000000000000009",
                                     "00000001000000000000000A", "00000001000000000000000A"]
    assert log.errors == []


def test_point_in_time_recovery_reports_where_it_stopped():
    log = parse_server_log(fixture_text("server-recovery-pitr.log"))
    assert log.stopped_at == datetime(2026, 11, 22, 20, 2, 10, 37546, tzinfo=UTC)
    assert log.stop_detail.startswith("recovery stopping before commit of transaction 2740")
    assert log.last_transaction == datetime(2026, 11, 22, 20, 2, 8, 408012, tzinfo=UTC)
    assert log.ready is not None
    # Our readiness polling produces FATAL "not accepting connections" lines: not errors.
    assert "not accepting connections" in fixture_text("server-recovery-pitr.log")
    assert log.errors == []


def test_fatal_lines_are_kept_as_errors():
    text = ("2026-11-22 19:51:08.150 UTC [70] LOG:  starting PostgreSQL 15.18\n"
            "2026-11-22 19:51:09.000 UTC [70] FATAL:  recovery ended before configured recovery target was reached\n")
    log = parse_server_log(text)
    assert log.errors == ["FATAL: recovery ended before configured recovery target was reached"]
    assert log.ready is None


def test_timestamps_in_both_notations():
    assert parse_pg_timestamp("2026-11-22 19:50:45.852562+00") == datetime(2026, 11, 22, 19, 50, 45, 852562,
                                                                            tzinfo=UTC)
    assert parse_pg_timestamp("2026-11-22 19:51:08.145 UTC") == datetime(2026, 11, 22, 19, 51, 8, 145000, tzinfo=UTC)


def test_a_rejected_setting_is_named_not_only_the_file():
    log = parse_server_log(fixture_text("server-bad-setting.log"))
    assert log.errors == ['LOG: invalid value for parameter "shared_buffers": "not-a-size"',
                          'FATAL: configuration file "/var/lib/restoreproof/data/postgresql.auto.conf" contains errors']


def test_offsets_are_turned_to_utc_whatever_the_machine_zone(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    try:
        when = parse_pg_timestamp("2026-11-22 21:50:45.85+02")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert when.isoformat() == "2026-11-22T19:50:45.850000+00:00"


def _latest_with(extra: str, after: str = "database system is ready to accept connections") -> str:
    """The real latest-recovery log with lines inserted after the first line containing `after`."""
    lines = fixture_text("server-recovery-latest.log").splitlines()
    at = next(i for i, line in enumerate(lines) if after in line) + 1
    return "\n".join([*lines[:at], *extra.splitlines(), *lines[at:]]) + "\n"


def test_each_level_counts_where_it_should():
    text = _latest_with("2026-11-22 19:51:09.000 UTC [70] ERROR:  relation \"x\" does not exist\n"
                        "2026-11-22 19:51:09.100 UTC [70] PANIC:  could not write to file \"pg_wal/xlogtemp.70\"")
    # An ERROR after the server is up is a client's statement, not recovery's; a PANIC always counts.
    assert parse_server_log(text).errors == ['PANIC: could not write to file "pg_wal/xlogtemp.70"']
    before = _latest_with("2026-11-22 19:51:08.500 UTC [70] ERROR:  could not open file \"x\"", after="redo starts")
    assert parse_server_log(before).errors == ['ERROR: could not open file "x"']
    warning = _latest_with("2026-11-22 19:51:08.500 UTC [70] WARNING:  invalid record length at 0/9000060: wanted "
                           "24, got 0", after="redo starts")
    assert parse_server_log(warning).early_end == ["WARNING: invalid record length at 0/9000060: wanted 24, got 0"]


def test_a_line_in_another_zone_has_no_time_rather_than_a_wrong_one():
    text = fixture_text("server-recovery-latest.log").replace(
        "UTC [", "CET [").replace("19:51:08.776 CET", "20:51:08.776 CET")
    log = parse_server_log(text)
    assert (log.server_started, log.redo_done, log.ready) == (None, None, None)
    assert log.redo_done_lsn == parse_lsn("0/A000088")


def test_redo_not_required_and_redo_done_without_usage():
    text = ("2026-11-22 19:51:08.150 UTC [70] LOG:  redo is not required\n"
            "2026-11-22 19:51:08.160 UTC [70] LOG:  redo done at 0/A000088\n")
    log = parse_server_log(text)
    assert (log.redo_not_required, log.redo_done_lsn, log.redo_elapsed_seconds) == (True, 0xA000088, None)
    assert parse_server_log(fixture_text("server-recovery-latest.log")).redo_not_required is False


def test_only_indented_lines_right_after_a_pgbackrest_error_continue_it():
    text = ("    an indented line before any error\n"
            "ERROR: [042]: unable to get 00000001000000000000000D:\n"
            "            repo1: file missing\n"
            "\t[RepoFileMissing]\n"
            "a line of something else\n"
            "            not a continuation\n"
            "2026-11-22 19:51:08.150 UTC [70] LOG:  starting PostgreSQL 15.18\n"
            "            nor this one\n")
    assert parse_server_log(text).archive_get_errors == [
        "pgBackRest archive-get ERROR: [042]: unable to get 00000001000000000000000D: repo1: file missing "
        "[RepoFileMissing]"]


def test_a_server_that_could_not_start_from_the_backups_says_which_fault():
    # Real PostgreSQL 15.18 logs (scripts/capture-postgres-start-fixtures.sh): the checkpoint's
    # segment, then the backup's last segment, removed from the archive.
    missing = parse_server_log(fixture_text("server-start-checkpoint-missing.log"))
    assert missing.backup_faults == ["FATAL: could not locate required checkpoint record"]
    assert missing.errors == missing.backup_faults
    end = parse_server_log(fixture_text("server-start-backup-end-missing.log"))
    assert end.backup_faults == ["FATAL: WAL ends before end of online backup"]


def test_a_server_that_could_not_start_for_another_reason_names_no_backup_fault():
    log = parse_server_log(fixture_text("server-start-missing-library.log"))
    assert log.errors == ['FATAL: could not access file "restoreproof_absent": No such file or directory']
    assert log.backup_faults == []


@pytest.mark.parametrize("message", [
    # Each as PostgreSQL 15.18 words it (the format strings in its binary, filled in).
    "could not locate required checkpoint record",
    "could not locate a valid checkpoint record",
    "could not find redo location 0/6000150 referenced by checkpoint record at 0/603D1F8",
    "could not find redo location referenced by checkpoint record",
    "invalid checkpoint link in backup_label file",
    "backup_label contains data inconsistent with control file",
    "incorrect checksum in control file",
    "control file contains invalid checkpoint location",
    "control file contains invalid database cluster state",
    "WAL ends before end of online backup",
    "WAL ends before consistent recovery point",
    "requested timeline 2 is not a child of this server's history",
    "requested timeline 2 is not in this server's history",
    "requested timeline 2 does not contain minimum recovery point 0/A000088 on timeline 1",
    "unexpected timeline ID 3 (should be 2) in checkpoint record",
    "unexpected previous timeline ID 1 (current timeline ID 3) in checkpoint record",
])
def test_each_backup_fault_is_recognised_at_fatal_and_panic_only(message: str) -> None:
    lines = [f"2026-11-24 19:05:27.587 UTC [18878] {level}:  {message}" for level in ("LOG", "FATAL", "PANIC")]
    assert parse_server_log("\n".join(lines) + "\n").backup_faults == [f"FATAL: {message}", f"PANIC: {message}"]
    # Only a message that begins with the words: another message that merely contains them is not one.
    assert parse_server_log(f"2026-11-24 19:05:27.587 UTC [1] FATAL:  x{message}\n").backup_faults == []


def test_a_process_killed_before_the_server_was_ready_is_among_the_errors():
    # PostgreSQL 15.18's own lines when the kernel's OOM killer took its startup process (a target with
    # 32 MiB): the postmaster's LOG line is the only word the server has for it.
    text = ("2026-11-25 07:21:25.130 UTC [83] LOG:  consistent recovery state reached at 0/C000138\n"
            "2026-11-25 07:21:27.277 UTC [80] LOG:  startup process (PID 83) was terminated by signal 9: Killed\n"
            "2026-11-25 07:21:27.284 UTC [80] LOG:  shutting down due to startup process failure\n")
    log = parse_server_log(text)
    assert log.errors == ["LOG: startup process (PID 83) was terminated by signal 9: Killed"]
    assert (log.backup_faults, log.early_end) == ([], [])
    # Once the server was ready, a backend killed later is the checks' to say, not the start's.
    later = parse_server_log("2026-11-25 07:21:25.181 UTC [81] LOG:  database system is ready to accept connections\n"
                             "2026-11-25 07:21:40.000 UTC [81] LOG:  server process (PID 99) was terminated by "
                             "signal 9: Killed\n")
    assert later.errors == []


def test_the_startup_process_words_since_its_last_segment_before_redo_done():
    # Only the process that redoes (pid of "redo starts at"), after its last "restored log file", before
    # "redo done": the polling's FATAL lines (other pids) and what follows the end of redo are left out.
    assert parse_server_log(fixture_text("server-recovery-zeroed-segment.log")).before_redo_done == [
        "LOG: completed backup recovery with redo LSN 0/C000028 and end LSN 0/C000100",
        "LOG: consistent recovery state reached at 0/C000100",
        "LOG: invalid magic number 0000 in log segment 00000001000000000000000D, offset 0"]
    assert parse_server_log(fixture_text("server-recovery-pitr.log")).before_redo_done[-1] == (
        "LOG: recovery stopping before commit of transaction 2740, time 2026-11-22 20:02:10.037546+00")
    text = fixture_text("server-recovery-latest.log")
    assert parse_server_log(text.replace("[70] LOG:  consistent", "[71] LOG:  consistent")).before_redo_done == [
        "LOG: completed backup recovery with redo LSN 0/8000028 and end LSN 0/8000100"]
    # Nothing before redo starts counts: the process is not known to be the one that redoes.
    assert parse_server_log(text.replace("LOG:  redo starts at", "LOG:  redo begins at")).before_redo_done == []
    lines = text.splitlines()
    after_restore = next(i for i, line in enumerate(lines) if '"00000001000000000000000A"' in line)
    lines.insert(after_restore, lines[after_restore].replace("restored log file", "WARNING:  earlier words")
                 .replace("LOG:  WARNING:", "WARNING:"))
    assert parse_server_log("\n".join(lines)).before_redo_done[0] == "LOG: completed backup recovery with redo LSN " \
                                                                     "0/8000028 and end LSN 0/8000100"
