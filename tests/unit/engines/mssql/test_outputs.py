"""SQL Server's outputs, as captured in docs (SQL Server reference) and real runs, parsed."""

from datetime import datetime

import pytest

from verification.engines.mssql.outputs import (
    BACKUP_FAULTS,
    ERROR_MEANINGS,
    SEPARATOR,
    SqlError,
    parse_checkdb_rows,
    parse_restore_messages,
    parse_restore_steps,
    parse_result_sets,
    parse_sql_errors,
    stopat_not_reached,
)

# Real SQL Server 2022 capture (reference, section 3).
RESTORE_2022 = """10 percent processed.
21 percent processed.
100 percent processed.
Processed 536 pages for database 'ExamplesDB_BackupRestore', file 'ExamplesDB_BackupRestore' on file 1.
Processed 2 pages for database 'ExamplesDB_BackupRestore', file 'ExamplesDB_BackupRestore_log' on file 1.
RESTORE DATABASE successfully processed 538 pages in 0.032 seconds (131.225 MB/sec).
RESTORE LOG successfully processed 38 pages in 0.003 seconds (97.656 MB/sec).
"""

# Captured error-log lines with trace flags 3004 and 3605 (reference, section 4); the reference elides
# the timestamps of the lines between its first and its waiting/zeroing ones, filled in here in order.
ERRORLOG_2013 = r"""2013-07-02 16:48:52.280 spid53 RestoreDatabase: Database AdventureWorks
2013-07-02 16:48:52.281 spid53 Restore: Planning begins
2013-07-02 16:48:52.300 spid53 Restore: Planning complete
2013-07-02 16:48:52.301 spid53 Restore: BeginRestore (offline) on AdventureWorks
2013-07-02 16:48:52.310 spid53 Restore: PreparingContainers
2013-07-02 16:48:52.320 spid53 Zeroing C:\Data\AdventureWorks2012_log.ldf from page 1 to 64000 (0x2000 to 0x1f400000)
2013-07-02 16:48:52.330 spid53 Restore: Containers are ready
2013-07-02 16:48:52.340 spid53 Restore: Restoring backup set
2013-07-02 16:48:52.350 spid53 Restore: Transferring data to AdventureWorks
2013-07-02 16:49:01.640 spid53 Restore: Waiting for log zero on AdventureWorks
2013-07-02 16:49:11.160 spid53 Zeroing completed on C:\Data\AdventureWorks2012_log.ldf
2013-07-02 16:49:11.170 spid53 Restore: LogZero complete
2013-07-02 16:49:11.200 spid53 Restore: Data transfer complete on AdventureWorks
2013-07-02 16:49:11.300 spid53 Restore: Backup set restored
2013-07-02 16:49:13.000 spid53 Recovery completed for database AdventureWorks (database ID 11) in 98 second(s) (analysis 97114 ms, redo 0 ms, undo 12 ms [system undo 0 ms, regular undo 0 ms].) ADR-enabled=0, Is primary=1, OL-Enabled=0.
"""


def test_restore_messages_pages_rates_and_files():
    database, log = parse_restore_messages(RESTORE_2022)
    assert (database.statement, database.pages, database.seconds, database.mb_per_second) == (
        "RESTORE DATABASE", 538, 0.032, 131.225)
    assert database.files == {"ExamplesDB_BackupRestore": 536, "ExamplesDB_BackupRestore_log": 2}
    assert database.percents == [10, 21, 100]
    assert database.bytes == 538 * 8192
    assert (log.statement, log.pages, log.seconds) == ("RESTORE LOG", 38, 0.003)


def test_no_success_line_means_no_statement():
    assert parse_restore_messages("10 percent processed.\nMsg 3013, Level 16, State 1\n") == []


def test_errorlog_steps_zeroing_and_recovery_phases():
    steps = parse_restore_steps(ERRORLOG_2013, "AdventureWorks")
    zeroed = steps.zeroed[r"C:\Data\AdventureWorks2012_log.ldf"]
    assert zeroed.started == datetime(2013, 7, 2, 16, 48, 52, 320000)
    assert zeroed.seconds == 18.84
    assert steps.between("transferring_data", "data_transfer_complete") == 18.85
    assert steps.between("waiting_for_log_zero", "log_zero_complete") == 9.53
    assert (steps.recovery_seconds, steps.analysis_ms, steps.redo_ms, steps.undo_ms) == (98, 97114, 0, 12)


