"""Per-phase work of a SQL Server plan, from the real corpus's headers."""

from __future__ import annotations

from verification.config import Settings
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan
from verification.engines.mssql.work import phase_work
from verification.model import PhaseName, PhaseWork
from verification.sources import LocalSource


def test_zeroing_is_the_fulls_allocated_files(mssql_corpus):
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    works = phase_work(plan(catalog.databases[0], "RestoreTimeClean", None), Settings())
    assert [w.phase for w in works][:3] == [PhaseName.PROVISION, PhaseName.ZEROING, PhaseName.TRANSFER]
    zero = works[1]
    assert (zero.bytes_read, zero.bytes_written, zero.files) == (None, 2359296 + 589824, 2)
    assert zero.note == ("allocated database files created and zeroed before the copy, 2.8 MiB in all: "
                         "log RestoreTimeClean_log (0.6 MiB), always zeroed; data RestoreTimeClean (2.2 MiB), "
                         "zeroed unless instant file initialisation applies")


def test_a_database_of_three_files_counts_them_all(mssql_corpus):
    # db1 has two 1 GiB data files and a log; its differentials carry the list (its full is not in the corpus).
    catalog = scan(LocalSource(mssql_corpus / "sql2008-backups/db1"))
    (db,) = catalog.databases
    header = db.of_type("diff")[0].header
    assert sum(f.size_bytes for f in header.files) == 2 * 2**30 + 3538944
    assert phase_work(plan(db, "db1", None), Settings())[1].phase == PhaseName.TRANSFER  # no full: no containers planned


def test_the_data_checks_are_predicted_between_recovery_and_checkdb_unless_turned_off(mssql_corpus):
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    planned = plan(catalog.databases[0], "RestoreTimeClean", None)
    settings = Settings.model_validate({"checks": {
        "expectations": {"RestoreTimeClean": [{"table": "dbo.t", "expect": [{"type": "expect_table_row_count_to_be_between"}]}]},
        "sql": [{"name": "n", "query": "select 1", "expect": 1}]}})
    works = phase_work(planned, settings)
    assert [w.phase for w in works][-3:] == [PhaseName.RECOVERY_END, PhaseName.DATA_CHECKS, PhaseName.INTEGRITY_CHECK]
    assert works[-2] == PhaseWork(PhaseName.DATA_CHECKS, note="Great Expectations: 2 configured suites, baselines "
                                                              "and freshness of every table")
    settings.checks.enabled = False
    assert PhaseName.DATA_CHECKS not in [w.phase for w in phase_work(planned, settings)]
