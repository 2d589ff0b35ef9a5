"""The SQL Server restore flow against a stand-in server that answers with SQL Server's documented
outputs (no SQL Server can run here): the chain planned from the real corpus, the statements sent,
the phases, checks and verdicts that come out."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import pytest

from tests.conftest import MSSQL_CORPUS
from tests.unit.engines.mssql.test_chain import _finish_two_minutes_later
from tests.unit.engines.mssql.test_outputs import ERRORLOG_2013
from tests.unit.engines.mssql.test_secret_files import as_sql_server_runs_it
from tests.unit.sources.conftest import s3, s3_endpoint
from verification.config import Settings, load_settings
from verification.engines.base import Evidence, RestoreOutcome
from verification.engines.mssql import secret_files
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan
from verification.engines.mssql.engine import MssqlEngine
from verification.engines.mssql.outputs import SEPARATOR
from verification.engines.mssql.secret_files import KEYS_DIR
from verification.engines.mssql.tsql import literal
from verification.errors import TargetError
from verification.model import CheckKind, CheckResult, CheckStatus, PhaseStatus, Verdict
from verification.sources import LocalSource
from verification.targets.base import ExecResult
from verification.verdict import decide

__all__ = ["s3", "s3_endpoint"]  # fixtures, used here by name

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


# RESTORE HEADERONLY's columns, SQL Server 2016 to 2019 (docs/sqlserver-reference.md, section 3), and a row
# of the values a backup that is not encrypted has: its three encryption columns NULL.
HEADERONLY_COLUMNS = (
    "BackupName", "BackupDescription", "BackupType", "ExpirationDate", "Compressed", "Position", "DeviceType",
    "UserName", "ServerName", "DatabaseName", "DatabaseVersion", "DatabaseCreationDate", "BackupSize", "FirstLSN",
    "LastLSN", "CheckpointLSN", "DatabaseBackupLSN", "BackupStartDate", "BackupFinishDate", "SortOrder", "CodePage",
    "UnicodeLocaleId", "UnicodeComparisonStyle", "CompatibilityLevel", "SoftwareVendorId", "SoftwareVersionMajor",
    "SoftwareVersionMinor", "SoftwareVersionBuild", "MachineName", "Flags", "BindingID", "RecoveryForkID",
    "Collation", "FamilyGUID", "HasBulkLoggedData", "IsSnapshot", "IsReadOnly", "IsSingleUser", "HasBackupChecksums",
    "IsDamaged", "BeginsLogChain", "HasIncompleteMetaData", "IsForceOffline", "IsCopyOnly", "FirstRecoveryForkID",
    "ForkPointLSN", "RecoveryModel", "DifferentialBaseLSN", "DifferentialBaseGUID", "BackupTypeDescription",
    "BackupSetGUID", "CompressedBackupSize", "containment", "KeyAlgorithm", "EncryptorThumbprint", "EncryptorType")


def headeronly(encrypted: tuple[str, str, str] | None = None) -> str:
    """One RESTORE HEADERONLY result set as sqlcmd -W prints it; `encrypted`: (KeyAlgorithm, EncryptorThumbprint,
    EncryptorType) of a backup taken WITH ENCRYPTION."""
    values = {name: "NULL" for name in HEADERONLY_COLUMNS}
    values.update({"BackupType": "1", "Compressed": "0", "Position": "1", "DeviceType": "2", "ServerName":
                   "WIN-JNMR8KM0U3B\\SQL2016", "DatabaseName": "RestoreTimeClean", "DatabaseVersion": "852",
                   "SoftwareVersionMajor": "13", "SoftwareVersionMinor": "0", "SoftwareVersionBuild": "5081",
                   "RecoveryModel": "FULL", "BackupTypeDescription": "Database", "containment": "0"})
    if encrypted is not None:
        values["KeyAlgorithm"], values["EncryptorThumbprint"], values["EncryptorType"] = encrypted
    return (S.join(HEADERONLY_COLUMNS) + "\n" + S.join("-" * len(c) for c in HEADERONLY_COLUMNS) + "\n"
            + S.join(values[c] for c in HEADERONLY_COLUMNS) + "\n\n(1 rows affected)\n")


class StandInServer:
    """Answers each statement by its first words, as SQL Server would; records what it was sent.

    RESTORE HEADERONLY (one statement per backup set, sent in one batch) answers a result set per
    statement: not encrypted, or as `encrypted` says by the file's name. Files put into it (certificates,
    secrets) are kept in `keys` (and `keys_removed` says whether they were taken out again); a batch reading
    a secret from one of them is run as SQL Server runs it (`executed`, beside `sent`: what restoreproof
    sent, what would stand on sqlcmd's command line) and answered by that."""

    provision_seconds = 12.5

    def __init__(self, answers: dict[str, tuple[int, str]], restored_last_good: str = "2017-06-01T12:50:00",
                 checkdb_records: bool = True, encrypted: dict[str, tuple[str, str, str]] | None = None) -> None:
        self.restored_last_good = restored_last_good  # what the backup carried from the source
        self.checkdb_records = checkdb_records  # a real CHECKDB moves LastGoodCheckDbTime
        self.encrypted = encrypted or {}
        self.keys: dict[str, bytes] = {}
        self.present: dict[str, bytes] = {}   # the files in the target now, by their path there
        self.keys_removed = False
        self.answers = {
            "DBCC TRACEON": (0, "DBCC execution completed. If DBCC printed error messages, contact your system "
                                "administrator.\n"),
            "USE master; CREATE CREDENTIAL": (0, ""),   # sqlcmd prints nothing for it
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
        self.executed: list[str] = []

    def sql(self, statement: str, timeout: float) -> ExecResult:
        self.sent.append(statement)
        sent, statement = statement, as_sql_server_runs_it(statement, self.present)
        self.executed.append(statement)
        if statement.startswith("SELECT CONVERT(varchar(19), SYSDATETIME()"):
            checked = self.checkdb_records and any(s.startswith("DBCC CHECKDB") for s in self.sent)
            last_good = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S") if checked else self.restored_last_good
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
            return ExecResult([], 0, f"server_time{S}last_good\n-----------{S}---------\n{now}{S}{last_good}\n", "", 0.0)
        key = max((k for k in self.answers if statement.startswith(k)), key=len, default=None)
        if key is None and statement.startswith("RESTORE HEADERONLY"):
            files = re.findall(r"RESTORE HEADERONLY FROM (?:DISK|URL) = N'([^']*)'", statement)
            text = "".join(headeronly(self.encrypted.get(PurePosixPath(f).name)) for f in files)
            return ExecResult(["sqlcmd", "-Q", sent], 0, text, "", 0.01)
        if key is None:
            raise AssertionError(f"the stand-in has no answer for: {statement}")
        code, text = self.answers[key]
        return ExecResult(["sqlcmd", "-Q", sent], 1 if code else 0, text, "", 0.01)

    def install_keys(self, files: dict[str, bytes]) -> str:
        self.keys.update(files)
        self.present.update({f"{KEYS_DIR}/{name}": data for name, data in files.items()})
        return KEYS_DIR

    def remove_keys(self) -> None:
        self.present.clear()
        self.keys_removed = True

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


def verify(restore_plan, server: StandInServer, tmp_path: Path, corpus: Path | None = None,  # type: ignore[no-untyped-def]
           settings: Settings | None = None):
    """The pipeline's order: the backup files' pages offline first, then the restore into the stand-in."""
    engine = MssqlEngine(settings or load_settings())
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


# ---- direct from S3: RESTORE ... FROM URL, through the stand-in fed SQL Server's documented messages ----------
# (docs/sqlserver-s3-direct.md: Msg 3201 with the operating-system error the S3 connector gives)

S3_KEY, S3_SECRET = "AKIAURLTESTKEY0001", "url/Secret+Key'0001xyz"
BASE = "s3://s3.example.com:9000/backups/sql/RestoreTimeClean/"
REGION = "N'{\"s3\": {\"region\": \"eu-west-1\"}}'"


def s3_location(region: str | None = "eu-west-1"):  # type: ignore[no-untyped-def]
    from pydantic import SecretStr

    from verification.engines.mssql.s3_url import S3Location

    return S3Location("s3.example.com", 9000, "backups", "sql/RestoreTimeClean/", SecretStr(S3_KEY),
                      SecretStr(S3_SECRET), region=region)


def verify_from_s3(plan_, server: StandInServer, tmp_path: Path, corpus: Path | None = None,  # type: ignore[no-untyped-def]
                   settings: Settings | None = None):
    from verification.engines.mssql.url_target import S3UrlTarget

    engine = MssqlEngine(settings or load_settings())
    evidence = Evidence(tmp_path / "RestoreTimeClean")
    source = LocalSource(corpus or MSSQL_CORPUS / "RestoreTimeClean")
    outcome = RestoreOutcome(checks=engine.check_backup_files(plan_, source, evidence))
    target = S3UrlTarget(server, s3_location())
    outcome = engine.restore_and_check(plan_, target, evidence, outcome)  # type: ignore[arg-type]
    return outcome, decide(plan_, outcome)


def cannot_open(name: str, os_error: str, what: str = "RESTORE DATABASE") -> str:
    return (f"Msg 3201, Level 16, State 2, Server restoreproof, Line 1\nCannot open backup device '{BASE}{name}'. "
            f"Operating system error {os_error}.\nMsg 3013, Level 16, State 1, Server restoreproof, Line 1\n"
            f"{what} is terminating abnormally.\n")


@pytest.fixture
def pitr_plan(mssql_corpus):  # type: ignore[no-untyped-def]
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    return plan(catalog.databases[0], "RestoreTimeClean", datetime(2017, 6, 1, 13, 22, 0, tzinfo=UTC))


def pitr_server(answers: dict[str, tuple[int, str]] | None = None) -> StandInServer:
    return StandInServer({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, restore_history(last_lsn="25000000021000001", stop_at="2017-06-01T13:22:00", finish="2017-06-01T13:24:13")),
        **(answers or {})})


def test_a_chain_restored_from_urls_to_the_planned_point_passes(pitr_plan, tmp_path):
    server = pitr_server()
    outcome, (verdict, reasons) = verify_from_s3(pitr_plan, server, tmp_path)
    assert verdict is Verdict.PASSED, reasons
    # The credential first, in master, named by the source's folder; then the chain, every file by its URL.
    # The keys reach SQL Server as a file it reads itself, put in for that statement only, never in a statement.
    assert server.executed[0] == (
        "USE master; CREATE CREDENTIAL [s3://s3.example.com:9000/backups/sql/RestoreTimeClean] "
        f"WITH IDENTITY = N'S3 Access Key', SECRET = N'{S3_KEY}:url/Secret+Key''0001xyz';")
    assert server.sent[0] == "USE master; " + secret_files.reading(
        f"{KEYS_DIR}/s3-credential.secret", "CREATE CREDENTIAL [s3://s3.example.com:9000/backups/sql/RestoreTimeClean] "
        "WITH IDENTITY = N'S3 Access Key', SECRET = N'", "';")
    assert server.keys == {"s3-credential.secret": f"{S3_KEY}:{S3_SECRET}".encode("utf-16-le")}
    assert server.keys_removed and server.present == {}
    assert server.sent[1] == "DBCC TRACEON (3004, 3605, -1);"
    assert server.sent[2] == f"RESTORE FILELISTONLY FROM URL = N'{BASE}RestoreTimeClean.bak' WITH RESTORE_OPTIONS = {REGION};"
    assert server.sent[3] == (
        f"RESTORE DATABASE [RestoreTimeClean] FROM URL = N'{BASE}RestoreTimeClean.bak' WITH NORECOVERY, STATS = 10, "
        "MOVE N'RestoreTimeClean' TO N'/var/opt/mssql/data/RestoreTimeClean_1_RestoreTimeClean.mdf', MOVE "
        "N'RestoreTimeClean_log' TO N'/var/opt/mssql/data/RestoreTimeClean_2_RestoreTimeClean_log.LDF', "
        f"RESTORE_OPTIONS = {REGION};")
    assert server.sent[4].startswith(f"RESTORE DATABASE [RestoreTimeClean] FROM URL = N'{BASE}RestoreTimeClean2.bak' "
                                     "WITH NORECOVERY")
    assert server.sent[5:7] == [
        f"RESTORE LOG [RestoreTimeClean] FROM URL = N'{BASE}RestoreTimeClean2_1.trn' WITH NORECOVERY, STATS = 10, "
        f"RESTORE_OPTIONS = {REGION};",
        f"RESTORE LOG [RestoreTimeClean] FROM URL = N'{BASE}RestoreTimeClean2_2.trn' WITH NORECOVERY, STATS = 10, "
        f"STOPAT = N'2017-06-01T13:22:00.000', RESTORE_OPTIONS = {REGION};"]
    assert server.sent[7] == "RESTORE DATABASE [RestoreTimeClean] WITH RECOVERY;"
    assert not any("DISK =" in s for s in server.sent)
    assert outcome.achieved == datetime(2017, 6, 1, 13, 22, 0, tzinfo=UTC)
    transcript = (tmp_path / "RestoreTimeClean" / "sqlcmd-transcript.txt").read_text()
    assert transcript.startswith(f"> {server.sent[0]}\n") and f"URL = N'{BASE}RestoreTimeClean2_2.trn'" in transcript


def test_a_striped_set_is_restored_from_one_url_per_stripe(mssql_corpus, tmp_path):
    catalog = scan(LocalSource(mssql_corpus / "history/sql2016-stripe"))
    striped = plan(catalog.databases[0], "RestoreTimeStripe", None)
    server = StandInServer({})
    verify_from_s3(striped, server, tmp_path, mssql_corpus / "history/sql2016-stripe")
    full = next(s for s in server.sent if s.startswith("RESTORE DATABASE [RestoreTimeStripe] FROM"))
    assert full.startswith(f"RESTORE DATABASE [RestoreTimeStripe] FROM URL = N'{BASE}Stripe1/restoretime2.bak', "
                           f"URL = N'{BASE}Stripe2/restoretime2a.bak' WITH NORECOVERY")
    logs = [s for s in server.sent if s.startswith("RESTORE LOG")]
    assert [s.split(" WITH ")[0] for s in logs] == [
        f"RESTORE LOG [RestoreTimeStripe] FROM URL = N'{BASE}Stripe1/restoretime_2{n}.trn', "
        f"URL = N'{BASE}Stripe2/restoretime_2{n}a.trn'" for n in (1, 2, 3)]


def test_a_missing_stripe_is_an_error_before_any_statement(mssql_corpus, tmp_path):
    catalog = scan(LocalSource(mssql_corpus / "history/sql2016-stripe"))
    striped = plan(catalog.databases[0], "RestoreTimeStripe", None)
    dropped = striped.chain.backups.pop(1)   # the full's second stripe: no RESTORE can take the set without it
    assert dropped.family == "2/2"
    server = StandInServer({})
    outcome, (verdict, reasons) = verify_from_s3(striped, server, tmp_path, mssql_corpus / "history/sql2016-stripe")
    assert verdict is Verdict.ERROR and outcome.failures == []
    assert server.sent == []   # not even the credential
    assert reasons[0] == (f"not restored: the backup set of {striped.chain.backups[0].path} is striped over 2 files "
                          f"(media set {dropped.media_set_guid}) but the plan has 1: family 2 missing; SQL Server "
                          "restores a striped set only from all of its stripes at once")


@pytest.mark.parametrize(("os_error", "meaning"), [
    ("50(The request is not supported.)",
     "SQL Server's S3 connector refused to open the object: no credential matches its URL, the URL is malformed, or "
     "the bucket does not exist"),
    ("5(Access is denied.)", "the object store denied access to the object: the keys lack read permission"),
    ("2(The system cannot find the file specified.)", "the backup object is not in the bucket"),
    ("12029(A connection with the server could not be established)",
     "SQL Server could not connect to the S3 endpoint"),
    ("12175(failed to retrieve text for this error. Reason: 15105)",
     "SQL Server does not trust the S3 endpoint's TLS certificate"),
])
def test_what_stops_sql_server_reading_s3_is_an_error_not_a_failed_backup(pitr_plan, tmp_path, os_error, meaning):
    server = pitr_server({"RESTORE DATABASE [RestoreTimeClean] FROM URL": (1, cannot_open("RestoreTimeClean.bak",
                                                                                            os_error))})
    outcome, (verdict, reasons) = verify_from_s3(pitr_plan, server, tmp_path)
    assert verdict is Verdict.ERROR and outcome.failures == []
    assert reasons[0].startswith(meaning)
    assert (f"{BASE}RestoreTimeClean.bak (SQL Server error 3201: Cannot open backup device '{BASE}RestoreTimeClean.bak'. "
            f"Operating system error {os_error}.)") in reasons[0]
    assert not any(s.startswith("RESTORE LOG") for s in server.sent)


def test_a_credential_sql_server_would_not_make_is_an_error_naming_it(pitr_plan, tmp_path):
    # A server that echoes what it was sent (as a syntax error quotes the text near it): masked all the same.
    echo = (f"Msg 102, Level 15, State 1, Server restoreproof, Line 1\nIncorrect syntax near "
            f"'{S3_KEY}:url/Secret+Key''0001xyz'.\n")
    server = pitr_server({"USE master; CREATE CREDENTIAL": (1, echo)})
    outcome, (verdict, reasons) = verify_from_s3(pitr_plan, server, tmp_path)
    assert verdict is Verdict.ERROR and len(server.sent) == 1
    assert reasons[0] == ("the S3 credential s3://s3.example.com:9000/backups/sql/RestoreTimeClean could not be made in "
                          "the target (exit 1): SQL Server reported an error (SQL Server error 102: Incorrect syntax "
                          "near '********:********'.)")
    written = "".join(p.read_text() for p in (tmp_path / "RestoreTimeClean").iterdir())
    assert S3_SECRET not in written + repr(outcome) and S3_KEY not in written + repr(outcome)


def test_a_damaged_backup_read_from_s3_fails(pitr_plan, tmp_path):
    damaged = (f"Msg 3241, Level 16, State 0, Server restoreproof, Line 1\nThe media family on device "
               f"'{BASE}RestoreTimeClean2.bak' is incorrectly formed. SQL Server cannot process this media family.\n"
               "Msg 3013, Level 16, State 1, Server restoreproof, Line 1\nRESTORE DATABASE is terminating abnormally.\n")
    server = pitr_server({f"RESTORE DATABASE [RestoreTimeClean] FROM URL = N'{BASE}RestoreTimeClean2.bak'": (1, damaged)})
    outcome, (verdict, reasons) = verify_from_s3(pitr_plan, server, tmp_path)
    assert verdict is Verdict.FAILED and outcome.errors == []
    assert reasons[0].startswith("the backup media is damaged or incomplete (a family of the media set may be missing) "
                                 f"(SQL Server error 3241: The media family on device '{BASE}RestoreTimeClean2.bak'")


def test_options_the_s3_connector_does_not_take_stop_the_restore_before_any_statement(pitr_plan, tmp_path):
    from verification.engines.mssql.url_target import S3UrlTarget

    server = pitr_server()
    engine = MssqlEngine(load_settings(mssql={"buffer_count": 32}))
    outcome = engine.restore_and_check(pitr_plan, S3UrlTarget(server, s3_location()),  # type: ignore[arg-type]
                                       Evidence(tmp_path / "e"))
    assert server.sent == [] and outcome.errors[0].startswith("not restored: mssql.buffer_count: ")


def test_the_s3_keys_are_in_no_output_of_a_run(pitr_plan, tmp_path, caplog, capsys):
    import logging

    caplog.set_level(logging.DEBUG)
    # SQL Server's error log and every reply quote the keys (as a tool echoing its input would).
    leaky = f"2017-06-01 13:30:00.00 spid51 credential {S3_KEY}:{S3_SECRET} used\n"

    class Leaky(StandInServer):
        def errorlog(self) -> str:
            return super().errorlog() + leaky

        def sql(self, statement: str, timeout: float) -> ExecResult:
            result = super().sql(statement, timeout)
            result.stdout += f"-- {S3_KEY} {S3_SECRET} {S3_SECRET.replace(chr(39), chr(39) * 2)}\n"
            return result

    server = Leaky({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, restore_history(last_lsn="25000000021000001", stop_at="2017-06-01T13:22:00", finish="2017-06-01T13:24:13")),
        "RESTORE LOG [RestoreTimeClean] FROM URL = N's3://s3.example.com:9000/backups/sql/RestoreTimeClean/"
        "RestoreTimeClean2_2.trn'": (1, cannot_open("RestoreTimeClean2_2.trn", "5(Access is denied.)", "RESTORE LOG")
                                     + f"{S3_SECRET}\n")})
    outcome, (verdict, reasons) = verify_from_s3(pitr_plan, server, tmp_path)
    assert verdict is Verdict.ERROR
    assert any(S3_SECRET.replace("'", "''") in s for s in server.executed)   # the server was given the keys ...
    evidence = tmp_path / "RestoreTimeClean"
    everything = ["".join(p.read_text() for p in evidence.iterdir()), " ".join(reasons), repr(outcome), caplog.text,
                  *capsys.readouterr()]
    assert "********:********" in (evidence / "errorlog.txt").read_text()
    for output in everything:   # ... and nothing restoreproof wrote or said has them
        assert S3_SECRET not in output and S3_KEY not in output and "url/Secret+Key" not in output