def test_newer_builds_report_the_zeroing_time_themselves():
    line = r"2024-03-01 10:00:00.12 spid51      Zeroing completed on D:\Data\test_log.ldf (elapsed = 88 ms)"
    steps = parse_restore_steps(line)
    assert steps.zeroed[r"D:\Data\test_log.ldf"].seconds == 0.088


def test_older_recovery_message_form():
    line = ("2016-01-01 00:00:00.00 spid7s Recovery completed for database X (database ID 5) in 2 second(s) "
            "(analysis 0 ms, redo 0 ms, undo 1565 ms.) This is an informational message only. No user action is "
            "required.")
    steps = parse_restore_steps(line, "X")
    assert (steps.recovery_seconds, steps.undo_ms) == (2, 1565)
    assert parse_restore_steps(line, "Y").recovery_seconds is None


def test_sqlcmd_result_sets_by_column_name():
    s = SEPARATOR
    text = (f"LogicalName{s}PhysicalName{s}Type{s}Size\n-----------{s}------------{s}----{s}----\n"
            f"RestoreTimeClean{s}C:\\Data\\RestoreTimeClean.mdf{s}D{s}2359296\n"
            f"RestoreTimeClean_log{s}C:\\Data\\RestoreTimeClean_log.LDF{s}L{s}589824\n\n"
            f"Error{s}Level{s}MessageText{s}Page\n-----{s}-----{s}-----------{s}----\n"
            f"8928{s}16{s}Object ID 901578250, index ID 1: Page (1:392) could not be processed.{s}NULL\n"
            "\n(1 rows affected)\n")
    files, checks = parse_result_sets(text)
    assert [f["LogicalName"] for f in files] == ["RestoreTimeClean", "RestoreTimeClean_log"]
    assert files[1]["Type"] == "L" and files[1]["Size"] == "589824"
    assert checks[0]["Error"] == "8928" and checks[0]["Page"] is None


def test_checkdb_findings():
    rows = [{"Error": "8928", "Level": "16", "MessageText": "Object ID 901578250, index ID 1, partition ID 1, alloc "
             "unit ID 1 (type In-row data): Page (1:392) could not be processed.  See other errors for details.",
             "ObjectId": "901578250", "File": "1", "Page": "392"}]
    (finding,) = parse_checkdb_rows(rows)
    assert (finding.error, finding.level, finding.page) == (8928, 16, "(1:392)")
    assert "could not be processed.  See other errors" in finding.message
    assert parse_checkdb_rows([]) == []


def test_errors_keep_sql_servers_words_beside_plain_ones():
    text = ("Msg 4305, Level 16, State 1, Server restoreproof, Line 1\n"
            "The log in this backup set begins at LSN 19000000021500001, which is too recent to apply to the "
            "database. An earlier log backup that includes LSN 19000000020400004 can be restored.\n"
            "Msg 3013, Level 16, State 1, Server restoreproof, Line 1\nRESTORE LOG is terminating abnormally.\n")
    chain, terminated = parse_sql_errors(text)
    assert (chain.number, chain.level) == (4305, 16)
    assert chain.plain.startswith("the log chain is broken")
    assert "begins at LSN 19000000021500001" in chain.plain
    assert terminated.number == 3013 and terminated.message == "RESTORE LOG is terminating abnormally."


def test_errorlog_lines_around_the_restore_are_passed_over_not_the_end():
    # A real error log interleaves continuation lines and other sessions' messages.
    text = ("This is an informational message only. No user action is required.\n" + ERRORLOG_2013
            + "2013-07-02 16:49:14.000 spid60 Starting up database 'tempdb'.\n")
    steps = parse_restore_steps(text, "AdventureWorks")
    assert steps.between("transferring_data", "data_transfer_complete") == 18.85
    (zeroed,) = steps.zeroed.values()
    assert zeroed.file == r"C:\Data\AdventureWorks2012_log.ldf"
    assert steps.between("transferring_data", "no_such_step") is None
    assert steps.between("no_such_step", "data_transfer_complete") is None


def test_a_zeroing_seen_only_when_it_completed_still_names_its_file():
    line = r"2024-03-01 10:00:00.12 spid51      Zeroing completed on D:\Data\test_log.ldf (elapsed = 88 ms)"
    (zeroed,) = parse_restore_steps(line).zeroed.values()
    assert (zeroed.file, zeroed.started, zeroed.elapsed_ms) == (r"D:\Data\test_log.ldf", None, 88)


