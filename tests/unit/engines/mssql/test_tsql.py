from datetime import datetime

from verification.engines.mssql import tsql


def test_moves_take_every_file_into_the_data_folder():
    files = [
        {"LogicalName": "RestoreTimeClean", "Type": "D",
         "PhysicalName": r"C:\Program Files\Microsoft SQL Server\MSSQL10_50.MSSQLSERVER\MSSQL\DATA\RestoreTimeClean.mdf"},
        {"LogicalName": "RestoreTimeClean_log", "Type": "L",
         "PhysicalName": r"C:\Program Files\Microsoft SQL Server\MSSQL10_50.MSSQLSERVER\MSSQL\DATA\RestoreTimeClean_log.LDF"},
    ]
    moves = tsql.moves_for("RestoreTimeClean", files)
    assert moves == [
        tsql.FileMove("RestoreTimeClean", "/var/opt/mssql/data/RestoreTimeClean_1_RestoreTimeClean.mdf"),
        tsql.FileMove("RestoreTimeClean_log", "/var/opt/mssql/data/RestoreTimeClean_2_RestoreTimeClean_log.LDF"),
    ]


def test_names_that_clean_up_alike_stay_apart():
    files = [{"LogicalName": "a b", "FileID": "1", "Type": "D", "PhysicalName": r"C:\x\a b.mdf"},
             {"LogicalName": "a_b", "FileID": "3", "Type": "D", "PhysicalName": r"C:\x\a_b.ndf"}]
    first, second = tsql.moves_for("db", files)
    assert first.target != second.target
    assert (first.target, second.target) == ("/var/opt/mssql/data/db_1_a_b.mdf", "/var/opt/mssql/data/db_3_a_b.ndf")


def test_restore_database_with_all_stripes_moves_and_options():
    sql = tsql.restore_database(
        "Restore]Time", ["Stripe1/a.bak", "Stripe2/it's.bak"], [tsql.FileMove("d", "/var/opt/mssql/data/x.mdf")],
        tsql.RestoreOptions(buffer_count=64, max_transfer_size=4194304), checksum=True)
    assert sql == ("RESTORE DATABASE [Restore]]Time] FROM DISK = N'/backups/Stripe1/a.bak', "
                   "DISK = N'/backups/Stripe2/it''s.bak' WITH NORECOVERY, STATS = 10, CHECKSUM, "
                   "MOVE N'd' TO N'/var/opt/mssql/data/x.mdf', BUFFERCOUNT = 64, MAXTRANSFERSIZE = 4194304;")


def test_no_checksum_clause_for_backups_without_checksums():
    sql = tsql.restore_database("db", ["a.bak"], [], tsql.RestoreOptions(), checksum=False)
    assert "CHECKSUM" not in sql


def test_terminal_log_with_stopat_and_recovery():
    sql = tsql.restore_log("StopAt", ["StopAt_21.trn"], tsql.RestoreOptions(), checksum=False,
                           stop_at=datetime(2020, 5, 12, 13, 31, 0, 250000))
    assert sql == ("RESTORE LOG [StopAt] FROM DISK = N'/backups/StopAt_21.trn' WITH NORECOVERY, STATS = 10, "
                   "STOPAT = N'2020-05-12T13:31:00.250';")
    assert tsql.recover("StopAt") == "RESTORE DATABASE [StopAt] WITH RECOVERY;"


def test_checkdb_options():
    assert tsql.checkdb("db'1", ["DATA_PURITY"]) == (
        "DBCC CHECKDB (N'db''1') WITH NO_INFOMSGS, ALL_ERRORMSGS, TABLERESULTS, DATA_PURITY;")


def test_a_set_after_the_first_of_its_file_is_named_with_file_and_the_first_is_not():
    """BACKUP ... WITH NOINIT appends sets to one file: RESTORE reads set n only WITH FILE = n (without it,
    the first); the first set's statements stay as they always were."""
    options = tsql.RestoreOptions()
    assert tsql.restore_database("db", ["all.bak"], [], options, checksum=False, position=2) == (
        "RESTORE DATABASE [db] FROM DISK = N'/backups/all.bak' WITH FILE = 2, NORECOVERY, STATS = 10;")
    assert tsql.restore_log("db", ["all.bak"], options, checksum=True, position=3,
                            stop_at=datetime(2020, 5, 12, 13, 31)) == (
        "RESTORE LOG [db] FROM DISK = N'/backups/all.bak' WITH FILE = 3, NORECOVERY, STATS = 10, CHECKSUM, "
        "STOPAT = N'2020-05-12T13:31:00.000';")
    assert tsql.filelist(["all.bak"], position=2) == "RESTORE FILELISTONLY FROM DISK = N'/backups/all.bak' WITH FILE = 2;"
    assert tsql.headeronly(["all.bak"], position=4) == "RESTORE HEADERONLY FROM DISK = N'/backups/all.bak' WITH FILE = 4;"
    for first in (1, None):
        assert tsql.restore_database("db", ["a.bak"], [], options, checksum=False, position=first) == (
            tsql.restore_database("db", ["a.bak"], [], options, checksum=False))
        assert tsql.filelist(["a.bak"], position=first) == "RESTORE FILELISTONLY FROM DISK = N'/backups/a.bak';"
        assert tsql.headeronly(["a.bak"], position=first) == "RESTORE HEADERONLY FROM DISK = N'/backups/a.bak';"