def test_no_statement_sent_to_sql_server_holds_a_secret(plan_2016, certificate, tmp_path):
    """Every statement stands on sqlcmd's command line in the target (-Q), which any process there can read:
    the S3 keys, a certificate's private-key password and the login's password are in none of them, as they
    are and as a T-SQL literal writes them. SQL Server reads the first two from files put in for the purpose."""
    from tests.unit.engines.mssql.test_certificates import PASSWORD as KEY_PASSWORD

    settings, thumbprint, _ = certificate
    server = server_2016(plan_2016, {HELD: held(thumbprint)},
                         encrypted={"RestoreTimeClean.bak": ("aes_256", thumbprint, "CERTIFICATE")})
    _, (verdict, reasons) = verify_from_s3(plan_2016, server, tmp_path, MSSQL_CORPUS / "restoretimeclean2016",
                                           settings)
    assert verdict is Verdict.PASSED, reasons
    # The whole flow ran, and SQL Server was given both secrets it needs, in what it ran from the files ...
    assert server.executed[0] == ("USE master; CREATE CREDENTIAL [s3://s3.example.com:9000/backups/sql/RestoreTimeClean] "
                                  f"WITH IDENTITY = N'S3 Access Key', SECRET = {literal(f'{S3_KEY}:{S3_SECRET}')};")
    assert any(s.startswith("USE master; CREATE CERTIFICATE") and s.endswith(f"DECRYPTION BY PASSWORD = "
                                                                             f"{literal(KEY_PASSWORD)});")
               for s in server.executed)
    assert any(s.startswith("RESTORE DATABASE [RestoreTimeClean] FROM URL") for s in server.sent)
    assert any(s.startswith("DBCC CHECKDB") for s in server.sent)
    # ... and nothing restoreproof sent holds any of them: SQL Server's command line never does.
    secrets = {name: value for key, value in (("S3 access key", S3_KEY), ("S3 secret key", S3_SECRET),
                                              ("private-key password", KEY_PASSWORD), ("login password", PASSWORD))
               for name, value in ((key, value), (f"{key} as a literal", value.replace("'", "''")))}
    leaks = [(name, statement[:80]) for statement in server.sent for name, value in secrets.items() if value in statement]
    assert leaks == []
    # The files SQL Server read them from were in the target only while it did.
    assert server.present == {} and set(server.keys) == {"s3-credential.secret", "0.cer", "0.pvk", "0.pwd"}


