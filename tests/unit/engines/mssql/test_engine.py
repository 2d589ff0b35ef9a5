"""The SQL Server restore flow against a stand-in server that answers with SQL Server's documented
outputs (no SQL Server can run here): the chain planned from the real corpus, the statements sent,
the phases, checks and verdicts that come out."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import MSSQL_CORPUS
from tests.unit.engines.mssql.test_chain import _finish_two_minutes_later
from tests.unit.engines.mssql.test_outputs import ERRORLOG_2013
from verification.config import load_settings
from verification.engines.base import Evidence, RestoreOutcome
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan
from verification.engines.mssql.engine import MssqlEngine
from verification.engines.mssql.outputs import SEPARATOR
from verification.errors import TargetError
from verification.model import CheckKind, CheckResult, CheckStatus, PhaseStatus, Verdict
from verification.sources import LocalSource
from verification.targets.base import ExecResult
from verification.verdict import decide

S = SEPARATOR
PASSWORD = "Xy9#secret-sa-password"
FILELIST = (f"LogicalName{S}PhysicalName{S}Type{S}FileGroupName{S}Size\n"
            f"-----------{S}------------{S}----{S}-------------{S}----\n"
            f"RestoreTimeClean{S}C:\\DATA\\RestoreTimeClean.mdf{S}D{S}PRIMARY{S}2359296\n"
            f"RestoreTimeClean_log{S}C:\\DATA\\RestoreTimeClean_log.LDF{S}L{S}NULL{S}589824\n\n(2 rows affected)\n")
DATABASE_OK = ("10 percent processed.\n100 percent processed.\n"
               "Processed 536 pages for database 'RestoreTimeClean', file 'RestoreTimeClean' on file 1.\n"
               "Processed 2 pages for database 'RestoreTimeClean', file 'RestoreTimeClean_log' on file 1.\n"
               "RESTORE DATABASE successfully processed 538 pages in 0.032 seconds (131.225 MB/sec).\n")
LOG_OK = "100 percent processed.\nRESTORE LOG successfully processed 38 pages in 0.003 seconds (97.656 MB/sec).\n"
ERROR_4305 = ("Msg 4305, Level 16, State 1, Server restoreproof, Line 1\nThe log in this backup set begins at LSN "
              "25000000021000001, which is too recent to apply to the database. An earlier log backup that includes "
              "LSN 25000000020000001 can be restored.\nMsg 3013, Level 16, State 1, Server restoreproof, Line 1\n"
              "RESTORE LOG is terminating abnormally.\n")
CHECKDB_CORRUPT = (f"Error{S}Level{S}State{S}MessageText{S}File{S}Page\n-----{S}-----{S}-----{S}-----------{S}----{S}----\n"
                   f"8928{S}16{S}1{S}Object ID 901578250, index ID 1, partition ID 72057594041401344, alloc unit ID "
                   f"72057594046054400 (type In-row data): Page (1:392) could not be processed.  See other errors for "
                   f"details.{S}1{S}392\n\n(1 rows affected)\n")


def restore_history(last_lsn: str = "25000000022000001", stop_at: str = "NULL",
                    finish: str = "2017-06-01T13:29:13") -> str:
    return (f"restore_history_id{S}first_lsn{S}last_lsn{S}stop_at{S}backup_finish_date{S}backup_type\n"
            f"------------------{S}---------{S}--------{S}-------{S}------------------{S}-----------\n"
            f"5{S}25000000021000001{S}{last_lsn}{S}{stop_at}{S}{finish}{S}L\n")


class StandInServer:
    """Answers each statement by its first words, as SQL Server would; records what it was sent."""

    provision_seconds = 12.5

    def __init__(self, answers: dict[str, tuple[int, str]], restored_last_good: str = "2017-06-01T12:50:00",
                 checkdb_records: bool = True) -> None:
        self.restored_last_good = restored_last_good  # what the backup carried from the source
        self.checkdb_records = checkdb_records  # a real CHECKDB moves LastGoodCheckDbTime
        self.answers = {
            "DBCC TRACEON": (0, "DBCC execution completed. If DBCC printed error messages, contact your system "
                                "administrator.\n"),
            "RESTORE FILELISTONLY": (0, FILELIST),
            "RESTORE DATABASE [RestoreTimeClean] WITH RECOVERY": (
                0, "RESTORE DATABASE successfully processed 0 pages in 0.490 seconds (0.000 MB/sec).\n"),
            "RESTORE DATABASE": (0, DATABASE_OK),
            "RESTORE LOG": (0, LOG_OK),
            "SELECT state_desc": (0, "state_desc\n----------\nONLINE\n\n(1 rows affected)\n"),
            "DBCC CHECKDB": (0, ""),
            # msdb's record of the last RESTORE: the chain's last log, as SQL Server writes it.
            "SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (0, restore_history()),
            **answers,
        }
        self.sent: list[str] = []

    def sql(self, statement: str, timeout: float) -> ExecResult:
        self.sent.append(statement)
        if statement.startswith("SELECT CONVERT(varchar(19), SYSDATETIME()"):
            checked = self.checkdb_records and any(s.startswith("DBCC CHECKDB") for s in self.sent)
            last_good = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S") if checked else self.restored_last_good
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
            return ExecResult([], 0, f"server_time{S}last_good\n-----------{S}---------\n{now}{S}{last_good}\n", "", 0.0)
        key = max((k for k in self.answers if statement.startswith(k)), key=len)
        code, text = self.answers[key]
        return ExecResult(["sqlcmd", "-Q", statement], 1 if code else 0, text, "", 0.01)

    def errorlog(self) -> str:
        # Raw, as the container prints it: the engine must redact it.
        return (ERRORLOG_2013.replace("AdventureWorks", "RestoreTimeClean")
                + f"2013-07-02 16:49:14.000 Logon  Login succeeded for user 'sa' password {PASSWORD}\n")

    def redact(self, text: str) -> str:
        return text.replace(PASSWORD, "********")


@pytest.fixture
def restore_plan(mssql_corpus):  # type: ignore[no-untyped-def]
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    (db,) = catalog.databases
    return plan(db, "RestoreTimeClean", None)


def verify(restore_plan, server: StandInServer, tmp_path: Path, corpus: Path | None = None):  # type: ignore[no-untyped-def]
    """The pipeline's order: the backup files' pages offline first, then the restore into the stand-in."""
    engine = MssqlEngine(load_settings())
    evidence = Evidence(tmp_path / "RestoreTimeClean")
    source = LocalSource(corpus or MSSQL_CORPUS / "RestoreTimeClean")
    outcome = RestoreOutcome(checks=engine.check_backup_files(restore_plan, source, evidence))
    outcome = engine.restore_and_check(restore_plan, server, evidence, outcome)  # type: ignore[arg-type]
    return outcome, decide(restore_plan, outcome)


def test_clean_restore_passes_with_every_phase(restore_plan, tmp_path):
    server = StandInServer({})
    outcome, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.PASSED, reasons
    assert server.sent[0] == "DBCC TRACEON (3004, 3605, -1);"
    assert server.sent[1] == "RESTORE FILELISTONLY FROM DISK = N'/backups/RestoreTimeClean.bak';"
    assert server.sent[2].startswith("RESTORE DATABASE [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean.bak' "
                                     "WITH NORECOVERY, STATS = 10, MOVE N'RestoreTimeClean' TO "
                                     "N'/var/opt/mssql/data/RestoreTimeClean_1_RestoreTimeClean.mdf'")
    assert server.sent[3].startswith("RESTORE DATABASE [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean2.bak'")
    assert [s.split(" FROM ")[1].split(" WITH")[0] for s in server.sent[4:7]] == [
        "DISK = N'/backups/RestoreTimeClean2_1.trn'", "DISK = N'/backups/RestoreTimeClean2_2.trn'",
        "DISK = N'/backups/RestoreTimeClean2_3.trn'"]
    assert server.sent[7] == "RESTORE DATABASE [RestoreTimeClean] WITH RECOVERY;"
    assert server.sent[9].startswith("SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id")
    assert "rh.destination_database_name = N'RestoreTimeClean'" in server.sent[9]
    # The point reached is the server's word, quoted in the verdict.
    assert ("msdb restorehistory/backupset: the last backup restored ended at LSN 25000000022000001 (finished "
            "2017-06-01T13:29:13+00:00), the planned chain's last LastLSN (RestoreTimeClean2_3.trn)") in reasons
    assert outcome.achieved == datetime(2017, 6, 1, 13, 29, 13, tzinfo=UTC)
    assert server.sent[11] == "DBCC CHECKDB (N'RestoreTimeClean') WITH NO_INFOMSGS, ALL_ERRORMSGS, TABLERESULTS;"
    phases = {p.name: p for p in outcome.phases}
    assert phases["transfer"].seconds == pytest.approx(0.064) and phases["transfer"].bytes == 2 * 538 * 8192
    assert phases["log_restore"].seconds == pytest.approx(0.009)
    assert phases["zeroing"].status is PhaseStatus.MEASURED and phases["zeroing"].seconds == pytest.approx(18.84)
    assert (phases["redo"].seconds, phases["recovery_end"].seconds) == (0.0, 97.126)
    assert phases["log_zero_wait"].seconds == pytest.approx(9.53)
    # The pages of both data backups were verified offline first, and are kept beside CHECKDB's verdict.
    pages, check = outcome.checks
    assert (pages.name, pages.status, pages.kind) == ("page_verification", CheckStatus.PASSED, CheckKind.BACKUP_FILES)
    assert list(pages.details["per_file"]) == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak"]
    assert any(r.startswith("page_verification: no damaged page; ") for r in reasons)
    assert check.status is CheckStatus.PASSED and "LastGoodCheckDbTime" in check.summary
    assert check.details["before"] == "2017-06-01T12:50:00"
    evidence = tmp_path / "RestoreTimeClean"
    assert PASSWORD not in "".join(p.read_text() for p in evidence.iterdir())
    assert "********" in (evidence / "errorlog.txt").read_text()


def test_a_log_chain_error_fails_in_plain_words_with_sql_servers_message(restore_plan, tmp_path):
    server = StandInServer({"RESTORE LOG [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean2_3.trn'":
                            (1, ERROR_4305)})
    outcome, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.FAILED
    assert reasons[0].startswith("the log chain is broken")
    assert "SQL Server error 4305: The log in this backup set begins at LSN 25000000021000001" in reasons[0]
    assert "RESTORE DATABASE [RestoreTimeClean] WITH RECOVERY;" not in server.sent
    assert {p.name: p.status for p in outcome.phases}["integrity_check"] is PhaseStatus.NOT_REACHED


def test_checkdb_corruption_fails_with_the_finding(restore_plan, tmp_path):
    server = StandInServer({"DBCC CHECKDB": (0, CHECKDB_CORRUPT)})
    _, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.FAILED
    assert "Msg 8928, Level 16: Object ID 901578250" in reasons[0]
    assert "Page (1:392) could not be processed" in reasons[0]


def test_checkdb_that_left_no_proof_is_not_a_pass(restore_plan, tmp_path):
    server = StandInServer({}, checkdb_records=False)
    _, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.ERROR
    assert "LastGoodCheckDbTime does not show it completed" in reasons[0]


def test_a_restored_last_good_time_ahead_of_the_server_clock_is_no_proof(restore_plan, tmp_path):
    # A source east of UTC ran CHECKDB "in the future" of this server's clock: unchanged, so no proof.
    server = StandInServer({}, restored_last_good="2099-01-01T00:00:00", checkdb_records=False)
    _, (verdict, _) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.ERROR


def test_the_sa_password_never_reaches_reasons_or_evidence(restore_plan, tmp_path):
    echo = (f"Msg 3201, Level 16, State 2, Server x, Line 1\nCannot open backup device '/backups/{PASSWORD}.trn'. "
            "Operating system error 2(The system cannot find the file specified.).\n")
    server = StandInServer({"RESTORE LOG": (1, echo)})
    outcome, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.ERROR  # the target could not open the file: restoreproof's setup, not the backup
    assert reasons[0].startswith("the target could not open the backup file") and "********" in reasons[0]
    evidence = tmp_path / "RestoreTimeClean"
    written = "".join(p.read_text() for p in evidence.iterdir())
    assert PASSWORD not in written + " ".join(reasons) + repr(outcome)
    assert "password ********" in (evidence / "errorlog.txt").read_text()


@pytest.mark.parametrize("answer", [
    (1, "Msg 208, Level 16, State 1, Server restoreproof, Line 1\nInvalid object name 'sys.databases'.\n"),
    (1, ""),
    (0, "state_desc\n----------\n\n(0 rows affected)\n"),
    (0, "Sqlcmd: Warning: something unexpected.\n"),
])
def test_a_state_that_cannot_be_read_is_an_error_not_a_failed_backup(restore_plan, tmp_path, answer):
    server = StandInServer({"SELECT state_desc": answer})
    outcome, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.ERROR
    code, text = answer
    assert outcome.errors == [f"the state of database RestoreTimeClean after recovery could not be read (exit {code}): "
                              + (text.strip() or "no output")]
    assert outcome.failures == [] and not outcome.online and reasons[:-1] == outcome.errors
    assert reasons[-1].startswith("page_verification (backup files, not a verdict on the data): no damaged page")
    assert not any(s.startswith("DBCC CHECKDB") for s in server.sent)


def test_a_state_read_despite_a_failed_exit_is_not_trusted(restore_plan, tmp_path):
    # A row with ONLINE in an output whose exit says the query failed proves nothing.
    server = StandInServer({"SELECT state_desc": (1, "state_desc\n----------\nONLINE\n\n(1 rows affected)\n")})
    outcome, (verdict, _) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.ERROR and not outcome.online
    assert outcome.errors[0].startswith("the state of database RestoreTimeClean after recovery could not be read (exit 1)")


def test_not_online_after_recovery_fails(restore_plan, tmp_path):
    server = StandInServer({"SELECT state_desc": (0, "state_desc\n----------\nRECOVERY_PENDING\n\n")})
    _, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.FAILED
    assert reasons == ["database RestoreTimeClean is not ONLINE after recovery (state: RECOVERY_PENDING)"]


def test_a_server_that_restored_less_than_planned_fails_naming_both_lsns(restore_plan, tmp_path):
    # msdb says the last log applied ended at the second log's LSN: one log never made it in.
    server = StandInServer({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, restore_history(last_lsn="25000000021000001", finish="2017-06-01T13:24:13"))})
    outcome, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.FAILED
    assert reasons[0].startswith("the server restored up to LSN 25000000021000001, not to the planned chain's end: "
                                 "RestoreTimeClean2_3.trn ends at LastLSN 25000000022000001")
    assert outcome.proofs == []


def test_no_restore_history_is_an_error_never_a_pass(restore_plan, tmp_path):
    server = StandInServer({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, f"restore_history_id{S}last_lsn\n------------------{S}--------\n\n(0 rows affected)\n")})
    _, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.ERROR
    assert reasons[0] == "msdb.dbo.restorehistory has no restore of the database: the point reached is unproven"
    assert reasons[1].startswith("page_verification (backup files, not a verdict on the data)") and len(reasons) == 2


MSG_4322 = ("This backup set contains records that were logged before the designated point in time. The database is "
            "being left in the restoring state so that more roll forward can be performed.")


def test_the_servers_4322_on_the_terminal_log_fails_before_recovery(mssql_corpus, tmp_path):
    # The log ended before the point: SQL Server says so, exit 0; msdb would still echo the STOPAT sent.
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    pitr = plan(catalog.databases[0], "RestoreTimeClean", datetime(2017, 6, 1, 13, 22, 0, tzinfo=UTC))
    server = StandInServer({
        "RESTORE LOG [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean2_2.trn'": (
            0, f"100 percent processed.\n{MSG_4322}\n{LOG_OK.splitlines()[1]}\n"),
        "SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
            0, restore_history(last_lsn="25000000021000001", stop_at="2017-06-01T13:22:00", finish="2017-06-01T13:24:13"))})
    outcome, (verdict, reasons) = verify(pitr, server, tmp_path)
    assert verdict is Verdict.FAILED
    assert outcome.failures == [
        "SQL Server did not reach 2017-06-01T13:22:00+00:00: RestoreTimeClean2_2.trn ends before it, and recovery would "
        "stop at its end: the point in time is not in this log backup: its records all precede the point, so the "
        f"restore cannot stop there (SQL Server error 4322: {MSG_4322})"]
    assert outcome.failures[0] in reasons and outcome.proofs == [] and outcome.achieved is None
    assert "RESTORE DATABASE [RestoreTimeClean] WITH RECOVERY;" not in server.sent


def test_the_terminal_log_restore_that_overshoots_is_restoreproofs_error(mssql_corpus, tmp_path):
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    pitr = plan(catalog.databases[0], "RestoreTimeClean", datetime(2017, 6, 1, 13, 22, 0, tzinfo=UTC))
    too_early = ("Msg 4338, Level 16, State 1, Server restoreproof, Line 1\nThe STOPAT clause specifies a point too "
                 "early to allow this backup set to be restored. Choose a different stop point or use RESTORE DATABASE "
                 "WITH RECOVERY to recover at the current point.\nMsg 3013, Level 16, State 1, Server restoreproof, "
                 "Line 1\nRESTORE LOG is terminating abnormally.\n")
    server = StandInServer({"RESTORE LOG [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean2_2.trn'": (
        1, too_early)})
    outcome, (verdict, _) = verify(pitr, server, tmp_path)
    assert verdict is Verdict.ERROR
    assert outcome.failures == []
    assert outcome.errors[0].startswith("the point in time is before the start of this log backup: restoreproof "
                                        "applied a backup that goes beyond it (SQL Server error 4338: The STOPAT")


def test_stopat_goes_to_the_log_that_started_after_the_target_not_the_one_that_finished_after_it(mssql_copy, tmp_path):
    root = mssql_copy("RestoreTimeClean")
    _finish_two_minutes_later(root / "RestoreTimeClean/RestoreTimeClean2_2.trn")
    (db,) = scan(LocalSource(root)).databases
    pitr = plan(db, "RestoreTimeClean", datetime(2017, 6, 1, 13, 25, 0, tzinfo=UTC))
    server = StandInServer({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, restore_history(stop_at="2017-06-01T13:25:00"))})
    outcome, (verdict, reasons) = verify(pitr, server, tmp_path, root)
    assert verdict is Verdict.PASSED, reasons
    logs = [s for s in server.sent if s.startswith("RESTORE LOG")]
    assert logs == [
        "RESTORE LOG [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean/RestoreTimeClean2_1.trn' WITH "
        "NORECOVERY, STATS = 10;",
        "RESTORE LOG [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean/RestoreTimeClean2_2.trn' WITH "
        "NORECOVERY, STATS = 10;",
        "RESTORE LOG [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean/RestoreTimeClean2_3.trn' WITH "
        "NORECOVERY, STATS = 10, STOPAT = N'2017-06-01T13:25:00.000';"]
    assert outcome.achieved == datetime(2017, 6, 1, 13, 25, 0, tzinfo=UTC)


def test_a_point_in_time_is_proven_by_the_stopat_msdb_recorded(mssql_corpus, tmp_path):
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    at = datetime(2017, 6, 1, 13, 22, 0, tzinfo=UTC)
    pitr = plan(catalog.databases[0], "RestoreTimeClean", at)
    assert pitr.chain.backups[-1].path == "RestoreTimeClean2_2.trn"
    good = StandInServer({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, restore_history(last_lsn="25000000021000001", stop_at="2017-06-01T13:22:00", finish="2017-06-01T13:24:13"))})
    outcome, (verdict, reasons) = verify(pitr, good, tmp_path / "good")
    assert verdict is Verdict.PASSED, reasons
    # The proof says what it rests on: the server's messages on the terminal log, msdb's stop_at only echoing.
    assert outcome.proofs == [
        "the requested point 2017-06-01T13:22:00+00:00, confirmed by a successful RESTORE LOG ... WITH STOPAT on "
        "RestoreTimeClean2_2.trn (RESTORE LOG successfully processed) without SQL Server's message 4322 (the log ends "
        "before the point); msdb restorehistory/backupset: the last backup restored ended at LSN 25000000021000001 "
        "(finished 2017-06-01T13:24:13+00:00), the planned terminal log's LastLSN; msdb's stop_at 2017-06-01T13:22:00 "
        "is that STOPAT as sent, not a measure of the point reached"]
    assert outcome.achieved == at
    no_stop = StandInServer({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, restore_history(last_lsn="25000000021000001", finish="2017-06-01T13:24:13"))})
    outcome, (verdict, reasons) = verify(pitr, no_stop, tmp_path / "bad")
    assert verdict is Verdict.FAILED
    assert reasons[0].startswith("the server's last restore stopped at no STOPAT, not at the planned "
                                 "2017-06-01T13:22:00+00:00")


def test_a_backup_newer_than_the_image_is_an_error_of_restoreproofs_setup_not_a_failed_backup(restore_plan, tmp_path):
    too_new = ("Msg 3169, Level 16, State 1, Server restoreproof, Line 1\nThe database was backed up on a server "
               "running version 16.00.4135. That version is incompatible with this server, which is running version "
               "15.00.2000. Either restore the database on a server that supports the backup, or use a backup that "
               "is compatible with this server.\nMsg 3013, Level 16, State 1, Server restoreproof, Line 1\n"
               "RESTORE DATABASE is terminating abnormally.\n")
    server = StandInServer({"RESTORE DATABASE": (1, too_new)})
    _, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.ERROR
    assert reasons[0].startswith("the backup was written by a newer SQL Server than the restore target: configure an "
                                 "image at least as new (mssql.images) (SQL Server error 3169: The database was "
                                 "backed up on a server running version 16.00.4135.")


class VanishingServer(StandInServer):
    """A server whose container is gone by the time its errorlog is read (the engine stopped)."""

    def errorlog(self) -> str:
        raise TargetError("container restoreproof-x is gone")


def test_a_failure_proven_before_the_server_went_away_is_in_the_outcome_given(restore_plan, tmp_path):
    server = VanishingServer({"RESTORE LOG [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean2_3.trn'":
                              (1, ERROR_4305)})
    given = RestoreOutcome()
    with pytest.raises(TargetError, match="container restoreproof-x is gone"):
        MssqlEngine(load_settings()).restore_and_check(restore_plan, server, Evidence(tmp_path / "e"), given)
    assert given.failures[0].startswith("the log chain is broken"), given.failures
    assert "SQL Server error 4305" in given.failures[0]


def test_a_page_damaged_in_the_backup_fails_beside_a_checkdb_that_passed(mssql_copy, tmp_path):
    from tests.faults.test_mssql_faults import _pages

    root = mssql_copy("RestoreTimeClean")
    victim = root / "RestoreTimeClean/RestoreTimeClean2.bak"
    offset, header = _pages(victim)[0]
    data = bytearray(victim.read_bytes())
    data[offset + 1000] ^= 0x01
    victim.write_bytes(bytes(data))
    (db,) = scan(LocalSource(root)).databases
    outcome, (verdict, reasons) = verify(plan(db, "RestoreTimeClean", None), StandInServer({}), tmp_path, root)
    assert verdict is Verdict.FAILED
    assert reasons[0].startswith("page_verification failed: 1 damaged page(s); ")
    assert f"RestoreTimeClean/RestoreTimeClean2.bak: offset {offset:#x}, page 1:{header.page_id}" in reasons[0]
    assert [(c.name, c.status) for c in outcome.checks] == [("page_verification", CheckStatus.FAILED),
                                                             ("dbcc_checkdb", CheckStatus.PASSED)]


def test_with_every_backup_asked_for_a_damaged_copy_outside_the_chain_fails_and_the_same_chain_is_restored(
        mssql_copy, tmp_path):
    from tests.faults.test_mssql_faults import _pages

    root = mssql_copy("RestoreTimeClean")
    folder = root / "RestoreTimeClean"
    (folder / "again").mkdir()
    data = bytearray((folder / "RestoreTimeClean.bak").read_bytes())
    offset, header = _pages(folder / "RestoreTimeClean.bak")[0]
    data[offset + 1000] ^= 0x01
    (folder / "again/RestoreTimeClean.bak").write_bytes(bytes(data))  # a second copy of the full, damaged
    (db,) = scan(LocalSource(folder)).databases
    planned = plan(db, "RestoreTimeClean", None)
    runs = {}
    for pages in ("chain", "all"):
        engine = MssqlEngine(load_settings(mssql={"pages": pages}))
        server = StandInServer({})
        evidence = Evidence(tmp_path / pages)
        outcome = RestoreOutcome(checks=engine.check_backup_files(planned, LocalSource(folder), evidence))
        outcome = engine.restore_and_check(planned, server, evidence, outcome)  # type: ignore[arg-type]
        runs[pages] = (server.sent, outcome, decide(planned, outcome))
    clean_sent, _, (clean_verdict, _) = runs["chain"]
    sent, outcome, (verdict, reasons) = runs["all"]
    assert clean_verdict is Verdict.PASSED
    # The plan and the restore are the same: only what the page check read, and so the verdict, differs.
    assert sent == clean_sent
    assert [(c.name, c.status) for c in outcome.checks] == [("page_verification", CheckStatus.FAILED),
                                                             ("dbcc_checkdb", CheckStatus.PASSED)]
    assert verdict is Verdict.FAILED
    assert reasons[0].startswith("page_verification failed: 1 damaged page(s) (in backup(s) outside the planned "
                                 "chain: again/RestoreTimeClean.bak; none in the planned chain's own); ")
    assert (f"again/RestoreTimeClean.bak (outside the planned chain): offset {offset:#x}, page 1:{header.page_id} "
            f"(object {header.object_id}, index {header.index_id}): checksum mismatch") in reasons[0]


def test_data_checks_a_target_cannot_serve_are_an_error_and_checkdb_still_runs(restore_plan, tmp_path):
    server = StandInServer({})
    called: list[object] = []
    engine = MssqlEngine(load_settings())
    outcome = engine.restore_and_check(restore_plan, server, Evidence(tmp_path / "db"),  # type: ignore[arg-type]
                                       data_checks=lambda access, evidence: called.append(access) or [])
    assert called == []  # the stand-in has no way to its server: the checks were not handed a broken one
    [data] = [c for c in outcome.checks if c.kind is CheckKind.DATA]
    assert (data.name, data.status, data.summary) == (
        "data_checks", CheckStatus.ERROR,
        "the data checks did not run: this target gives no way to reach the restored server")
    assert any(s.startswith("DBCC CHECKDB") for s in server.sent)
    verdict, reasons = decide(restore_plan, outcome)
    assert verdict is Verdict.ERROR and "data_checks error: the data checks did not run: this target gives no way " \
        "to reach the restored server" in reasons


def test_data_checks_run_after_the_restore_and_before_checkdb_with_the_server_s_point(restore_plan, tmp_path):
    class Reachable(StandInServer):
        secrets = (PASSWORD,)

        def data_url(self, database: str) -> str:
            return f"mssql+pymssql://sa@127.0.0.1:1/{database}"

    server = Reachable({})
    seen: list[tuple[object, int]] = []

    def checks(access, evidence):  # type: ignore[no-untyped-def]
        seen.append((access, len(server.sent)))
        return [CheckResult("data:orders", CheckStatus.FAILED, "1 of 1 expectations failed", ["orders: empty"],
                            kind=CheckKind.DATA)]

    outcome = MssqlEngine(load_settings()).restore_and_check(restore_plan, server, Evidence(tmp_path / "db"),  # type: ignore[arg-type]
                                                             data_checks=checks)
    [(access, sent)] = seen
    assert access.databases == ("RestoreTimeClean",) and access.main_database == "RestoreTimeClean"
    # checks.timeout (1800 s by default) bounds each query; logging in, pymssql's own 60 s at most.
    assert access.url("RestoreTimeClean") == ("mssql+pymssql://sa@127.0.0.1:1/RestoreTimeClean?login_timeout=60&"
                                              "timeout=1800")
    assert access.restore_point == datetime(2017, 6, 1, 13, 29, 13, tzinfo=UTC) and access.secrets == (PASSWORD,)
    assert not any(s.startswith("DBCC CHECKDB") for s in server.sent[:sent])  # before CHECKDB ...
    assert any(s.startswith("DBCC CHECKDB") for s in server.sent[sent:])      # ... which still ran after
    assert decide(restore_plan, outcome)[0] is Verdict.FAILED
    assert [p.status for p in outcome.phases if p.name == "data_checks"] == [PhaseStatus.MEASURED]


def test_the_data_checks_reach_sql_server_with_checks_timeout_as_pymssqls_query_and_login_timeouts(restore_plan,
                                                                                                   tmp_path):
    import sqlalchemy
    from sqlalchemy.engine import URL

    class Reachable(StandInServer):
        secrets = (PASSWORD,)

        def data_url(self, database: str) -> URL:  # as the real target gives it: a URL object with a password
            return URL.create("mssql+pymssql", username="sa", password=PASSWORD, host="127.0.0.1", port=1,
                              database=database)

    seen: list[str] = []
    MssqlEngine(load_settings(checks={"timeout": 7.5})).restore_and_check(  # type: ignore[arg-type]
        restore_plan, Reachable({}), Evidence(tmp_path / "db"),
        data_checks=lambda access, evidence: seen.append(access.url("RestoreTimeClean")) or [])
    [url] = seen
    made = sqlalchemy.engine.make_url(url)
    assert (made.password, made.database, dict(made.query)) == (PASSWORD, "RestoreTimeClean",
                                                                {"login_timeout": "8", "timeout": "8"})
    # What the pinned driver is given: its own keyword arguments.
    _, kwargs = sqlalchemy.create_engine(url).dialect.create_connect_args(made)
    assert (kwargs["timeout"], kwargs["login_timeout"]) == ("8", "8")


def test_direct_mode_from_s3_is_refused_with_the_way_that_works() -> None:
    from verification.config import S3Settings, Settings
    from verification.errors import RestoreproofError

    class InS3:
        def describe(self) -> str:
            return "s3://backups/sql"

    engine = MssqlEngine(Settings(s3=S3Settings(restore_mode="direct")))
    with pytest.raises(RestoreproofError, match=r"direct is not available for SQL Server backups .* use s3\.restore_mode "
                                                r"stage"):
        engine.target_provider("docker", [], InS3())  # type: ignore[arg-type]
