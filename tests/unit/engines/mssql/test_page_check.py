"""Page verification as a check: what it reads, and how what it found is judged (never a pass on its own)."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from verification.engines.base import Evidence
from verification.engines.mssql.boot import CHECKDB, FIELDS, BootPage
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan
from verification.engines.mssql.page_check import (
    EVIDENCE,
    SHOWN,
    PageVerification,
    data_files,
    data_sets,
    describe_finding,
    judge,
    read_pages,
    render,
    source_checkdb,
    verify_pages,
)
from verification.engines.mssql.pages import PageFinding, PageScan
from verification.model import CheckKind, CheckName, CheckStatus
from verification.sources import LocalSource

RTC = "RestoreTimeClean"


def scan_of(path: str = "a.bak", findings: tuple[PageFinding, ...] = (), pages: int = 16) -> PageScan:
    return PageScan(path=path, pages=pages, checksummed=pages - 4, without_checksum=2, torn_page_protected=1,
                    zeroed=2, unformatted=0, by_type={1: 10, 8: 1, 250: 1}, findings=findings)


MISMATCH = PageFinding("a.bak", 0x4000, "1:9", 99, 0, "checksum mismatch", 0x12345678, 0x9ABCDEF0)
MISPLACED = PageFinding("a.bak", 0x6000, "1:77", 245575913, 1, "page out of place: slot 3 of the extent of 1:72 "
                        "holds page 1:77")


def test_a_finding_names_file_offset_page_owner_and_both_checksums():
    assert describe_finding(MISMATCH) == ("a.bak: offset 0x4000, page 1:9 (object 99, index 0): checksum mismatch "
                                          "(stored 0x12345678, computed 0x9abcdef0)")
    assert describe_finding(MISPLACED) == ("a.bak: offset 0x6000, page 1:77 (object 245575913, index 1): page out of "
                                           "place: slot 3 of the extent of 1:72 holds page 1:77")
    assert describe_finding(replace(MISMATCH, computed_checksum=None)).endswith("checksum mismatch")


def test_clean_pages_pass_as_a_check_of_the_backup_files_with_their_counts():
    check = judge(PageVerification([scan_of("a.bak"), scan_of("b.bak", pages=8)], seconds=0.5, bytes=1 << 20),
                  "db/page-verification.txt")
    assert (check.name, check.status, check.kind, check.required) == (
        CheckName.PAGE_VERIFICATION, CheckStatus.PASSED, CheckKind.BACKUP_FILES, True)
    assert check.summary == ("no damaged page; 24 pages in 2 file(s): 16 checksums verified, 4 pages without checksum; "
                             "last clean CHECKDB on the source: not found (no data backup of the chain carries the "
                             "boot page)")
    assert check.findings == [] and check.evidence == "db/page-verification.txt"
    assert check.details["by_type"] == {"data": 20, "GAM": 2, "type 250": 2}
    assert (check.details["zeroed"], check.details["torn_page_protected"], check.details["bytes_read"],
            check.details["seconds"]) == (4, 2, 1 << 20, 0.5)
    assert check.details["per_file"]["b.bak"] == {"pages": 8, "checksums_verified": 4, "without_checksum": 2,
                                                  "findings": 0}


def test_a_damaged_page_fails_and_names_it():
    check = judge(PageVerification([scan_of(findings=(MISMATCH, MISPLACED)), scan_of("b.bak")]))
    assert check.status is CheckStatus.FAILED and check.kind is CheckKind.BACKUP_FILES
    assert check.summary == ("2 damaged page(s); 32 pages in 2 file(s): 24 checksums verified, "
                             "4 pages without checksum")
    assert check.findings == [describe_finding(MISMATCH), describe_finding(MISPLACED)]
    assert check.details["per_file"]["a.bak"]["findings"] == 2


def test_two_findings_on_one_page_count_one_damaged_page():
    misplaced_same_page = replace(MISPLACED, offset=MISMATCH.offset, page=MISMATCH.page)
    check = judge(PageVerification([scan_of(findings=(MISMATCH, misplaced_same_page))]))
    assert check.summary.startswith("1 damaged page(s);") and len(check.findings) == 2


def test_a_damaged_structure_fails_even_with_no_page_finding_and_unread_files_are_named_beside_it():
    check = judge(PageVerification([scan_of()], damaged=["a.bak: MQDA stream header checksum at offset 0x1e00"],
                                   unreadable=["c.bak: permission denied"]))
    assert check.status is CheckStatus.FAILED
    assert check.summary.startswith("a backup file's data stream is damaged;")
    assert check.findings == ["backup file damaged: a.bak: MQDA stream header checksum at offset 0x1e00",
                              "not read: c.bak: permission denied"]
    both = judge(PageVerification([scan_of(findings=(MISMATCH,))], damaged=["b.bak: x"]))
    assert both.summary.startswith("1 damaged page(s) and 1 file(s) with a damaged structure;")


def test_a_file_that_could_not_be_read_is_an_error_naming_it_never_a_pass():
    check = judge(PageVerification([scan_of()], unreadable=["b.bak: [Errno 5] Input/output error"]))
    assert (check.status, check.required) == (CheckStatus.ERROR, True)
    assert check.summary.startswith("1 backup file(s) could not be read;")
    assert check.findings == ["not read: b.bak: [Errno 5] Input/output error"]


def test_nothing_read_is_skipped_saying_why_and_blocks_nothing():
    none = judge(PageVerification())
    assert (none.status, none.required) == (CheckStatus.SKIPPED, False)
    assert none.summary == "not run: the chain has no full or differential backup"
    compressed = judge(PageVerification(compressed=["x.bak"]))
    assert (compressed.status, compressed.required) == (CheckStatus.SKIPPED, False)
    assert compressed.summary == ("not run: every data backup of the chain is natively compressed; 1 natively "
                                  "compressed file(s) have no pages to read offline (the restore verifies them): x.bak")


def test_a_compressed_file_beside_read_ones_is_named_in_the_pass():
    check = judge(PageVerification([scan_of()], compressed=["x.bak"]))
    assert check.status is CheckStatus.PASSED
    assert "; 1 natively compressed file(s) have no pages to read offline (the restore verifies them): x.bak; " \
        in check.summary
    assert check.details["natively_compressed"] == ["x.bak"]


def test_many_findings_are_cut_in_the_check_and_whole_in_the_evidence():
    many = tuple(replace(MISMATCH, offset=0x2000 * n, page=f"1:{n}") for n in range(SHOWN + 7))
    found = PageVerification([scan_of(findings=many)])
    check = judge(found, "db/page-verification.txt")
    assert len(check.findings) == SHOWN + 1
    assert check.findings[-1] == "(+7 more in db/page-verification.txt)"
    text = render(found)
    assert all(describe_finding(f) in text for f in many)
    assert f"{SHOWN + 7} finding(s):" in text


@pytest.fixture
def clean_plan(mssql_corpus: Path):  # type: ignore[no-untyped-def]
    (db,) = scan(LocalSource(mssql_corpus / RTC)).databases
    return plan(db, RTC, None)


def test_the_chains_full_and_differential_are_read_and_its_logs_are_not(clean_plan):
    assert data_files(clean_plan) == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak"]


def test_the_real_chain_verifies_and_leaves_its_evidence(mssql_corpus, clean_plan, tmp_path):
    check = verify_pages(clean_plan, LocalSource(mssql_corpus / RTC), Evidence(tmp_path / RTC))
    assert check.status is CheckStatus.PASSED, check.findings
    assert check.evidence == f"{RTC}/{EVIDENCE}"
    text = (tmp_path / RTC / EVIDENCE).read_text()
    assert "RestoreTimeClean.bak: 168 pages" in text and "RestoreTimeClean2.bak: " in text
    assert "\n0 finding(s):\n" in text
    assert check.details["checksums_verified"] == sum(f["checksums_verified"] for f in check.details["per_file"].values())
    assert check.details["bytes_read"] >= check.details["pages"] * 8192


def test_every_kind_of_file_that_will_not_read_is_sorted_by_what_it_means(mssql_copy):
    root = mssql_copy(f"{RTC}/RestoreTimeClean.bak", "history/compressed/SharePoint_Config_a.bak")
    (root / "cut.bak").write_bytes((root / RTC / "RestoreTimeClean.bak").read_bytes()[:0x3000])
    found = read_pages(LocalSource(root), [f"{RTC}/RestoreTimeClean.bak", "history/compressed/SharePoint_Config_a.bak",
                                           "cut.bak", "gone.bak"])
    assert [s.path for s in found.scans] == [f"{RTC}/RestoreTimeClean.bak"]
    assert found.compressed == ["history/compressed/SharePoint_Config_a.bak"]
    (damaged,) = found.damaged
    assert damaged.startswith("cut.bak: ")
    (unread,) = found.unreadable
    assert unread.startswith("gone.bak: ")


def _boot(**fields: object) -> BootPage:
    return BootPage(**{"path": "d.bak", "source": 0x2000, "checksum": "valid", "stored_checksum": 1,
                       "computed_checksum": 1, "version": 661, **fields})  # type: ignore[arg-type]


def test_the_sources_last_clean_checkdb_is_said_for_every_case_of_its_boot_page():
    assert source_checkdb(_boot(last_known_good=datetime(2017, 3, 4, 21, 43, 5, 33000))) == (
        "2017-03-04 21:43:05 (the source server's clock; boot page in d.bak, field place inferred from the corpus)")
    assert source_checkdb(_boot()) == "never (the boot page in d.bak records none)"
    assert source_checkdb(_boot(checksum="absent")) == (
        "never (the boot page in d.bak records none; that page carries no checksum, so unverified)")
    assert source_checkdb(_boot(checksum="absent", last_known_good=datetime(2017, 3, 4))).endswith(
        "inferred from the corpus; that page carries no checksum, so unverified)")
    assert source_checkdb(_boot(version=852, unread=(CHECKDB,))) == (
        "not read (where a version 852 boot page keeps it is not confirmed)")
    assert source_checkdb(_boot(checksum="mismatch", unread=FIELDS)) == (
        "not read (the boot page in d.bak fails its checksum)")
    assert source_checkdb(None) == "not found (no data backup of the chain carries the boot page)"


@pytest.mark.parametrize(("folder", "said"), [
    ("sql2008-backups/db3", "2017-03-04 21:43:05 (the source server's clock; boot page in "),
    (RTC, "never (the boot page in RestoreTimeClean2.bak records none)"),
    ("restoretimeclean2016", "not read (where a version 852 boot page keeps it is not confirmed)"),
])
def test_the_real_boot_pages_say_the_sources_last_clean_checkdb(mssql_corpus, tmp_path, folder, said):
    source = LocalSource(mssql_corpus / folder)
    (db,) = scan(source).databases
    check = verify_pages(plan(db, "db", None), source, Evidence(tmp_path / "e"))
    assert check.status is CheckStatus.PASSED
    assert f"; last clean CHECKDB on the source: {said}" in check.summary
    assert check.details["source_last_clean_checkdb"].startswith(said)
    assert f"last clean CHECKDB on the source: {said}" in (tmp_path / "e" / EVIDENCE).read_text()


def test_a_pages_owner_is_one_of_the_backups_own_data_files_never_its_log(clean_plan):
    from verification.engines.mssql.page_check import page_owners
    from verification.model import BackupFile

    full = clean_plan.chain.backups[0]
    assert page_owners(full) == {1: 2359296 // 8192}  # RestoreTimeClean.mdf; the log (file 2) holds no data page
    unknown_type = replace(full, database_files=(BackupFile("x", None, 16 * 8192, file_id=3),))
    assert page_owners(unknown_type) == {3: 16}
    assert page_owners(replace(full, database_files=())) is None


def test_a_page_claiming_the_log_file_is_found_through_the_chains_own_file_list(mssql_copy, tmp_path):
    from tests.faults.test_mssql_faults import _pages
    from verification.engines.mssql.pages import page_checksum

    root = mssql_copy(RTC)
    victim = root / RTC / "RestoreTimeClean.bak"
    offset, header = _pages(victim)[0]
    data = bytearray(victim.read_bytes())
    data[offset + 0x24:offset + 0x26] = (2).to_bytes(2, "little")  # file 2: the log
    page = bytes(data[offset:offset + 8192])
    data[offset + 0x3C:offset + 0x40] = page_checksum(page).to_bytes(4, "little")  # a page SQL Server might have written
    victim.write_bytes(bytes(data))
    (db,) = scan(LocalSource(root / RTC)).databases
    check = verify_pages(plan(db, RTC, None), LocalSource(root / RTC), Evidence(tmp_path / "e"))
    assert check.status is CheckStatus.FAILED
    # Out of its extent, and (what only the backup's file list can say) not a page of any data file.
    assert f"RestoreTimeClean.bak: offset {offset:#x}, page 2:{header.page_id} (object {header.object_id}, index " \
           f"{header.index_id}): file id 2 is not a file of the database (files 1)" in check.findings


# ---- every word of what is judged and kept: the details, the evidence, the boot page's facts ---------------


EVERYTHING = PageVerification([scan_of("a.bak", (MISMATCH,))], damaged=["d.bak: x"], unreadable=["u.bak: y"],
                              compressed=["c.bak", "e.bak"], seconds=0.12345, bytes=99)


def test_the_details_name_every_count_and_every_file_not_read():
    assert judge(EVERYTHING).details == {
        "files": 1, "pages": 16, "checksums_verified": 12, "without_checksum": 2, "torn_page_protected": 1,
        "zeroed": 2, "unformatted": 0, "by_type": {"data": 10, "GAM": 1, "type 250": 1}, "seconds": 0.123,
        "bytes_read": 99,
        "per_file": {"a.bak": {"pages": 16, "checksums_verified": 12, "without_checksum": 2, "findings": 1}},
        "natively_compressed": ["c.bak", "e.bak"], "unreadable": ["u.bak: y"], "damaged": ["d.bak: x"],
        "not_verifiable_offline": [], "boot_page": None, "source_last_clean_checkdb": "not found (no data backup of the chain carries the boot page)",
        "backups_read": None, "outside_chain": [],
        "files_not_read": ["c.bak: natively compressed", "e.bak: natively compressed"]}
    clean = judge(PageVerification([scan_of()], compressed=["c.bak", "e.bak"]))
    assert clean.summary.endswith("2 natively compressed file(s) have no pages to read offline (the restore "
                                  "verifies them): c.bak, e.bak; last clean CHECKDB on the source: not found (no data "
                                  "backup of the chain carries the boot page)")


def test_the_evidence_file_says_everything_word_for_word():
    assert render(EVERYTHING) == (
        "# Offline page verification (restoreproof, engines/mssql/pages.py)\n\n"
        "a.bak: 16 pages, 12 checksums verified, 2 without checksum (1 torn-page protected), 2 zeroed, 0 never "
        "formatted, 1 finding(s); by type: data 10, GAM 1, type 250 1\n"
        "natively compressed (no pages offline): c.bak\nnatively compressed (no pages offline): e.bak\n"
        "damaged structure: d.bak: x\nnot read: u.bak: y\n\n1 finding(s):\n"
        "a.bak: offset 0x4000, page 1:9 (object 99, index 0): checksum mismatch (stored 0x12345678, computed "
        "0x9abcdef0)\n\nlast clean CHECKDB on the source: not found (no data backup of the chain carries the boot "
        "page)\nread 99 bytes in 0.123 s\n")
    assert "by type: none" in render(PageVerification([replace(scan_of(), by_type={})]))
    assert ("2 zeroed, 0 never formatted, 3 stale (another page's bytes in a slot not in use), 0 finding(s)"
            in render(PageVerification([replace(scan_of(), stale=3)])))


def test_findings_past_the_shown_ones_point_to_the_evidence_even_unnamed():
    many = tuple(replace(MISMATCH, offset=0x2000 * n, page=f"1:{n}") for n in range(SHOWN + 2))
    assert judge(PageVerification([scan_of(findings=many)])).findings[-1] == "(+2 more in the evidence)"


def test_the_boot_pages_facts_are_kept_as_read(mssql_corpus):
    from verification.engines.mssql.boot import read_boot_page
    from verification.engines.mssql.page_check import boot_details
    from verification.sources.base import SourceFile

    path = "FULL/SQL2008_db3_FULL_20170518_041739.bak"
    boot = read_boot_page(SourceFile(LocalSource(mssql_corpus / "sql2008-backups/db3"), path))
    assert boot_details(boot) == {
        "path": path, "offset": 81408, "checksum": "valid", "version": 661, "create_version": 661, "name": "db3",
        "compatibility_level": 100, "created": "2016-12-13T00:55:42.700000",
        "last_known_good_checkdb": "2017-03-04T21:43:05.033000", "unread": []}
    assert boot_details(None) is None
    never = replace(boot, created=None, last_known_good=None, unread=(CHECKDB,))
    assert boot_details(never) == {**boot_details(boot), "created": None,  # type: ignore[dict-item]
                                   "last_known_good_checkdb": None, "unread": [CHECKDB]}


def test_a_newest_file_that_will_not_read_leaves_the_boot_page_to_the_older_one(mssql_copy, tmp_path):
    from verification.engines.mssql.page_check import _newest_boot_page

    root = mssql_copy(f"{RTC}/RestoreTimeClean.bak", f"{RTC}/RestoreTimeClean2.bak")
    found = _newest_boot_page(LocalSource(root / RTC), ["RestoreTimeClean.bak", "gone.bak"])
    assert found is not None and found.path == "RestoreTimeClean.bak"
    both = _newest_boot_page(LocalSource(root / RTC), ["RestoreTimeClean.bak", "RestoreTimeClean2.bak"])
    assert both is not None and both.path == "RestoreTimeClean2.bak"


def test_a_file_size_is_counted_in_whole_pages_and_the_time_taken_is_a_duration(clean_plan, mssql_corpus):
    from verification.engines.mssql.page_check import page_owners
    from verification.model import BackupFile

    odd = replace(clean_plan.chain.backups[0], database_files=(BackupFile("x", "D", 16 * 8192 + 100, file_id=1),))
    assert page_owners(odd) == {1: 16} and isinstance(page_owners(odd)[1], int)  # type: ignore[index]
    found = read_pages(LocalSource(mssql_corpus / RTC), ["RestoreTimeClean.bak"])
    assert 0 < found.seconds < 60


def test_exactly_the_shown_number_of_findings_needs_no_pointer_and_the_boot_page_is_in_the_details(mssql_corpus,
                                                                                                  tmp_path):
    exact = tuple(replace(MISMATCH, offset=0x2000 * n, page=f"1:{n}") for n in range(SHOWN))
    said = judge(PageVerification([scan_of(findings=exact)])).findings
    assert len(said) == SHOWN and not said[-1].startswith("(+")
    source = LocalSource(mssql_corpus / "sql2008-backups/db3")
    (db,) = scan(source).databases
    check = verify_pages(plan(db, "db3", None), source, Evidence(tmp_path / "e"))
    assert check.details["boot_page"]["name"] == "db3" and check.details["boot_page"]["version"] == 661


# ---- a striped backup: its families read as one backup -------------------------------------------------------

STRIPE = "history/sql2016-stripe"
NEWEST = ("Stripe1/restoretime2.bak", "Stripe2/restoretime2a.bak")  # the chain's full: two families, one set


def _stripe_plan(root: Path):  # type: ignore[no-untyped-def]
    (db,) = scan(LocalSource(root / STRIPE)).databases
    return plan(db, "RestoreTimeStripe", None)


def test_the_families_of_one_backup_set_are_read_together_and_other_backups_alone(mssql_corpus, clean_plan):
    striped = _stripe_plan(mssql_corpus)
    assert data_sets(striped) == [list(NEWEST)]
    assert data_files(striped) == list(NEWEST)
    assert data_sets(clean_plan) == [["RestoreTimeClean.bak"], ["RestoreTimeClean2.bak"]]
    # A header that gave no BackupSetGUID joins its file to nothing.
    unknown = replace(striped.chain, backups=[replace(b, backup_set_guid=None) for b in striped.chain.backups])
    assert data_sets(replace(striped, chain=unknown)) == [[NEWEST[0]], [NEWEST[1]]]


def _zero_page_1_58(root: Path) -> int:
    """Zero page 1:58 in stripe 2 of the newest full (its PFS page 1:1 is in stripe 1); its offset."""
    victim = root / STRIPE / NEWEST[1]
    data = bytearray(victim.read_bytes())
    offset = 0x32200 + 2 * 8192  # slot 2 of the extent 1:56, the fourth extent of stripe 2's stream
    assert data[offset + 0x20:offset + 0x26] == (58).to_bytes(4, "little") + (1).to_bytes(2, "little")
    data[offset:offset + 8192] = bytes(8192)
    victim.write_bytes(bytes(data))
    return offset


def test_an_allocated_page_zeroed_in_the_second_stripe_fails_the_check_naming_it(mssql_copy, tmp_path):
    root = mssql_copy(STRIPE)
    offset = _zero_page_1_58(root)
    check = verify_pages(_stripe_plan(root), LocalSource(root / STRIPE), Evidence(tmp_path / "e"))
    assert check.status is CheckStatus.FAILED
    assert check.summary.startswith("1 damaged page(s); 336 pages in 2 file(s):")
    assert check.findings == [f"{NEWEST[1]}: offset {offset:#x}, page 1:58 (object 0, index 0): page 1:58 is "
                              f"allocated (PFS page 1:1 in {NEWEST[0]}) but is all zeros"]
    assert check.details["per_file"][NEWEST[0]]["findings"] == 0


def test_a_family_that_will_not_read_is_named_and_the_others_of_its_set_still_read(mssql_copy):
    root = mssql_copy(STRIPE)
    _zero_page_1_58(root)
    (root / STRIPE / NEWEST[0]).write_bytes(b"")
    found = read_pages(LocalSource(root / STRIPE), [list(NEWEST), "gone.bak"])
    (damaged,) = found.damaged
    assert damaged.startswith(f"{NEWEST[0]}: ")
    assert found.unreadable[0].startswith("gone.bak: ")
    # Stripe 2 is read, but without stripe 1's PFS page its zero page cannot be judged: counted.
    (two,) = found.scans
    assert (two.path, two.pages, two.zeroed, two.findings) == (NEWEST[1], 168, 17, ())


# ---- whose pages: the planned chain's, every backup of the database (pages: all), a broken chain's -------------

SIMPLE = "OlaMsFilter/Simple"
OLDER, NEWER = "test_FULL_20160629_141300.bak", "test_FULL_20160629_141320.bak"  # two fulls; the newer is the chain
DB1 = "sql2008-backups/db1"
DIFF1, DIFF2 = "DIFF/SQL2008_db1_DIFF_20170518_041819.bak", "DIFF/SQL2008_db1_DIFF_20170518_041826.bak"


def _planned(root: Path):  # type: ignore[no-untyped-def]
    source = LocalSource(root)
    (db,) = scan(source).databases
    return plan(db, db.database, None), source


def _flip_a_page_body(victim: Path) -> tuple[int, str, str]:
    """A bit flipped in the body of the first checksummed data page: (offset, its finding's checksums said)."""
    from tests.faults.test_mssql_faults import _damage, _pages
    from verification.engines.mssql.pages import page_checksum

    offset, header = _pages(victim)[0]
    _damage(victim, lambda data: data.__setitem__(offset + 4000, data[offset + 4000] ^ 0x10))
    computed = page_checksum(victim.read_bytes()[offset:offset + 8192])
    return offset, f"{header.file_id}:{header.page_id} (object {header.object_id}, index {header.index_id})", \
        f"(stored {header.stored_checksum:#010x}, computed {computed:#010x})"


def test_the_plan_carries_every_data_backup_of_the_database_whether_the_chain_uses_it_or_not(mssql_corpus):
    simple, _ = _planned(mssql_corpus / SIMPLE)
    assert data_files(simple) == [NEWER]
    assert [(b.path, b.type, b.family) for b in simple.data_backups] == [(OLDER, "full", "1/1"),
                                                                        (NEWER, "full", "1/1")]
    # Each file's own facts: the very BackupSet the chain holds for the one it uses.
    assert simple.data_backups[1] == simple.chain.backups[0]
    doubled, _ = _planned(mssql_corpus / "DoubleDiffing")
    assert [b.path for b in doubled.data_backups] == ["difftest-full.bak", "difftest-diff1.bak", "difftest-diff2.bak"]
    broken, _ = _planned(mssql_corpus / DB1)
    assert (broken.chain.status, broken.chain.backups) == ("broken", [])  # no full: the chain plans nothing
    assert [b.path for b in broken.data_backups] == [DIFF1, DIFF2]  # the logs have no pages: never listed


def test_a_second_copy_of_a_backup_is_among_the_data_backups_never_in_the_chain(mssql_copy):
    root = mssql_copy(RTC)
    (root / RTC / "again").mkdir()
    (root / RTC / "again" / "RestoreTimeClean.bak").write_bytes((root / RTC / "RestoreTimeClean.bak").read_bytes())
    planned, _ = _planned(root / RTC)
    assert data_files(planned) == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak"]
    assert [(b.path, b.family) for b in planned.data_backups] == [
        ("RestoreTimeClean.bak", "1/1"), ("again/RestoreTimeClean.bak", "1/1"), ("RestoreTimeClean2.bak", "1/1")]


def test_whose_pages_are_read_is_the_chains_unless_every_backup_is_asked_for_or_the_chain_has_none(mssql_corpus):
    from verification.engines.mssql.page_check import PageScope, page_scope

    simple, _ = _planned(mssql_corpus / SIMPLE)
    assert page_scope(simple) == page_scope(simple, "chain") == PageScope(
        [NEWER], [], f"the planned chain's full and differential backups ({NEWER})", False)
    assert page_scope(simple, "all") == PageScope(
        [NEWER], [OLDER], f"every full and differential backup of the database: 1 file(s) of the planned chain "
                          f"({NEWER}) and 1 outside the planned chain ({OLDER})", True)
    clean, _ = _planned(mssql_corpus / RTC)
    assert page_scope(clean, "all").said == (
        "every full and differential backup of the database: 2 file(s) of the planned chain (RestoreTimeClean.bak, "
        "RestoreTimeClean2.bak) and 0 outside the planned chain")
    broken, _ = _planned(mssql_corpus / DB1)
    expected = PageScope([], [DIFF1, DIFF2], "the broken chain plans no full or differential backup, so every one "
                                             f"of the database's is read: {DIFF1}, {DIFF2}", True)
    assert page_scope(broken) == page_scope(broken, "all") == expected
    # A chain broken after its data backups (a log missing) still reads only its own.
    from verification.model import ChainStatus

    gap = replace(clean, chain=replace(clean.chain, status=ChainStatus.BROKEN))
    assert page_scope(gap).chain == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak"] and page_scope(gap).others == []


def test_many_files_are_named_up_to_a_count_and_all_of_them_in_the_details():
    from verification.engines.mssql.page_check import NAMED, _named

    paths = [f"f{n}.bak" for n in range(NAMED + 3)]
    assert _named(paths) == ", ".join(paths[:NAMED]) + " (+3 more)"
    assert _named(paths[:NAMED]) == ", ".join(paths[:NAMED]) and _named([]) == "none"


def test_with_every_backup_asked_for_a_damaged_full_outside_the_chain_fails_naming_it_and_its_page(
        mssql_copy, tmp_path):
    root = mssql_copy(SIMPLE)
    offset, page, checksums = _flip_a_page_body(root / SIMPLE / OLDER)
    planned, source = _planned(root / SIMPLE)
    before = copy.deepcopy(planned.chain)
    check = verify_pages(planned, source, Evidence(tmp_path / "all"), "all")
    assert (check.status, check.required, check.kind) == (CheckStatus.FAILED, True, CheckKind.BACKUP_FILES)
    assert check.summary == (
        f"1 damaged page(s) (in backup(s) outside the planned chain: {OLDER}; none in the planned chain's own); "
        "368 pages in 2 file(s): 340 checksums verified, 8 pages without checksum; backups read: every full and "
        f"differential backup of the database: 1 file(s) of the planned chain ({NEWER}) and 1 outside the planned "
        f"chain ({OLDER})")
    finding = f"{OLDER} (outside the planned chain): offset {offset:#x}, page {page}: checksum mismatch {checksums}"
    assert check.findings == [finding]
    assert check.details["outside_chain"] == [OLDER]
    assert check.details["per_file"] == {
        NEWER: {"pages": 184, "checksums_verified": 170, "without_checksum": 4, "findings": 0},
        OLDER: {"pages": 184, "checksums_verified": 170, "without_checksum": 4, "findings": 1}}
    # The boot page is still the restored chain's.
    assert check.details["boot_page"]["path"] == NEWER
    text = (tmp_path / "all" / EVIDENCE).read_text()
    assert f"\nbackups read: {check.details['backups_read']}\n" in text
    assert f"\n{OLDER} (outside the planned chain): 184 pages, 170 checksums verified" in text
    assert f"\n{NEWER}: 184 pages, 170 checksums verified" in text
    assert f"\n1 finding(s):\n{finding}\n" in text
    # Reading more never changes the plan.
    assert planned.chain == before and data_files(planned) == [NEWER]


def test_by_default_the_same_folder_passes_saying_it_read_the_chains_backup_only(mssql_copy, tmp_path):
    root = mssql_copy(SIMPLE)
    _flip_a_page_body(root / SIMPLE / OLDER)
    planned, source = _planned(root / SIMPLE)
    check = verify_pages(planned, source, Evidence(tmp_path / "chain"))
    assert check.status is CheckStatus.PASSED
    assert check.summary == (
        "no damaged page; 184 pages in 1 file(s): 170 checksums verified, 4 pages without checksum; backups read: the "
        f"planned chain's full and differential backups ({NEWER}); last clean CHECKDB on the source: never (the boot "
        f"page in {NEWER} records none)")
    assert list(check.details["per_file"]) == [NEWER] and check.details["outside_chain"] == []
    assert OLDER not in (tmp_path / "chain" / EVIDENCE).read_text()


def test_a_broken_chain_without_a_full_still_verifies_its_differentials_and_is_failed_with_them(mssql_copy, tmp_path):
    from verification.engines.base import RestoreOutcome
    from verification.model import Verdict
    from verification.verdict import decide

    root = mssql_copy(DB1)
    planned, source = _planned(root / DB1)
    clean = verify_pages(planned, source, Evidence(tmp_path / "clean"))
    assert clean.status is CheckStatus.PASSED
    assert clean.summary == (
        "no damaged page; 256 pages in 2 file(s): 248 checksums verified, 4 pages without checksum; backups read: the "
        f"broken chain plans no full or differential backup, so every one of the database's is read: {DIFF1}, "
        f"{DIFF2}; last clean CHECKDB on the source: 2017-03-04 21:43:04 (the source server's clock; boot page in "
        f"{DIFF2}, field place inferred from the corpus)")
    assert list(clean.details["per_file"]) == [DIFF1, DIFF2] and clean.details["outside_chain"] == []
    verdict, reasons = decide(planned, RestoreOutcome(checks=[clean]))
    assert (verdict, reasons) == (Verdict.FAILED, ["chain broken: no full backup of db1"])

    offset, page, checksums = _flip_a_page_body(root / DB1 / DIFF2)
    damaged = verify_pages(planned, source, Evidence(tmp_path / "damaged"))
    assert damaged.status is CheckStatus.FAILED
    assert damaged.summary.startswith("1 damaged page(s); 256 pages in 2 file(s): ")  # no chain to be outside of
    finding = f"{DIFF2}: offset {offset:#x}, page {page}: checksum mismatch {checksums}"
    assert damaged.findings == [finding]
    verdict, reasons = decide(planned, RestoreOutcome(checks=[damaged]))
    assert verdict is Verdict.FAILED
    assert reasons == ["chain broken: no full backup of db1", f"page_verification failed: {damaged.summary}: {finding}"]


def test_what_is_outside_the_chain_is_said_so_in_every_message_and_the_chains_own_damage_comes_first():
    from verification.engines.mssql.page_check import PageScope, combined

    scope = PageScope(["a.bak"], ["b.bak", "c.bak", "d.bak"], "said", True)
    chain = PageVerification([scan_of("a.bak", (MISMATCH,))], damaged=["a2.bak: cut"], seconds=1.0, bytes=10,
                             boot=_boot(path="a.bak"))
    others = PageVerification([scan_of("b.bak", (replace(MISMATCH, path="b.bak"),))], damaged=["c.bak: cut"],
                              unreadable=["d.bak: gone"], compressed=["e.bak"], seconds=2.0, bytes=20,
                              boot=_boot(path="b.bak"))
    found = combined(chain, others, scope)
    assert (found.damaged, found.unreadable, found.compressed) == (
        ["a2.bak: cut", "c.bak (outside the planned chain): cut"], ["d.bak (outside the planned chain): gone"],
        ["e.bak (outside the planned chain)"])
    assert (found.seconds, found.bytes, found.boot, found.scope, found.outside, found.database_wide) == (
        3.0, 30, chain.boot, "said", ["b.bak", "c.bak", "d.bak"], True)
    check = judge(found)
    assert check.summary.startswith("2 damaged page(s) and 2 file(s) with a damaged structure (also in backup(s) "
                                    "outside the planned chain: b.bak, c.bak); 32 pages in 2 file(s): ")
    assert check.findings == [
        "backup file damaged: a2.bak: cut", "backup file damaged: c.bak (outside the planned chain): cut",
        describe_finding(MISMATCH), describe_finding(replace(MISMATCH, path="b.bak"), outside=True),
        "not read: d.bak (outside the planned chain): gone"]
    assert describe_finding(replace(MISMATCH, path="b.bak"), outside=True).startswith(
        "b.bak (outside the planned chain): offset 0x4000, page 1:9")
    # Only a structure outside the chain damaged: the chain's own are said to be clean.
    only = judge(combined(PageVerification([scan_of("a.bak")]), PageVerification(damaged=["c.bak: cut"]), scope))
    assert only.summary.startswith("a backup file's data stream is damaged (in backup(s) outside the planned chain: "
                                   "c.bak; none in the planned chain's own); 16 pages in 1 file(s): ")
    # No chain planned: nothing is outside it, and the boot page is the one the backups read carry.
    nothing = PageScope([], ["b.bak"], "all of them", True)
    alone = combined(PageVerification(), others, nothing)
    assert (alone.outside, alone.damaged, alone.boot) == ([], ["c.bak: cut"], others.boot)
    assert not judge(alone).summary.count("outside")


def test_a_message_about_a_file_outside_the_chain_that_does_not_start_with_its_name_still_says_so():
    from verification.engines.mssql.page_check import _marked

    assert _marked("b.bak: cut", ["b.bak"]) == "b.bak (outside the planned chain): cut"
    assert _marked("b.bak", ["b.bak"]) == "b.bak (outside the planned chain)"
    assert _marked("b.bak.old: cut", ["b.bak"]) == "b.bak.old: cut (outside the planned chain)"


def test_nothing_to_read_in_the_whole_database_says_so():
    assert judge(PageVerification(database_wide=True)).summary == (
        "not run: the database has no full or differential backup")
    assert judge(PageVerification(compressed=["x.bak"], database_wide=True)).summary.startswith(
        "not run: every data backup of the database is natively compressed;")


def test_the_evidence_says_whose_pages_were_read_first():
    found = PageVerification([scan_of("a.bak"), scan_of("b.bak", (replace(MISMATCH, path="b.bak"),))],
                             scope="the chain and b.bak", outside=["b.bak"])
    text = render(found)
    assert text.startswith("# Offline page verification (restoreproof, engines/mssql/pages.py)\n\n"
                           "backups read: the chain and b.bak\n\na.bak: 16 pages,")
    assert "\nb.bak (outside the planned chain): 16 pages, 12 checksums verified" in text
    assert "\n1 finding(s):\nb.bak (outside the planned chain): offset 0x4000, page 1:9 " in text


# -- encrypted backups: never verified offline, never silent -------------------------------------------


def noise_for_pages(path: Path) -> None:
    """Every page of a copy's data stream overwritten with random bytes, as BACKUP ... WITH ENCRYPTION leaves
    them to a reader without the certificate (the MTF structure around them stays plain)."""
    import os

    from verification.engines.mssql.pages import PAGE, locate_data_streams
    from verification.sources.base import SourceFile

    data = bytearray(path.read_bytes())
    for stream in locate_data_streams(SourceFile(LocalSource(path.parent), path.name)):
        for at in range(stream.offset, stream.offset + stream.pages * PAGE, PAGE):
            data[at:at + PAGE] = os.urandom(PAGE)
    path.write_bytes(data)


def test_a_backup_none_of_whose_pages_reads_as_a_page_is_not_verifiable_offline_never_passed(mssql_copy):
    root = mssql_copy(RTC)
    noise_for_pages(root / RTC / f"{RTC}.bak")
    # Alone: the check did not run (before, this read as "no damaged page" with 0 checksums verified).
    alone = judge(read_pages(LocalSource(root / RTC), [f"{RTC}.bak"]))
    assert (alone.status, alone.required) == (CheckStatus.SKIPPED, False)
    assert alone.summary.startswith("not run: no data backup of the chain is verifiable offline; 1 file(s) not "
                                    f"verifiable offline (the restore verifies them): {RTC}.bak: not verifiable "
                                    "offline: none of its 168 pages reads as a SQL Server page: an encrypted backup "
                                    "(BACKUP ... WITH ENCRYPTION), or pages overwritten")
    assert alone.details["pages"] == 0 and alone.details["checksums_verified"] == 0
    # In its chain: the differential is verified; the full is named, never counted.
    (db,) = scan(LocalSource(root / RTC)).databases
    check = verify_pages(plan(db, RTC, None), LocalSource(root / RTC), Evidence(Path(root / "evidence")))
    assert check.status is CheckStatus.PASSED and list(check.details["per_file"]) == [f"{RTC}2.bak"]
    assert check.findings == [check.details["not_verifiable_offline"][0]]
    assert "none of its 168 pages reads as a SQL Server page" in (root / "evidence" / EVIDENCE).read_text()


def test_a_backup_the_plan_knows_to_be_encrypted_is_not_read(mssql_corpus, tmp_path):
    from verification.model import BackupEncryption, EncryptionState

    (db,) = scan(LocalSource(mssql_corpus / RTC)).databases
    planned = plan(db, RTC, None)
    known = BackupEncryption(EncryptionState.ENCRYPTED, "as the header says", "aes_256", "CERTIFICATE", "0xAB")
    planned.chain.backups[1] = replace(planned.chain.backups[1], encryption=known)
    check = verify_pages(planned, LocalSource(mssql_corpus / RTC), Evidence(tmp_path))
    assert list(check.details["per_file"]) == [f"{RTC}.bak"]
    assert check.details["not_verifiable_offline"] == [f"{RTC}2.bak: not verifiable offline: encrypted (as the "
                                                       "header says)"]
    assert check.details["bytes_read"] < (mssql_corpus / RTC / f"{RTC}.bak").stat().st_size + 4096
