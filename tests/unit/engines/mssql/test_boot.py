"""The boot page (1:9) of the real SQL Server full and differential backups (../shared/testdata), read
offline: versions, name, compatibility level, creation date and the last clean CHECKDB the source recorded."""

from __future__ import annotations

import csv
import struct
from datetime import datetime

import pytest

from tests.conftest import MSSQL_CORPUS
from verification.engines.mssql.boot import CHECKDB, FIELDS, BootPage, decode_datetime, read_boot_page
from verification.engines.mssql.mtf import MtfError, NeedsServerHeaderOnly, read_backup_header
from verification.engines.mssql.pages import PAGE, page_checksum
from verification.sources import LocalSource
from verification.sources.base import SourceFile

# file: (offset of page 1:9 in the file, dbi_dbname, dbi_dbid, dbi_version, dbi_createVersion, dbi_cmptlevel,
#        dbi_crdate, dbi_dbccLastKnownGood or None: never ran on the source, or not read in version 852).
# None: a family of a striped set that does not carry the boot page.
CORPUS: dict[str, tuple[int, str, int, int, int, int, str, str | None] | None] = {
    "DoubleDiffing/difftest-diff1.bak":
        (0x13e00, "doublediff", 6, 661, 661, 100, "2018-12-21 11:23:45.833", None),
    "DoubleDiffing/difftest-diff2.bak":
        (0x13e00, "doublediff", 6, 661, 661, 100, "2018-12-21 11:23:45.833", None),
    "DoubleDiffing/difftest-full.bak":
        (0x13e00, "doublediff", 6, 661, 661, 100, "2018-12-21 11:23:45.833", None),
    "OlaMsFilter/Simple/test_FULL_20160629_141300.bak":
        (0x14200, "OlaMsFilterTest", 6, 661, 661, 100, "2018-06-29 14:11:16.010", None),
    "OlaMsFilter/Simple/test_FULL_20160629_141320.bak":
        (0x14200, "OlaMsFilterTest", 6, 661, 661, 100, "2018-06-29 14:11:16.010", None),
    "OlaMsFilter/complex/Diff/test_DIFF_20160629_141600.bak":
        (0x14200, "OlaMsFilterTest", 5, 661, 661, 100, "2018-07-02 08:15:24.513", None),
    "OlaMsFilter/complex/Diff/test_DIFF_20160629_141900.bak":
        (0x14200, "OlaMsFilterTest", 5, 661, 661, 100, "2018-07-02 08:15:24.513", None),
    "OlaMsFilter/complex/Diff/test_DIFF_20160629_142500.bak":
        (0x14200, "OlaMsFilterTest", 5, 661, 661, 100, "2018-07-02 08:15:24.513", None),
    "OlaMsFilter/complex/Diff/test_DIFF_20160629_142800.bak":
        (0x14200, "OlaMsFilterTest", 5, 661, 661, 100, "2018-07-02 08:15:24.513", None),
    "OlaMsFilter/complex/Full/test_FULL_20160629_141300.bak":
        (0x14200, "OlaMsFilterTest", 5, 661, 661, 100, "2018-07-02 08:15:24.513", None),
    "OlaMsFilter/complex/Full/test_FULL_20160629_142200.bak":
        (0x14200, "OlaMsFilterTest", 5, 661, 661, 100, "2018-07-02 08:15:24.513", None),
    "RestoreTimeClean/RestoreTimeClean.bak":
        (0x13e00, "RestoreTimeClean", 16, 661, 661, 100, "2017-06-01 12:59:12.867", None),
    "RestoreTimeClean/RestoreTimeClean2.bak":
        (0x13e00, "RestoreTimeClean", 16, 661, 661, 100, "2017-06-01 12:59:12.867", None),
    "backuppassword/passwd.bak":
        (0x14200, "StripeTest", 5, 661, 661, 100, "2020-05-12 13:45:18.013", None),
    "detachattach/detachattach.bak":
        (0x13e00, "detachattach", 6, 661, 661, 100, "2017-07-19 10:44:42.477", None),
    "history/sql2016-stripe/Stripe1/restoretime.bak": None,
    "history/sql2016-stripe/Stripe1/restoretime2.bak": None,
    "history/sql2016-stripe/Stripe2/restoretime1.bak":
        (0x4200, "restoretimestripe", 11, 852, 852, 130, "2017-05-22 14:43:55.730", None),
    "history/sql2016-stripe/Stripe2/restoretime2a.bak":
        (0x4200, "restoretimestripe", 11, 852, 852, 130, "2017-05-22 14:43:55.730", None),
    "restoretimeclean2016/RestoreTimeClean.bak":
        (0x14200, "RestoreTimeClean", 5, 852, 661, 100, "2019-05-02 19:58:43.307", None),
    "restoretimeclean2016/RestoreTimeClean2.bak":
        (0x14200, "RestoreTimeClean", 5, 852, 661, 100, "2019-05-02 19:58:43.307", None),
    "singlerestore/singlerestore.bak":
        (0x13e00, "singlerestore", 11, 661, 661, 100, "2017-05-18 13:50:49.530", None),
    "singlerestore/testlastbackup.bak":
        (0x14200, "testlastbackup", 6, 661, 661, 100, "2017-07-19 16:25:31.270", None),
    "sql2008-backups/Cube_Query_History/DIFF/SQL2008_Cube_Query_History_DIFF_20170518_041819.bak":
        (0x14200, "Cube_Query_History", 14, 661, 661, 100, "2017-01-31 13:16:38.593", None),
    "sql2008-backups/Cube_Query_History/DIFF/SQL2008_Cube_Query_History_DIFF_20170518_041826.bak":
        (0x14200, "Cube_Query_History", 14, 661, 661, 100, "2017-01-31 13:16:38.593", None),
    "sql2008-backups/Cube_Query_History/FULL/SQL2008_Cube_Query_History_FULL_20170518_041737.bak":
        (0x14200, "Cube_Query_History", 14, 661, 661, 100, "2017-01-31 13:16:38.593", None),
    "sql2008-backups/DBWithoutOwner/DIFF/SQL2008_DBWithoutOwner_DIFF_20170518_041819.bak":
        (0x13e00, "DBWithoutOwner", 13, 661, 661, 100, "2017-01-12 00:28:41.117", None),
    "sql2008-backups/DBWithoutOwner/DIFF/SQL2008_DBWithoutOwner_DIFF_20170518_041826.bak":
        (0x13e00, "DBWithoutOwner", 13, 661, 661, 100, "2017-01-12 00:28:41.117", None),
    "sql2008-backups/DBWithoutOwner/FULL/SQL2008_DBWithoutOwner_FULL_20170518_041741.bak":
        (0x13e00, "DBWithoutOwner", 13, 661, 661, 100, "2017-01-12 00:28:41.117", None),
    "sql2008-backups/Noextension.bak":
        (0x13e00, "NoExtension", 41, 661, 661, 100, "2017-09-26 15:51:58.907", None),
    "sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe.bak": None,
    "sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe2.bak": None,
    "sql2008-backups/RestoreTimeStripe/Stripe2/RestoreTimeStripe1.bak":
        (0x4200, "restoretimestripe", 6, 661, 661, 100, "2017-12-15 12:46:53.810", None),
    "sql2008-backups/RestoreTimeStripe/Stripe2/RestoreTimeStripe2a.bak":
        (0x4200, "restoretimestripe", 6, 661, 661, 100, "2017-12-15 12:46:53.810", None),
    "sql2008-backups/SimpleRecovery/SimpleBackTest_1.bak":
        (0x14200, "SimpleBackTest", 6, 661, 661, 100, "2018-04-06 10:30:32.547", None),
    "sql2008-backups/SimpleRecovery/SimpleBackTest_2.bak":
        (0x14200, "SimpleBackTest", 6, 661, 661, 100, "2018-04-06 10:30:32.547", None),
    "sql2008-backups/SimpleRecovery/SimpleBacktest.bak":
        (0x14200, "SimpleBackTest", 6, 661, 661, 100, "2018-04-06 10:30:32.547", None),
    "sql2008-backups/StopAt/StopAt.bak":
        (0x13e00, "StopAt", 6, 661, 661, 100, "2020-05-12 13:28:43.750", None),
    "sql2008-backups/db1/DIFF/SQL2008_db1_DIFF_20170518_041819.bak":
        (0x14200, "db1", 5, 661, 661, 100, "2016-08-30 00:46:38.267", "2017-03-04 21:43:04.740"),
    "sql2008-backups/db1/DIFF/SQL2008_db1_DIFF_20170518_041826.bak":
        (0x14200, "db1", 5, 661, 661, 100, "2016-08-30 00:46:38.267", "2017-03-04 21:43:04.740"),
    "sql2008-backups/db2/DIFF/SQL2008_db2_DIFF_20170518_041819.bak":
        (0x13e00, "db2", 6, 661, 661, 100, "2016-10-08 07:02:07.897", "2017-03-04 21:43:04.983"),
    "sql2008-backups/db2/FULL/SQL2008_db2_FULL_20170518_041738.bak":
        (0x13e00, "db2", 6, 661, 661, 100, "2016-10-08 07:02:07.897", "2017-03-04 21:43:04.983"),
    "sql2008-backups/db3/FULL/SQL2008_db3_FULL_20170518_041739.bak":
        (0x13e00, "db3", 8, 661, 661, 100, "2016-12-13 00:55:42.700", "2017-03-04 21:43:05.033"),
    "sql2008-backups/dbOrphanUsers/DIFF/SQL2008_dbOrphanUsers_DIFF_20170518_041819.bak":
        (0x13e00, "dbOrphanUsers", 7, 661, 661, 100, "2016-12-29 14:54:51.637", None),
    "sql2008-backups/dbOrphanUsers/DIFF/SQL2008_dbOrphanUsers_DIFF_20170518_041826.bak":
        (0x13e00, "dbOrphanUsers", 7, 661, 661, 100, "2016-12-29 14:54:51.637", None),
    "sql2008-backups/dbOrphanUsers/FULL/SQL2008_dbOrphanUsers_FULL_20170518_041740.bak":
        (0x13e00, "dbOrphanUsers", 7, 661, 661, 100, "2016-12-29 14:54:51.637", None),
    "sql2008-backups/dbareports/DIFF/SQL2008_dbareports_DIFF_20170518_041819.bak":
        (0x13e00, "dbareports", 15, 661, 661, 100, "2017-02-17 00:40:47.923", None),
    "sql2008-backups/dbareports/DIFF/SQL2008_dbareports_DIFF_20170518_041826.bak":
        (0x13e00, "dbareports", 15, 661, 661, 100, "2017-02-17 00:40:47.923", None),
    "sql2008-backups/dbareports/FULL/SQL2008_dbareports_FULL_20170518_041739.bak":
        (0x13e00, "dbareports", 15, 661, 661, 100, "2017-02-17 00:40:47.923", None),
    "sql2008-backups/ft1/DIFF/SQL2008_ft1_DIFF_20170518_041819.bak":
        (0x13e00, "ft1", 9, 661, 661, 100, "2017-05-08 17:19:10.593", None),
    "sql2008-backups/ft1/DIFF/SQL2008_ft1_DIFF_20170518_041826.bak":
        (0x13e00, "ft1", 9, 661, 661, 100, "2017-05-08 17:19:10.593", None),
    "sql2008-backups/ft1/FULL/SQL2008_ft1_FULL_20170518_041742.bak":
        (0x13e00, "ft1", 9, 661, 661, 100, "2017-05-08 17:19:10.593", None),
}
COMPRESSED = ("history/compressed/SharePoint_Config_a.bak", "history/compressed/SharePoint_Config_b.bak")
DB1 = "sql2008-backups/db1/DIFF/SQL2008_db1_DIFF_20170518_041819.bak"  # 661, a CHECKDB on record
V852 = "history/sql2016-stripe/Stripe2/restoretime1.bak"