def test_sqlcmd_messages_around_result_sets_are_not_result_sets():
    s = SEPARATOR
    text = ("Changed database context to 'msdb'.\nWarning: Null value is eliminated by an aggregate.\n"
            f"restore_history_id{s}last_lsn\n------------------{s}--------\n5{s}25000000022000001\n"
            "(1 rows affected)\n"
            f"Physical Name{s}Type\n-------------{s}----\nC:\\Data\\X.mdf{s}D\n(1 rows affected)\n"
            f"Error{s}Level\n-----{s}-----")
    history, files, empty = parse_result_sets(text)
    assert history == [{"restore_history_id": "5", "last_lsn": "25000000022000001"}]
    assert files == [{"Physical Name": "C:\\Data\\X.mdf", "Type": "D"}]  # names may hold spaces
    assert empty == []  # a header and its rule as the last lines: a result set with no rows


def test_checkdb_findings_keep_the_object_and_say_when_there_is_no_page():
    rows = [{"Error": "8939", "Level": "16", "MessageText": "Table error: ...", "ObjectId": "901578250", "File": "0",
             "Page": "0"},
            {"Error": None, "Level": None, "MessageText": None, "ObjectId": None, "Page": None}]
    first, unknown = parse_checkdb_rows(rows)
    assert (first.object_id, first.page) == ("901578250", None)
    # A row SQL Server left without numbers or text is still a finding, shown as what it is.
    assert (unknown.error, unknown.level, unknown.message, unknown.object_id, unknown.page) == (0, 0, "", None, None)


def test_an_error_header_as_the_last_line_has_no_message():
    (error,) = parse_sql_errors("Msg 3013, Level 16, State 1, Server restoreproof, Line 1")
    assert (error.number, error.message) == (3013, "")


# SQL Server's point-in-time messages, word for word from its message catalog (Microsoft Docs, "Database engine
# events and errors 4000 to 4999"): number, severity, text.
MSG_4322 = ("This backup set contains records that were logged before the designated point in time. The database is "
            "being left in the restoring state so that more roll forward can be performed.")
MSG_4338 = ("The STOPAT clause specifies a point too early to allow this backup set to be restored. Choose a different "
            "stop point or use RESTORE DATABASE WITH RECOVERY to recover at the current point.")
PLAIN_4322 = ("the point in time is not in this log backup: its records all precede the point, so the restore cannot "
              f"stop there (SQL Server error 4322: {MSG_4322})")
LOG_DONE = "RESTORE LOG successfully processed 38 pages in 0.003 seconds (97.656 MB/sec)."


def test_4322_as_sqlcmd_prints_it_is_heard():
    # Severity 10: a plain line between the progress and the success line, the statement exits 0.
    assert stopat_not_reached(f"100 percent processed.\n{MSG_4322}\n{LOG_DONE}\n") == SqlError(4322, 10, MSG_4322)
    # Indented or with a trailing blank, still the same line.
    assert stopat_not_reached(f"  {MSG_4322}  \n{LOG_DONE}\n") == SqlError(4322, 10, MSG_4322)
    assert SqlError(4322, 10, MSG_4322).plain == PLAIN_4322


def test_4322_with_an_error_header_is_heard_with_its_own_text():
    said = f"Msg 4322, Level 10, State 1, Server restoreproof, Line 1\n{MSG_4322}\n{LOG_DONE}\n"
    assert stopat_not_reached(said) == SqlError(4322, 10, MSG_4322)
    # The header's own level is kept, whatever it is.
    assert stopat_not_reached(said.replace("Level 10", "Level 11")) == SqlError(4322, 11, MSG_4322)


def test_4322_worded_differently_after_its_first_sentence_is_still_heard():
    first = "This backup set contains records that were logged before the designated point in time."
    assert stopat_not_reached(f"{first} Left restoring.\n") == SqlError(4322, 10, f"{first} Left restoring.")