def test_a_statement_holding_a_secret_is_never_sent(pitr_plan, tmp_path, monkeypatch):
    """The second line behind the files: a statement made with a key in it (here the credential as it was
    once made, SECRET = N'<key>:<secret>') is refused before it reaches sqlcmd, the key masked in the error."""
    from verification.engines.mssql import s3_url

    def inline(location, folder):  # type: ignore[no-untyped-def]
        secret = f"{location.access_key_id.get_secret_value()}:{location.secret_access_key.get_secret_value()}"
        return f"USE master; CREATE CREDENTIAL [{location.credential_name}] WITH IDENTITY = N'S3 Access Key', " \
               f"SECRET = {literal(secret)};"

    monkeypatch.setattr(s3_url, "create_credential", inline)
    server = pitr_server()
    with pytest.raises(TargetError) as refused:
        verify_from_s3(pitr_plan, server, tmp_path)
    assert server.sent == [] and server.keys_removed
    assert str(refused.value).startswith("not sent to SQL Server: a statement restoreproof made holds a secret (an S3 "
                                         "key, a certificate's password or the login's), which would stand on sqlcmd's "
                                         "command line: USE master; CREATE CREDENTIAL [s3://s3.example.com:9000/")
    assert "SECRET = N'********:********';" in str(refused.value) and S3_KEY not in str(refused.value)