def manifest_files() -> list[str]:
    path = MSSQL_CORPUS / "MANIFEST.tsv"
    if not path.exists():
        return []
    with path.open() as handle:
        return [row["file"] for row in csv.DictReader(handle, delimiter="\t")]


def when(value: datetime | None) -> str | None:
    return value.isoformat(sep=" ", timespec="milliseconds") if value else None


def boot(root, rel: str) -> BootPage | None:  # type: ignore[no-untyped-def]
    return read_boot_page(SourceFile(LocalSource(root), rel))


def test_every_full_and_differential_backup_is_in_the_table(mssql_corpus):
    assert sorted(f for f in manifest_files() if f.endswith(".bak")) == sorted([*CORPUS, *COMPRESSED])


@pytest.mark.parametrize("rel", sorted(CORPUS))
def test_the_boot_page_of_each_backup(mssql_corpus, rel):
    result = boot(mssql_corpus, rel)
    expected = CORPUS[rel]
    if expected is None:
        assert result is None
        return
    assert result is not None
    assert (result.source, result.name, result.database_id, result.version, result.create_version,
            result.compatibility_level, when(result.created), when(result.last_known_good)) == expected
    assert (result.path, result.checksum) == (rel, "valid")
    assert result.stored_checksum == result.computed_checksum
    assert result.unread == ((CHECKDB,) if result.version == 852 else ())
    assert result.checkdb_never_ran == (result.version == 661 and result.last_known_good is None)
    page = (mssql_corpus / rel).read_bytes()[result.source:result.source + PAGE]
    assert page[1] == 13 and struct.unpack_from("<IH", page, 0x20) == (9, 1)


