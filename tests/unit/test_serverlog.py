"""Recovery phases from real PostgreSQL 15.18 server logs."""

from datetime import UTC, datetime

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