# ---- direct from S3, from a real endpoint: the objects held to the listing before and after the restore -----

class UrlProvider:
    """Provisions the stand-in behind the S3 wrapper, as MssqlTargetProvider does a container."""

    kind = "docker-mssql"

    def __init__(self, location, server: StandInServer) -> None:  # type: ignore[no-untyped-def]
        self.location, self.server, self.provisioned = location, server, 0

    def provision(self, run_id: str, database: str, repo_host_path: str):  # type: ignore[no-untyped-def]
        from verification.engines.mssql.url_target import S3UrlTarget

        self.provisioned += 1
        return S3UrlTarget(self.server, self.location)


@pytest.fixture
def from_s3(s3, mssql_corpus, tmp_path):  # type: ignore[no-untyped-def]
    """The RestoreTimeClean corpus in a real bucket, planned from there in direct mode."""
    from verification.engines.mssql.s3_url import location_for
    from verification.sources.s3 import S3Source

    s3.upload(mssql_corpus / "RestoreTimeClean", "sql/RestoreTimeClean")
    settings = load_settings(None, state_dir=tmp_path / "state", s3={"restore_mode": "direct"})
    source = S3Source(s3.url("sql/RestoreTimeClean"), settings.s3)
    engine = MssqlEngine(settings)
    (planned,) = engine.plan(source, datetime(2017, 6, 1, 13, 22, 0, tzinfo=UTC)).plans
    where = location_for(source, settings, "docker")
    yield engine, planned, source, where
    source.close()


def test_from_a_real_bucket_the_restore_reads_each_planned_object_by_its_url(s3, from_s3, tmp_path):
    from verification.pipeline import verify_database

    engine, planned, source, where = from_s3
    provider = UrlProvider(where, pitr_server())
    result = verify_database(engine, planned, provider, "r1", source.describe(), Evidence(tmp_path / "ev"),  # type: ignore[arg-type]
                             source=source, watch=source.check_unchanged)
    assert result.verdict is Verdict.PASSED, result.reasons
    base = f"s3://127.0.0.1:{s3.endpoint.port}/{s3.name}/sql/RestoreTimeClean/"
    assert provider.server.executed[0].startswith(f"USE master; CREATE CREDENTIAL [{base.rstrip('/')}] WITH IDENTITY")
    assert [s.split(" WITH ")[0].split(" FROM ")[1] for s in provider.server.sent if s.startswith("RESTORE LOG")] == [
        f"URL = N'{base}RestoreTimeClean2_1.trn'", f"URL = N'{base}RestoreTimeClean2_2.trn'"]
    assert result.target == {"repository": base.rstrip("/")}
    # The keys the source signs with (here the AWS chain's), given to SQL Server and shown nowhere.
    from verification.demo.s3_endpoint import DEMO_ACCESS_KEY, DEMO_SECRET_KEY

    assert provider.server.executed[0].endswith(f"SECRET = N'{DEMO_ACCESS_KEY}:{DEMO_SECRET_KEY}';")
    assert not any(DEMO_SECRET_KEY in s or DEMO_ACCESS_KEY in s for s in provider.server.sent)
    written = "".join(p.read_text() for p in (tmp_path / "ev").rglob("*") if p.is_file())
    assert "sqlcmd-transcript.txt" in result.evidence and "backup-files.sha256" in result.evidence
    for output in (written, " ".join(result.reasons), repr(result)):
        assert DEMO_SECRET_KEY not in output and f"{DEMO_ACCESS_KEY}:" not in output