@pytest.mark.parametrize("rel", sorted(rel for rel, row in CORPUS.items() if row))
def test_the_boot_page_agrees_with_the_backup_header(mssql_corpus, rel):
    result = boot(mssql_corpus, rel)
    header = read_backup_header(SourceFile(LocalSource(mssql_corpus), rel))
    assert result is not None and result.name is not None and result.create_version is not None
    # SQL Server names are case-insensitive: passwd.bak's page says StripeTest, its header stripetest.
    assert result.name.casefold() == header.database_name.casefold()
    assert result.version == header.database_version
    assert result.create_version <= result.version
    assert header.backup_start is not None
    if result.last_known_good is not None:
        assert datetime(2005, 1, 1) < result.last_known_good <= header.backup_start


def test_a_database_restored_from_an_older_version_keeps_its_create_version_and_level(mssql_corpus):
    upgraded = boot(mssql_corpus, "restoretimeclean2016/RestoreTimeClean.bak")
    native = boot(mssql_corpus, V852)
    assert upgraded is not None and native is not None
    assert (upgraded.version, upgraded.create_version, upgraded.compatibility_level) == (852, 661, 100)
    assert (native.version, native.create_version, native.compatibility_level) == (852, 852, 130)


def test_checkdb_date_is_not_read_where_its_place_is_unconfirmed(mssql_corpus):
    result = boot(mssql_corpus, V852)
    assert result is not None
    assert (result.last_known_good, result.unread, result.checkdb_never_ran) == (None, (CHECKDB,), False)


