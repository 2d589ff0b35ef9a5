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