def test_an_object_rewritten_before_the_restore_starts_no_target(s3, from_s3, tmp_path):
    from verification.pipeline import verify_database

    engine, planned, source, where = from_s3
    s3.put("sql/RestoreTimeClean/RestoreTimeClean2_1.trn", b"rewritten since the plan")
    provider = UrlProvider(where, pitr_server())
    result = verify_database(engine, planned, provider, "r1", source.describe(), Evidence(tmp_path / "ev"),  # type: ignore[arg-type]
                             source=source, watch=source.check_unchanged)
    assert result.verdict is Verdict.ERROR and provider.provisioned == 0 and provider.server.sent == []
    assert result.reasons[0].startswith(f"not restored: 1 object(s) of {s3.url('sql/RestoreTimeClean')} changed since "
                                        f"the source was listed: {s3.url('sql/RestoreTimeClean')}/RestoreTimeClean2_1.trn")


def test_an_object_rewritten_while_sql_server_read_it_is_no_verdict(s3, from_s3, tmp_path):
    from verification.pipeline import verify_database

    engine, planned, source, where = from_s3

    class Rewriting(StandInServer):
        def sql(self, statement: str, timeout: float) -> ExecResult:
            if statement.startswith("RESTORE LOG"):   # a backup job wrote the object again meanwhile
                s3.put("sql/RestoreTimeClean/RestoreTimeClean2_2.trn", b"rewritten while read")
            return super().sql(statement, timeout)

    server = Rewriting({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, restore_history(last_lsn="25000000021000001", stop_at="2017-06-01T13:22:00", finish="2017-06-01T13:24:13"))})
    provider = UrlProvider(where, server)
    result = verify_database(engine, planned, provider, "r1", source.describe(), Evidence(tmp_path / "ev"),  # type: ignore[arg-type]
                             source=source, watch=source.check_unchanged)
    assert result.verdict is Verdict.ERROR and provider.provisioned == 1
    assert result.reasons[0].startswith(f"during the restore, 1 object(s) of {s3.url('sql/RestoreTimeClean')} changed "
                                        f"since the source was listed: {s3.url('sql/RestoreTimeClean')}/"
                                        "RestoreTimeClean2_2.trn")
    assert result.reasons[1].startswith("not taken as a verdict (passed): ")


def test_direct_mode_is_refused_before_anything_starts_naming_the_setting(from_s3):
    from verification.errors import ConfigError

    engine, planned, source, _ = from_s3
    with pytest.raises(ConfigError, match=r"^s3.restore_mode direct restores into a SQL Server container only"):
        engine.target_provider("local", [planned], source)
    refusing = MssqlEngine(load_settings(None, s3={"restore_mode": "direct"}, mssql={"buffer_count": 8}))
    with pytest.raises(ConfigError, match=r"^mssql.buffer_count: "):
        refusing.target_provider("docker", [planned], source)


def test_direct_mode_gives_a_2022_target_reading_the_sources_location(from_s3, monkeypatch, tmp_path):
    from types import SimpleNamespace

    from verification.engines.mssql import target as target_module

    _, planned, source, where = from_s3
    monkeypatch.setattr(target_module, "docker_client", lambda: SimpleNamespace(images=SimpleNamespace(get=str)))
    images = {869: "mssql:2017", 957: "mssql:2022"}
    engine = MssqlEngine(load_settings(None, state_dir=tmp_path / "state", s3={"restore_mode": "direct"},
                                       mssql={"images": images}))
    assert planned.chain.backups[0].database_version == 661   # a 2008 R2 backup, which the 2017 image restores ...
    assert MssqlEngine(load_settings(None, mssql={"images": images})).target_provider(  # type: ignore[attr-defined]
        "docker", [planned]).image == "mssql:2017"
    provider = engine.target_provider("docker", [planned], source)
    assert provider.image == "mssql:2022"  # type: ignore[attr-defined]   # ... but only 2022 reads S3
    assert provider.s3 == where and provider.state_dir == tmp_path / "state"  # type: ignore[attr-defined]


# -- encrypted backups and TDE: the certificate from the configuration, created in the target's master ------

# Message 33111 as SQL Server prints it (a real capture, with 3013 after it, as FILELISTONLY ends).
TDE_THUMB = "0x192834B1A8B932393B9101D24B8F759A49BB1397"
ERROR_33111 = (f"Msg 33111, Level 16, State 3, Server restoreproof, Line 1\nCannot find server certificate with "
               f"thumbprint '{TDE_THUMB}'.\nMsg 3013, Level 16, State 1, Server restoreproof, Line 1\n"
               "RESTORE FILELIST is terminating abnormally.\n")
MASTER_KEY, CREATE_CERTIFICATE = "USE master; IF NOT EXISTS", "USE master; CREATE CERTIFICATE"
HELD = "SET NOCOUNT ON; SELECT name, CONVERT(varchar(130), thumbprint, 1)"


def held(thumbprint: str, private_key: str = "MK") -> tuple[int, str]:
    """master.sys.certificates as sqlcmd prints the certificate made (MK: its private key, under the master key)."""
    return 0, (f"name{S}thumbprint{S}pvt_key_encryption_type\n----{S}----------{S}-----------------------\n"
               f"BackupCert{S}{thumbprint}{S}{private_key}\n\n(1 rows affected)\n")


@pytest.fixture
def plan_2016(mssql_corpus):  # type: ignore[no-untyped-def]
    """A chain SQL Server 2016 wrote: full, differential, three logs (backup encryption exists since 2014)."""
    (db,) = scan(LocalSource(mssql_corpus / "restoretimeclean2016")).databases
    return plan(db, "RestoreTimeClean", None)