def test_a_boot_page_with_a_damaged_checksum_is_not_trusted(mssql_copy):
    root = mssql_copy(DB1)
    path = root / DB1
    data = bytearray(path.read_bytes())
    original = boot(root, DB1)
    assert original is not None
    data[original.source + 0x60 + 0x28C] ^= 0x01  # one bit of dbi_dbccLastKnownGood
    path.write_bytes(bytes(data))
    result = boot(root, DB1)
    assert result == BootPage(DB1, 0x14200, "mismatch", original.stored_checksum,
                              page_checksum(bytes(data[0x14200:0x14200 + PAGE])), unread=FIELDS)
    assert result.computed_checksum != result.stored_checksum
    assert not result.checkdb_never_ran


def test_a_boot_page_without_a_checksum_is_decoded_and_says_so(mssql_copy):
    root = mssql_copy(DB1)
    path = root / DB1
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 0x14200 + 4, struct.unpack_from("<H", data, 0x14200 + 4)[0] & ~0x200)
    path.write_bytes(bytes(data))
    result = boot(root, DB1)
    assert result is not None
    assert (result.checksum, result.name, when(result.last_known_good)) == ("absent", "db1", "2017-03-04 21:43:04.740")


def test_an_unknown_version_is_not_decoded(mssql_copy):
    root = mssql_copy(DB1)
    path = root / DB1
    data = bytearray(path.read_bytes())
    struct.pack_into("<H", data, 0x14200 + 0x60 + 4, 869)  # dbi_version of SQL Server 2017
    struct.pack_into("<I", data, 0x14200 + 0x3C, page_checksum(bytes(data[0x14200:0x14200 + PAGE])))
    path.write_bytes(bytes(data))
    result = boot(root, DB1)
    assert result is not None
    assert (result.checksum, result.version, result.create_version, result.name, result.unread) == (
        "valid", 869, 661, None, FIELDS)


def test_a_log_backup_has_no_boot_page_and_says_why(mssql_corpus):
    with pytest.raises(MtfError) as caught:
        boot(mssql_corpus, "RestoreTimeClean/RestoreTimeClean_1.trn")
    assert (caught.value.offset, caught.value.found) == (
        0x1A00, "MSTL: not a full or differential backup, or damaged")


@pytest.mark.parametrize("rel", COMPRESSED)
def test_compressed_backups_are_out_of_reach(mssql_corpus, rel):
    with pytest.raises(NeedsServerHeaderOnly):
        boot(mssql_corpus, rel)


def test_only_the_first_extents_are_read(mssql_corpus):
    # The walk stops past the boot page's extent: a few 64 KiB extents, not the whole file.
    for rel in ("sql2008-backups/Cube_Query_History/FULL/SQL2008_Cube_Query_History_FULL_20170518_041737.bak",
                "sql2008-backups/RestoreTimeStripe/Stripe1/RestoreTimeStripe.bak"):
        reader = SourceFile(LocalSource(mssql_corpus), rel)
        read_boot_page(reader)
        assert reader.bytes_read < 4 * 8 * PAGE


@pytest.mark.parametrize(("raw", "expected"), [
    (bytes(8), "1900-01-01 00:00:00.000"),
    (struct.pack("<Ii", 1, 0), "1900-01-01 00:00:00.003"),  # one tick, 1/300 s, shown as SQL Server does
    (struct.pack("<Ii", 2, 0), "1900-01-01 00:00:00.007"),
    (struct.pack("<Ii", 300 * 86400 - 1, 0), "1900-01-01 23:59:59.997"),
    (bytes.fromhex("bee665012ca70000"), "2017-03-04 21:43:04.740"),  # db1's, ticks first then days
    (struct.pack("<Ii", 300 * 86400, 0), None),  # a day of ticks or more is not a time of day
    (struct.pack("<Ii", 0, -1), None),
])
def test_sql_server_datetime(raw, expected):
    assert when(decode_datetime(raw)) == expected
