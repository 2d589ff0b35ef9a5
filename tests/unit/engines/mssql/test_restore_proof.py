"""The point a SQL Server restore reached, proven from msdb rows as sqlcmd returns them."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan
from verification.engines.mssql.restore_proof import last_restore_query, prove_point
from verification.sources import LocalSource


@pytest.fixture
def rtc(mssql_corpus):  # type: ignore[no-untyped-def]
    (db,) = scan(LocalSource(mssql_corpus / "RestoreTimeClean")).databases
    return db


def row(last_lsn: str | None, stop_at: str | None = None, finish: str | None = "2017-06-01T13:29:13") -> dict:  # type: ignore[type-arg]
    return {"restore_history_id": "5", "first_lsn": "25000000021000001", "last_lsn": last_lsn, "stop_at": stop_at,
            "backup_finish_date": finish, "backup_type": "L"}


def test_the_query_reads_the_newest_restore_of_that_database_only():
    # Word for word: msdb's names are lower case, and a server with a case-sensitive collation
    # resolves them only as written; the column aliases are the keys prove_point reads.
    assert last_restore_query("O'Brien") == (
        "SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id, CONVERT(varchar(40), bs.first_lsn) AS first_lsn, "
        "CONVERT(varchar(40), bs.last_lsn) AS last_lsn, CONVERT(varchar(23), rh.stop_at, 126) AS stop_at, "
        "CONVERT(varchar(23), bs.backup_finish_date, 126) AS backup_finish_date, bs.type AS backup_type "
        "FROM msdb.dbo.restorehistory AS rh JOIN msdb.dbo.backupset AS bs ON bs.backup_set_id = rh.backup_set_id "
        "WHERE rh.destination_database_name = N'O''Brien' ORDER BY rh.restore_history_id DESC;")


def test_times_without_a_zone_are_utc_whatever_the_machine_zone(rtc, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        naive = prove_point(plan(rtc, "RestoreTimeClean", None), [row("25000000022000001")])
        zoned = prove_point(plan(rtc, "RestoreTimeClean", None),
                            [row("25000000022000001", finish="2017-06-01T15:29:13+02:00")])
    finally:
        monkeypatch.undo()
        time.tzset()
    assert naive.achieved == zoned.achieved == datetime(2017, 6, 1, 13, 29, 13, tzinfo=UTC)
    assert "(finished 2017-06-01T13:29:13+00:00)" in zoned.proofs[0]


def test_a_plan_without_backups_has_nothing_to_prove(rtc):  # type: ignore[no-untyped-def]
    empty = plan(rtc, "RestoreTimeClean", datetime(2017, 1, 1, tzinfo=UTC))
    assert empty.chain.backups == []
    proof = prove_point(empty, [row("25000000022000001")])
    assert proof.errors == [f"the server's restore history cannot be read (row: {row('25000000022000001')}): the "
                            "point reached is unproven"]


def test_latest_proven(rtc):  # type: ignore[no-untyped-def]
    proof = prove_point(plan(rtc, "RestoreTimeClean", None), [row("25000000022000001")])
    assert (proof.failures, proof.errors) == ([], [])
    assert proof.proofs == ["msdb restorehistory/backupset: the last backup restored ended at LSN 25000000022000001 "
                            "(finished 2017-06-01T13:29:13+00:00), the planned chain's last LastLSN "
                            "(RestoreTimeClean2_3.trn)"]
    assert proof.achieved == datetime(2017, 6, 1, 13, 29, 13, tzinfo=UTC)
    assert proof.detail == "the end of the last backup restored, as msdb records it"


def test_an_unknown_finish_time_is_said_and_not_invented(rtc):  # type: ignore[no-untyped-def]
    proof = prove_point(plan(rtc, "RestoreTimeClean", None), [row("25000000022000001", finish=None)])
    assert proof.achieved is None
    assert "(finished at an unknown time)" in proof.proofs[0]


def test_a_shorter_restore_fails_with_both_lsns(rtc):  # type: ignore[no-untyped-def]
    proof = prove_point(plan(rtc, "RestoreTimeClean", None), [row("25000000021000001")])
    assert proof.proofs == [] and proof.achieved is None
    assert proof.failures == ["the server restored up to LSN 25000000021000001, not to the planned chain's end: "
                              "RestoreTimeClean2_3.trn ends at LastLSN 25000000022000001 (msdb restorehistory/"
                              "backupset: the last backup restored ended at LSN 25000000021000001 (finished "
                              "2017-06-01T13:29:13+00:00))"]


@pytest.mark.parametrize("rows", [[row(None)], [row("not-a-number")], [{}]])
def test_an_unreadable_row_is_an_error(rtc, rows):  # type: ignore[no-untyped-def]
    proof = prove_point(plan(rtc, "RestoreTimeClean", None), rows)
    assert proof.proofs == [] and proof.failures == []
    assert proof.errors[0].startswith("the server's restore history cannot be read (row: ")


# What RESTORE LOG ... STOPAT prints (sqlcmd -W): severity-10 messages as plain lines. The 4322 text is SQL
# Server's, word for word (message catalog, "Database engine events and errors 4000 to 4999").
STOPPED_INSIDE = "100 percent processed.\nRESTORE LOG successfully processed 38 pages in 0.003 seconds (97.656 MB/sec).\n"
MSG_4322 = ("This backup set contains records that were logged before the designated point in time. The database is "
            "being left in the restoring state so that more roll forward can be performed.")
ENDED_BEFORE = ("100 percent processed.\nProcessed 0 pages for database 'RestoreTimeClean', file 'RestoreTimeClean' on "
                f"file 1.\n{MSG_4322}\nRESTORE LOG successfully processed 38 pages in 0.003 seconds (97.656 MB/sec).\n")
AT = datetime(2017, 6, 1, 13, 22, 0, 123000, tzinfo=UTC)


def test_stopat_must_match_to_the_millisecond(rtc):  # type: ignore[no-untyped-def]
    at = AT
    pitr = plan(rtc, "RestoreTimeClean", at)
    good = prove_point(pitr, [row("25000000021000001", "2017-06-01T13:22:00.123")], STOPPED_INSIDE)
    assert good.achieved == at and (good.failures, good.errors) == ([], [])
    assert good.detail == ("the requested point, confirmed by a successful RESTORE LOG ... STOPAT on the terminal log "
                           "without SQL Server's message 4322")
    assert good.proofs == ["the requested point 2017-06-01T13:22:00.123000+00:00, confirmed by a successful RESTORE "
                           "LOG ... WITH STOPAT on RestoreTimeClean2_2.trn (RESTORE LOG successfully processed) without "
                           "SQL Server's message 4322 (the log ends before the point); msdb restorehistory/backupset: "
                           "the last backup restored ended at LSN 25000000021000001 (finished "
                           "2017-06-01T13:29:13+00:00), the planned terminal log's LastLSN; msdb's stop_at "
                           "2017-06-01T13:22:00.123 is that STOPAT as sent, not a measure of the point reached"]
    # datetime's 1/300 s steps: 4 ms either way is the same point, a hair more is not.
    assert prove_point(pitr, [row("25000000021000001", "2017-06-01T13:22:00.127")], STOPPED_INSIDE).proofs
    assert prove_point(pitr, [row("25000000021000001", "2017-06-01T13:22:00.119")], STOPPED_INSIDE).proofs
    assert prove_point(pitr, [row("25000000021000001", "2017-06-01T13:22:00.128")], STOPPED_INSIDE).failures
    off = prove_point(pitr, [row("25000000021000001", "2017-06-01T13:22:00.133")], STOPPED_INSIDE)
    assert off.failures == ["the server's last restore stopped at 2017-06-01T13:22:00.133, not at the planned "
                            "2017-06-01T13:22:00.123000+00:00 (msdb restorehistory/backupset: the last backup "
                            "restored ended at LSN 25000000021000001 (finished 2017-06-01T13:29:13+00:00))"]


NOT_REACHED = ("SQL Server did not reach 2017-06-01T13:22:00.123000+00:00: RestoreTimeClean2_2.trn ends before it, and "
               "recovery would stop at its end: the point in time is not in this log backup: its records all precede "
               "the point, so the restore cannot stop there (SQL Server error 4322: " + MSG_4322 + ")")


@pytest.mark.parametrize("said", [
    ENDED_BEFORE,
    # The same message raised with sqlcmd's error header (as -m-1 prints severity-10 messages).
    f"Msg 4322, Level 10, State 1, Server restoreproof, Line 1\n{MSG_4322}\n{STOPPED_INSIDE}",
])
def test_the_servers_4322_fails_the_point_whatever_msdb_echoes(rtc, said):  # type: ignore[no-untyped-def]
    # msdb's stop_at is the STOPAT sent: it matches to the millisecond even though the point was never reached.
    proof = prove_point(plan(rtc, "RestoreTimeClean", AT), [row("25000000021000001", "2017-06-01T13:22:00.123")], said)
    assert (proof.failures, proof.errors, proof.proofs, proof.achieved) == ([NOT_REACHED], [], [], None)


def test_a_terminal_log_right_after_the_differential_is_held_to_the_same_proof(rtc):  # type: ignore[no-untyped-def]
    # Full, differential, then RestoreTimeClean2_1.trn as the terminal log: only the last backup decides.
    pitr = plan(rtc, "RestoreTimeClean", datetime(2017, 6, 1, 13, 16, tzinfo=UTC))
    assert [b.type for b in pitr.chain.backups] == ["full", "diff", "log"]
    proof = prove_point(pitr, [row("25000000020000001", "2017-06-01T13:16:00")], ENDED_BEFORE)
    assert proof.failures == [NOT_REACHED.replace("13:22:00.123000", "13:16:00").replace("2_2", "2_1")]


def test_the_servers_4322_decides_even_without_restore_history(rtc):  # type: ignore[no-untyped-def]
    proof = prove_point(plan(rtc, "RestoreTimeClean", AT), [], ENDED_BEFORE)
    assert (proof.failures, proof.errors) == ([NOT_REACHED], [])


def test_a_point_without_the_terminal_logs_messages_is_unproven(rtc):  # type: ignore[no-untyped-def]
    proof = prove_point(plan(rtc, "RestoreTimeClean", AT), [row("25000000021000001", "2017-06-01T13:22:00.123")])
    assert (proof.failures, proof.proofs, proof.achieved) == ([], [], None)
    assert proof.errors == ["the messages of RESTORE LOG ... STOPAT on RestoreTimeClean2_2.trn were not kept: the point "
                            "reached is unproven"]


@pytest.mark.parametrize("said", [
    "",
    "100 percent processed.\n",
    # A data backup's completion is not the log's.
    "RESTORE DATABASE successfully processed 38 pages in 0.003 seconds (97.656 MB/sec).\n",
])
def test_a_terminal_log_that_never_said_it_succeeded_is_unproven(rtc, said):  # type: ignore[no-untyped-def]
    proof = prove_point(plan(rtc, "RestoreTimeClean", AT), [row("25000000021000001", "2017-06-01T13:22:00.123")], said)
    assert (proof.failures, proof.proofs, proof.achieved) == ([], [], None)
    assert proof.errors == ["RESTORE LOG ... STOPAT on RestoreTimeClean2_2.trn printed no 'RESTORE LOG successfully "
                            f"processed': the point reached is unproven ({said.strip()})"]


def test_a_long_terminal_output_is_quoted_by_its_last_300_characters(rtc):  # type: ignore[no-untyped-def]
    said = "a" * 100 + "b" * 300
    proof = prove_point(plan(rtc, "RestoreTimeClean", AT), [], said)
    assert proof.errors == ["RESTORE LOG ... STOPAT on RestoreTimeClean2_2.trn printed no 'RESTORE LOG successfully "
                            f"processed': the point reached is unproven ({'b' * 300})"]


def test_a_target_at_a_data_backups_end_needs_no_stopat_messages(rtc):  # type: ignore[no-untyped-def]
    # The differential ends at 13:14:13: the target is its end, no log is restored and no STOPAT sent.
    at_diff = plan(rtc, "RestoreTimeClean", datetime(2017, 6, 1, 13, 14, 13, tzinfo=UTC))
    assert at_diff.chain.backups[-1].type == "diff" and at_diff.stop_at is not None
    diff_row = {**row("25000000019000001", finish="2017-06-01T13:14:13"), "backup_type": "I"}
    proof = prove_point(at_diff, [diff_row])
    assert (proof.failures, proof.errors) == ([], [])
    assert proof.achieved == datetime(2017, 6, 1, 13, 14, 13, tzinfo=UTC)
    assert proof.detail == "the end of the last backup restored, as msdb records it"