@pytest.mark.parametrize("said", [
    "",
    f"100 percent processed.\n{LOG_DONE}\n",  # stopped inside the log: SQL Server says nothing more
    # Another message of the same family is not 4322 (a mark, message 4329).
    "This log file contains records logged before the designated mark. The database is being left in the Restoring "
    "state so you can apply another log file.\n",
    # The sentence quoted inside another line is not the message.
    f"note: {MSG_4322}\n",
    f"Msg 4338, Level 16, State 1, Server restoreproof, Line 1\n{MSG_4338}\n",
])
def test_anything_else_is_not_4322(said):
    assert stopat_not_reached(said) is None


def test_point_in_time_messages_split_between_the_backups_and_restoreproof():
    # The backups cannot reach the point: the log ends before it, or bulk-logged changes forbid a stop inside it.
    assert {4322, 4327, 4341} <= BACKUP_FAULTS
    # A backup restored whole went past the point: restoreproof's choice of logs, not the backups.
    assert not {4335, 4338, 4343} & BACKUP_FAULTS
    assert SqlError(4338, 16, MSG_4338).plain == (
        "the point in time is before the start of this log backup: restoreproof applied a backup that goes beyond it "
        f"(SQL Server error 4338: {MSG_4338})")
    assert ERROR_MEANINGS[4327] == ("the log backup holds bulk-logged changes: SQL Server cannot stop inside it at a "
                                    "point in time and rolled forward to its end")
    assert ERROR_MEANINGS[4341] == "the log backup holds bulk-logged changes: it cannot be used to stop at a point in time"
    assert ERROR_MEANINGS[4335] == ("the point in time is earlier than what was already restored: restoreproof applied "
                                    "a backup that goes beyond it")
    assert ERROR_MEANINGS[4343] == ("the restore went past the point in time to the end of this backup set: "
                                    "restoreproof applied a backup that goes beyond it")


# -- RESTORE FROM URL = 's3://...': the S3 connector's messages (docs/sqlserver-s3-direct.md) ----------------

URL = "s3://s3.example.com:9000/backups/sql/db.bak"


@pytest.mark.parametrize(("os_error", "meaning"), [
    ("50(The request is not supported.)", "SQL Server's S3 connector refused to open the object: no credential "
                                          "matches its URL, the URL is malformed, or the bucket does not exist"),
    ("5(Access is denied.)", "the object store denied access to the object: the keys lack read permission "
                             "(s3:ListBucket, s3:GetObject), the secret key does not match the access key, or the "
                             "clocks differ by more than 15 minutes"),
    ("12007(The server name or address could not be resolved)",
     "the S3 endpoint's host name does not resolve inside the target"),
    ("12175(failed to retrieve text for this error. Reason: 15105)",
     "SQL Server does not trust the S3 endpoint's TLS certificate: its CA is not in "
     "/var/opt/mssql/security/ca-certificates when SQL Server starts, or it does not name the host"),
    ("87(The parameter is incorrect.)", "SQL Server could not open the backup object s3://s3.example.com:9000/backups/"
                                        "sql/db.bak (operating system error 87)"),
])
def test_an_s3_device_that_cannot_be_opened_says_why_and_is_never_the_backups_fault(os_error: str, meaning: str):
    text = (f"Msg 3201, Level 16, State 1, Server restoreproof, Line 1\nCannot open backup device '{URL}'. "
            f"Operating system error {os_error}.\nMsg 3013, Level 16, State 1, Server restoreproof, Line 1\n"
            "RESTORE DATABASE is terminating abnormally.\n")
    opened, terminated = parse_sql_errors(text)
    assert opened.plain.startswith(meaning)
    assert opened.plain.endswith(f"(SQL Server error 3201: Cannot open backup device '{URL}'. Operating system error "
                                 f"{os_error}.)")
    assert {opened.number, terminated.number} & BACKUP_FAULTS == set()


def test_a_read_broken_off_and_a_disk_device_keep_their_own_meanings():
    broke = SqlError(3203, 16, f'Read on "{URL}" failed: 12030(The connection with the server was terminated '
                               "abnormally)")
    assert broke.plain.startswith(f"the connection to the S3 endpoint broke off: {URL} (SQL Server error 3203")
    disk = SqlError(3201, 16, "Cannot open backup device '/backups/db.bak'. Operating system error 5(Access is denied.).")
    assert disk.plain.startswith(ERROR_MEANINGS[3201])
    assert SqlError(3132, 16, "The media set has 2 media families but only 1 are provided. All members must be "
                              "provided.").plain.startswith("restoreproof did not name every family")