@pytest.fixture
def certificate(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A configured certificate: (settings, its thumbprint, its file)."""
    from tests.unit.engines.mssql.test_certificates import make_certificate, settings_with

    cer, pvk, thumbprint = make_certificate(tmp_path / "keys")
    return settings_with(monkeypatch, BackupCert=(cer, pvk)), thumbprint, cer


def server_2016(plan_, answers: dict[str, tuple[int, str]] | None = None, **kwargs) -> StandInServer:  # type: ignore[no-untyped-def]
    last = plan_.chain.backups[-1]
    return StandInServer({"SET NOCOUNT ON; SELECT TOP (1) rh.restore_history_id": (
        0, restore_history(last_lsn=last.last_lsn, finish=last.finish.strftime("%Y-%m-%dT%H:%M:%S"))),
        MASTER_KEY: (0, ""), CREATE_CERTIFICATE: (0, ""), **(answers or {})}, **kwargs)


def everything_written(tmp_path: Path, outcome, reasons, server) -> str:  # type: ignore[no-untyped-def]
    evidence = tmp_path / "RestoreTimeClean"
    return ("".join(p.read_text() for p in evidence.rglob("*") if p.is_file()) + " ".join(reasons) + repr(outcome)
            + " ".join(server.sent))


def test_an_encrypted_backup_restores_with_the_configured_certificate_made_in_master(plan_2016, certificate,
                                                                                     tmp_path):
    from tests.unit.engines.mssql.test_certificates import PASSWORD
    from verification.reports.json_report import chain_entry

    settings, thumbprint, cer = certificate
    server = server_2016(plan_2016, {HELD: held(thumbprint)},
                         encrypted={"RestoreTimeClean.bak": ("aes_256", thumbprint.lower(), "CERTIFICATE")})
    outcome, (verdict, reasons) = verify(plan_2016, server, tmp_path, MSSQL_CORPUS / "restoretimeclean2016", settings)
    assert verdict is Verdict.PASSED, reasons
    # Every set asked for its encryption in one batch, before anything else; then the certificate, then the chain.
    assert server.sent[1] == " ".join(f"RESTORE HEADERONLY FROM DISK = N'/backups/{b.path}';"
                                      for b in plan_2016.chain.backups)
    assert server.sent[2].startswith("USE master; IF NOT EXISTS (SELECT 1 FROM sys.symmetric_keys WHERE name = "
                                     "N'##MS_DatabaseMasterKey##') BEGIN")
    assert server.sent[3] == (
        "USE master; DECLARE @secret nvarchar(max) = (SELECT CONVERT(nvarchar(max), BulkColumn) FROM OPENROWSET(BULK "
        "N'/var/opt/mssql/restoreproof-keys/0.pwd', SINGLE_BLOB) AS secret); DECLARE @statement nvarchar(max) = "
        "N'CREATE CERTIFICATE [BackupCert] FROM FILE = N''/var/opt/mssql/restoreproof-keys/0.cer'' WITH PRIVATE KEY "
        "(FILE = N''/var/opt/mssql/restoreproof-keys/0.pvk'', DECRYPTION BY PASSWORD = N''' + REPLACE(@secret, "
        "N'''', N'''''') + N''');'; SET @secret = NULL; EXEC (@statement);")
    # What SQL Server runs from it: the password read from its file, quoted as a literal.
    assert server.executed[3] == (
        "USE master; CREATE CERTIFICATE [BackupCert] FROM FILE = N'/var/opt/mssql/restoreproof-keys/0.cer' WITH "
        "PRIVATE KEY (FILE = N'/var/opt/mssql/restoreproof-keys/0.pvk', DECRYPTION BY PASSWORD = "
        f"{literal(PASSWORD)});")
    assert server.sent[4].startswith(HELD) and server.sent[5].startswith("RESTORE FILELISTONLY")
    assert server.sent[6].startswith("RESTORE DATABASE [RestoreTimeClean] FROM DISK = N'/backups/RestoreTimeClean.bak'")
    # The files went in through the target's upload, the password as SQL Server reads it back; then out again.
    assert server.keys == {"0.cer": cer.read_bytes(), "0.pvk": cer.with_suffix(".pvk").read_bytes(),
                           "0.pwd": PASSWORD.encode("utf-16-le")} and server.keys_removed
    assert PASSWORD not in everything_written(tmp_path, outcome, reasons, server)
    # What the target said replaces the plan's "unknown" in the report's chain.
    entries = chain_entry(plan_2016.chain).model_dump(mode="json")["backups"]
    assert entries[0]["encryption"] == {
        "state": "encrypted", "algorithm": "aes_256", "encryptor_type": "CERTIFICATE",
        "encryptor_thumbprint": thumbprint, "tde_thumbprint": None,
        "basis": (f"RESTORE HEADERONLY of RestoreTimeClean.bak: KeyAlgorithm aes_256, EncryptorType CERTIFICATE, "
                  f"EncryptorThumbprint {thumbprint}; RESTORE FILELISTONLY of RestoreTimeClean.bak has no "
                  "TDEThumbprint column")}
    assert entries[2]["encryption"]["state"] == "unknown"   # a log: HEADERONLY names no encryptor, TDE still open
    assert entries[2]["encryption"]["basis"].endswith("KeyAlgorithm NULL, no encryptor; still unknown: TDE")
    # The full's pages, read offline as plain, are no verification of an encrypted backup: taken back, said.
    pages = next(c for c in outcome.checks if c.name == "page_verification")
    assert pages.status is CheckStatus.PASSED and list(pages.details["per_file"]) == ["RestoreTimeClean2.bak"]
    assert pages.details["not_verifiable_offline"][0].startswith(
        "RestoreTimeClean.bak: not verifiable offline: encrypted (RESTORE HEADERONLY of RestoreTimeClean.bak: ")
    assert "not verifiable offline: encrypted" in (tmp_path / "RestoreTimeClean" / "page-verification.txt").read_text()


def test_a_missing_certificate_is_an_error_naming_the_thumbprint_before_any_restore(plan_2016, tmp_path):
    needed = "0xA70B9D1DC7B5ECFF4B84205340987FA692EA2889"
    server = server_2016(plan_2016, encrypted={"RestoreTimeClean.bak": ("aes_256", needed, "CERTIFICATE")})
    outcome, (verdict, reasons) = verify(plan_2016, server, tmp_path, MSSQL_CORPUS / "restoretimeclean2016")
    assert verdict is Verdict.ERROR and outcome.failures == []   # a certificate not given says nothing of the backup
    assert reasons[0] == (
        f"not restored: RestoreTimeClean.bak (aes_256 backup) needs the certificate with thumbprint {needed}: no "
        f"certificate with thumbprint {needed} is configured (mssql.certificates; configured: none): give the "
        "certificate and its private key that the source server used (BACKUP CERTIFICATE ... WITH PRIVATE KEY)")
    assert [s.split(" ")[0:2] for s in server.sent] == [["DBCC", "TRACEON"], ["RESTORE", "HEADERONLY"]]


def test_a_certificate_other_than_the_one_needed_is_named_beside_the_one_needed(plan_2016, certificate, tmp_path):
    settings, thumbprint, _ = certificate
    needed = "0xA70B9D1DC7B5ECFF4B84205340987FA692EA2889"
    server = server_2016(plan_2016, {HELD: held(thumbprint)},
                         encrypted={"RestoreTimeClean2_2.trn": ("aes_128", needed, "CERTIFICATE")})
    _, (verdict, reasons) = verify(plan_2016, server, tmp_path, MSSQL_CORPUS / "restoretimeclean2016", settings)
    assert verdict is Verdict.ERROR
    assert reasons[0].startswith(f"not restored: RestoreTimeClean2_2.trn (aes_128 backup) needs the certificate with "
                                 f"thumbprint {needed}: no certificate with thumbprint {needed} is configured "
                                 f"(mssql.certificates; configured: {thumbprint} (BackupCert))")
    assert not any(s.startswith(("RESTORE DATABASE", "RESTORE LOG", "RESTORE FILELISTONLY")) for s in server.sent)


@pytest.mark.parametrize(("number", "text", "meaning"), [
    (15465, "The private key password is invalid.", "the certificate's private key password is wrong"),
    (15466, "An error occurred during decryption.", "the certificate's private key could not be decrypted: the "
                                                    "password given for it is wrong"),
    (15474, "Invalid private key. The private key does not match the public key of the certificate.",
     "the private key file does not belong to the certificate"),
])
def test_a_wrong_private_key_password_is_an_error_naming_the_certificate(plan_2016, certificate, tmp_path, number,
                                                                         text, meaning):
    from tests.unit.engines.mssql.test_certificates import PASSWORD

    settings, thumbprint, cer = certificate
    server = server_2016(plan_2016, {CREATE_CERTIFICATE: (1, f"Msg {number}, Level 16, State 1, Server restoreproof, "
                                                             f"Line 1\n{text}\n")})
    outcome, (verdict, reasons) = verify(plan_2016, server, tmp_path, MSSQL_CORPUS / "restoretimeclean2016", settings)
    assert verdict is Verdict.ERROR and outcome.failures == []
    assert reasons[0].startswith(f"certificate BackupCert (thumbprint {thumbprint}, {cer}) could not be created in the "
                                 f"target (exit 1): {meaning}")
    assert reasons[0].endswith(f"(SQL Server error {number}: {text})")
    assert server.keys_removed and not any(s.startswith("RESTORE DATABASE") for s in server.sent)
    assert PASSWORD not in everything_written(tmp_path, outcome, reasons, server)


def test_a_certificate_made_without_its_private_key_is_no_certificate_for_a_restore(plan_2016, certificate, tmp_path):
    settings, thumbprint, _ = certificate
    server = server_2016(plan_2016, {HELD: held(thumbprint, private_key="NA")})
    _, (verdict, reasons) = verify(plan_2016, server, tmp_path, MSSQL_CORPUS / "restoretimeclean2016", settings)
    assert verdict is Verdict.ERROR
    assert reasons[0] == (f"certificate BackupCert (thumbprint {thumbprint}) is in the target without its private key: "
                          "it cannot decrypt a backup")


def test_a_tde_database_without_its_certificate_is_an_error_naming_the_thumbprint(restore_plan, tmp_path):
    server = StandInServer({"RESTORE FILELISTONLY": (1, ERROR_33111)})
    outcome, (verdict, reasons) = verify(restore_plan, server, tmp_path)
    assert verdict is Verdict.ERROR and outcome.failures == []
    assert reasons[0] == (
        f"the backup is encrypted (BACKUP ... WITH ENCRYPTION or TDE) and the target holds no certificate with "
        f"thumbprint {TDE_THUMB}: configure that certificate and its private key in mssql.certificates (SQL Server "
        f"error 33111: Cannot find server certificate with thumbprint '{TDE_THUMB}'.)")
    # A 2008 R2 backup cannot be encrypted WITH ENCRYPTION: no HEADERONLY, and the thumbprint is its TDE's.
    assert not any(s.startswith("RESTORE HEADERONLY") for s in server.sent)
    full = restore_plan.chain.backups[0].encryption
    assert (full.state, full.tde_thumbprint, full.encryptor_thumbprint) == ("encrypted", TDE_THUMB, None)
    assert full.basis.endswith(f"SQL Server's message 33111 names certificate {TDE_THUMB}")


def test_a_tde_database_restores_with_its_certificate_and_its_pages_are_not_judged_offline(mssql_copy, certificate,
                                                                                           tmp_path):
    """TDE leaves a page's header plain and encrypts the rest: such pages, with a checksum over what is stored,
    are made here from a copy of the real full backup; the offline reading of them is taken back once the
    target's FILELISTONLY names the database's TDE certificate."""
    import os

    from verification.engines.mssql.pages import CHECKSUM_AT, PAGE, PAGE_HEADER, locate_data_streams, page_checksum
    from verification.sources.base import SourceFile

    settings, thumbprint, _ = certificate
    root = mssql_copy("RestoreTimeClean")
    full = root / "RestoreTimeClean" / "RestoreTimeClean.bak"
    data = bytearray(full.read_bytes())
    for stream in locate_data_streams(SourceFile(LocalSource(full.parent), full.name)):
        for at in range(stream.offset, stream.offset + stream.pages * PAGE, PAGE):
            if data[at] == 1:   # a formatted page: its body as ciphertext, its checksum over that
                data[at + PAGE_HEADER:at + PAGE] = os.urandom(PAGE - PAGE_HEADER)
                data[at + CHECKSUM_AT:at + CHECKSUM_AT + 4] = page_checksum(bytes(data[at:at + PAGE])).to_bytes(4, "little")
    full.write_bytes(data)
    (db,) = scan(LocalSource(root / "RestoreTimeClean")).databases
    planned = plan(db, "RestoreTimeClean", None)
    # Offline, nothing tells these pages from plain ones: their checksums verify (what a server would check).
    (offline,) = MssqlEngine(settings).check_backup_files(planned, LocalSource(root / "RestoreTimeClean"),
                                                         Evidence(tmp_path / "offline"))
    assert offline.details["per_file"]["RestoreTimeClean.bak"]["checksums_verified"] > 0
    tde_filelist = (FILELIST.replace("Size\n", f"Size{S}TDEThumbprint\n").replace("----\n", f"----{S}-------------\n")
                    .replace("2359296\n", f"2359296{S}{thumbprint}\n").replace("589824\n", f"589824{S}{thumbprint}\n"))
    server = StandInServer({"RESTORE FILELISTONLY": (0, tde_filelist), MASTER_KEY: (0, ""), CREATE_CERTIFICATE: (0, ""),
                            HELD: held(thumbprint)})
    outcome, (verdict, reasons) = verify(planned, server, tmp_path, root / "RestoreTimeClean", settings)
    assert verdict is Verdict.PASSED, reasons
    encryption = planned.chain.backups[0].encryption
    assert (encryption.state, encryption.tde_thumbprint) == ("encrypted", thumbprint)
    assert encryption.basis == ("written by SQL Server 10.50, before backup encryption (SQL Server 2014, 12.0); "
                                f"RESTORE FILELISTONLY of RestoreTimeClean.bak: TDEThumbprint {thumbprint}")
    pages = next(c for c in outcome.checks if c.name == "page_verification")
    assert pages.status is CheckStatus.PASSED and list(pages.details["per_file"]) == ["RestoreTimeClean2.bak"]
    (taken,) = pages.details["not_verifiable_offline"]
    assert taken.startswith("RestoreTimeClean.bak: not verifiable offline: encrypted (written by SQL Server 10.50")
    assert taken.endswith("finding(s)) is withdrawn")
    assert pages.details["checksums_verified"] == pages.details["per_file"]["RestoreTimeClean2.bak"][
        "checksums_verified"]   # no checksum over encrypted bytes is counted as verified


def test_a_run_whose_plan_needs_a_certificate_not_configured_stops_before_any_target(mssql_corpus, certificate,
                                                                                     monkeypatch):
    """Where the plan knows offline what a backup needs (the offline reader does not, yet: its `offline` is
    replaced here), a run that would restore refuses to start (exit 2), naming the thumbprint; a plan alone,
    or an offline run, still lists it."""
    from verification.engines.mssql import mtf
    from verification.errors import ConfigError
    from verification.model import BackupEncryption, EncryptionState

    settings, thumbprint, _ = certificate
    needed = "0xA70B9D1DC7B5ECFF4B84205340987FA692EA2889"
    monkeypatch.setattr(mtf, "offline", lambda version: BackupEncryption(
        EncryptionState.ENCRYPTED, "said by the header", "aes_256", "CERTIFICATE", needed))
    settings = settings.model_copy(update={"mssql": settings.mssql.model_copy(update={"header_cache": "off"})})
    source = LocalSource(mssql_corpus / "restoretimeclean2016")
    MssqlEngine(settings).plan(source, None)  # planning alone restores nothing: listed, not refused
    offline = MssqlEngine(settings)
    offline.check_settings(source, "offline")
    offline.plan(source, None)
    engine = MssqlEngine(settings)
    engine.check_settings(source, "docker")
    with pytest.raises(ConfigError) as refused:
        engine.plan(source, None)
    assert str(refused.value).startswith(f"encrypted SQL Server backups: no certificate with thumbprint {needed} is "
                                         f"configured (mssql.certificates; configured: {thumbprint} (BackupCert))")
    assert str(refused.value).endswith("needed by RestoreTimeClean: RestoreTimeClean.bak, RestoreTimeClean2.bak, "
                                       "RestoreTimeClean2_1.trn, RestoreTimeClean2_2.trn, RestoreTimeClean2_3.trn")


def test_a_certificate_file_that_is_not_there_is_refused_before_a_run_is_recorded(mssql_corpus, certificate):
    from verification.errors import ConfigError

    settings, _, cer = certificate
    cer.unlink()
    with pytest.raises(ConfigError, match=f"mssql.certificates.BackupCert.certificate: {cer} does not exist"):
        MssqlEngine(settings).check_settings(LocalSource(mssql_corpus / "RestoreTimeClean"), "docker")
    MssqlEngine(settings).check_settings(LocalSource(mssql_corpus / "RestoreTimeClean"), "offline")  # reads none


def test_the_report_names_the_sql_server_version_that_wrote_each_chain(mssql_corpus: Path) -> None:
    planned = MssqlEngine(Settings()).plan(LocalSource(mssql_corpus), None)
    said = {p.database: p.written_by for p in planned.plans}
    assert said["WIN-JNMR8KM0U3B\\SQL2016/RestoreTimeClean"] == {"SQL Server": "13.0.5081 (SQL Server 2016)"}
    assert said["StopAt"] == {"SQL Server": "10.50.4000 (SQL Server 2008 R2)"}
    assert all(p.written_by == {} for p in planned.plans if not p.chain.backups)


def test_each_database_is_identified_by_its_backups_family_guid(mssql_corpus: Path) -> None:
    from dataclasses import replace

    from verification.engines.mssql.catalog import system_identifier

    planned = MssqlEngine(Settings()).plan(LocalSource(mssql_corpus), None)
    found = [p.system_id for p in planned.plans if p.chain.backups]
    assert found and all(s is not None for s in found)
    assert {s.basis for s in found if s is not None} == {"FamilyGUID of its backup headers"}
    assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", s.value)
               for s in found if s is not None)
    # Where the headers carry none (or disagree): the server, name and creation date the catalog groups by.
    db = scan(LocalSource(mssql_corpus), []).databases[0]
    sets = [replace(m, families={n: replace(h, family_guid=None) for n, h in m.families.items()}) for m in db.sets]
    bare = replace(db, sets=sets)
    said = system_identifier(bare)
    assert said is not None and said.value == f"{db.server}/{db.database} created {db.created.isoformat()}"
    assert said.basis == "server name, database name and creation date of its backup headers"
    assert system_identifier(replace(bare, created=None)) is None
    if len(sets) > 1:
        mixed = [replace(m, families={n: replace(h, family_guid=f"guid-{i}") for n, h in m.families.items()})
                 for i, m in enumerate(sets)]
        assert system_identifier(replace(db, sets=mixed)) == said


def test_a_chain_planned_from_one_file_of_appended_sets_restores_each_set_by_its_position(mssql_corpus, tmp_path):
    """BACKUP ... WITH NOINIT: the full, its differential and three logs in one file (built from the real
    ones); every statement about a set after the first says WITH FILE = n, the first's stay as ever."""
    from tests.unit.engines.mssql.test_appended_sets import CHAIN, appended

    root = appended(mssql_corpus / "RestoreTimeClean", CHAIN, tmp_path / "source")
    (db,) = scan(LocalSource(root)).databases
    server = StandInServer({})
    outcome, (verdict, reasons) = verify(plan(db, "RestoreTimeClean", None), server, tmp_path, corpus=root)
    assert verdict is Verdict.PASSED, reasons
    disk = "FROM DISK = N'/backups/appended.bak'"
    assert server.sent[1] == f"RESTORE FILELISTONLY {disk};"
    assert server.sent[2].startswith(f"RESTORE DATABASE [RestoreTimeClean] {disk} WITH NORECOVERY, STATS = 10, MOVE ")
    assert server.sent[3].startswith(f"RESTORE DATABASE [RestoreTimeClean] {disk} WITH FILE = 2, NORECOVERY, "
                                     "STATS = 10, MOVE ")
    assert server.sent[4:7] == [f"RESTORE LOG [RestoreTimeClean] {disk} WITH FILE = {n}, NORECOVERY, STATS = 10;"
                                for n in (3, 4, 5)]
    pages = outcome.checks[0]
    assert list(pages.details["per_file"]) == ["appended.bak (set 1)", "appended.bak (set 2)"]
    # What is said of the restored point names the set of the file, as the plan does.
    assert any(p.endswith("the planned chain's last LastLSN (appended.bak (set 5))") for p in outcome.proofs), \
        outcome.proofs


def test_headeronly_of_a_set_after_the_first_asks_for_it_and_takes_its_row(plan_2016, tmp_path):
    from dataclasses import replace

    from verification.engines.mssql.engine import _set_row

    rows: list[dict[str, str | None]] = [{"Position": "1"}, {"Position": "2"}]  # a server answering every set
    assert _set_row(rows, 2)["Position"] == "2" and _set_row(rows, None)["Position"] == "1"
    assert _set_row(rows, 1) is rows[0]
    backups = [replace(b, position=2) for b in plan_2016.chain.backups]
    server = StandInServer({})
    verify(replace(plan_2016, chain=replace(plan_2016.chain, backups=backups)), server, tmp_path,
           corpus=MSSQL_CORPUS / "restoretimeclean2016")
    asked = next(s for s in server.sent if s.startswith("RESTORE HEADERONLY"))
    assert "WITH FILE = 2;" in asked
