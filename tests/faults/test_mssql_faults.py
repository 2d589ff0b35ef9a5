"""SQL Server faults made on copies of the real backups in ../shared/testdata, one test each.

No SQL Server can run here, so `verify` is pointed at an image that cannot be had: a database with
nothing wrong ends "error" (not restored), and a fault must still make its database "failed", or
the run "error" where a file went unread, naming the file and the offset or LSN, before any server.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.faults

RTC = "RestoreTimeClean"


@pytest.fixture
def config(isolated: Path) -> Path:
    """A SQL Server image name that no registry has: the restore step fails fast, as an error."""
    path = isolated / "restoreproof.yaml"
    path.write_text(yaml.safe_dump({"mssql": {"images": {957: "restoreproof/no-such-sqlserver:none"}}}))
    return path


def verify(restoreproof, root: Path, config: Path):  # type: ignore[no-untyped-def]
    return restoreproof("verify", root, "--engine", "mssql", "--config", str(config))


def plan(restoreproof, root: Path):  # type: ignore[no-untyped-def]
    return restoreproof("plan", root, "--engine", "mssql")


def reasons(run, database: str) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(run.database(database)["reasons"])


def test_the_clean_copy_is_only_an_error_for_want_of_a_server(mssql_copy, restoreproof, config):
    # The baseline every fault below departs from: nothing wrong offline, nothing restored.
    root = mssql_copy(RTC)
    assert plan(restoreproof, root).exit_code == 0
    run = verify(restoreproof, root, config)
    assert run.database(RTC)["verdict"] == "error"
    assert run.exit_code == 2
    assert "restoreproof/no-such-sqlserver:none" in reasons(run, RTC)


def test_a_damaged_first_block_of_the_newest_log_fails_its_database_and_says_the_point_moved_back(
        mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    victim = root / RTC / "RestoreTimeClean2_3.trn"
    data = bytearray(victim.read_bytes())
    data[:512] = bytes(512)
    victim.write_bytes(bytes(data))
    run = verify(restoreproof, root, config)
    db = run.database(RTC)
    assert db["verdict"] == "failed" and run.exit_code == 1
    first = db["reasons"][0]
    assert first.startswith("log backup RestoreTimeClean/RestoreTimeClean2_3.trn (LSN 25000000021000001 to "
                            "25000000022000001")
    assert "media header at offset 0x0: expected 'TAPE'" in first
    assert "newer than the chain restored, which ends at LastLSN 25000000021000001" in first
    (unread,) = run.report["unreadable"]
    assert (unread["kind"], unread["database"]) == ("corrupt", RTC)
    # The chain planned without it is one log shorter, and says so instead of looking whole.
    assert [b["path"] for b in db["chain"]["backups"]][-1] == "RestoreTimeClean/RestoreTimeClean2_2.trn"


def test_a_truncated_bak_fails_its_database_naming_the_offset(mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    victim = root / RTC / "RestoreTimeClean2.bak"
    victim.write_bytes(victim.read_bytes()[:100_000])
    run = verify(restoreproof, root, config)
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    assert "RestoreTimeClean/RestoreTimeClean2.bak: end of file at offset 0x186a0" in reasons(run, RTC)
    assert "truncated" in reasons(run, RTC)


def test_random_bytes_named_bak_are_a_damaged_backup_not_a_stray_file(mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    junk = root / RTC / "RestoreTimeClean_extra.bak"
    junk.write_bytes(random.Random(7).randbytes(64 * 1024))
    run = verify(restoreproof, root, config)
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    text = reasons(run, RTC)
    assert "RestoreTimeClean/RestoreTimeClean_extra.bak" in text
    assert f"found {junk.read_bytes()[:16].hex(' ')}" in text


def test_a_missing_stripe_of_the_newest_full_fails_although_an_older_full_restores(mssql_copy, restoreproof, config):
    root = mssql_copy("history/sql2016-stripe")
    (root / "history/sql2016-stripe/Stripe2/restoretime2a.bak").unlink()
    run = verify(restoreproof, root, config)
    db = run.database("RestoreTimeStripe")
    assert db["verdict"] == "failed" and run.exit_code == 1
    assert db["reasons"][0].startswith("the newest full history/sql2016-stripe/Stripe1/restoretime2.bak (LastLSN "
                                       "34000000017200001) cannot "
                                       "be restored: family 2 of 2 is missing")
    assert db["chain"]["status"] == "complete"  # the older full still makes a chain: proven, not passed


def test_a_natively_compressed_file_beside_readable_ones_keeps_the_run_from_passing(mssql_copy, mssql_corpus,
                                                                                      restoreproof):
    root = mssql_copy(RTC)
    (root / RTC / "SharePoint_Config_a.bak").write_bytes(
        (mssql_corpus / "history/compressed/SharePoint_Config_a.bak").read_bytes())
    result = plan(restoreproof, root)
    assert result.exit_code == 2  # the chain is whole, but one backup file could not be read
    (unread,) = result.report["unreadable"]
    assert (unread["path"], unread["kind"]) == ("RestoreTimeClean/SharePoint_Config_a.bak", "needs-server")
    assert "natively compressed" in result.stderr


def test_a_differential_on_a_base_that_is_not_there_fails_naming_both_lsns(mssql_copy, restoreproof, config):
    root = mssql_copy("OlaMsFilter/complex")
    (root / "OlaMsFilter/complex/Full/test_FULL_20160629_142200.bak").unlink()
    run = verify(restoreproof, root, config)
    name = next(d["database"] for d in run.report["databases"] if d["database"].startswith("OlaMsFilterTest"))
    db = run.database(name)
    assert db["verdict"] == "failed" and run.exit_code == 1
    defects = [d for d in db["chain"]["defects"] if d["code"] == "differential-on-another-base"]
    assert any("test_DIFF_20160629_142800.bak" in d["message"] for d in defects)
    assert all(d["expected_lsn"] and d["found_lsn"] and d["expected_lsn"] != d["found_lsn"] for d in defects)


def test_a_missing_log_in_the_middle_breaks_the_chain_with_sql_servers_4305(mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    (root / RTC / "RestoreTimeClean2_2.trn").unlink()
    run = verify(restoreproof, root, config)
    db = run.database(RTC)
    assert db["verdict"] == "failed" and run.exit_code == 1
    assert db["chain"]["status"] == "broken"
    assert "begins at LSN 25000000021000001, which is too recent" in reasons(run, RTC)
    assert "includes LSN 25000000020000001" in reasons(run, RTC)
    assert run.report["target_kind"] is None  # nothing was started for a chain that cannot restore


def test_a_flipped_byte_in_a_descriptor_block_names_the_block_and_offset(mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    victim = root / RTC / "RestoreTimeClean2_1.trn"
    data = bytearray(victim.read_bytes())
    data[10] ^= 0x01  # inside the TAPE block's 52-byte header, covered by its checksum
    victim.write_bytes(bytes(data))
    run = verify(restoreproof, root, config)
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    assert "RestoreTimeClean/RestoreTimeClean2_1.trn: TAPE block header checksum at offset 0x0" in reasons(run, RTC)


def test_a_file_cut_inside_its_trailer_is_named(mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    victim = root / RTC / "RestoreTimeClean2_3.trn"
    victim.write_bytes(victim.read_bytes()[:-1024])  # whole blocks, but the closing ones are gone
    run = verify(restoreproof, root, config)
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    assert "RestoreTimeClean/RestoreTimeClean2_3.trn" in reasons(run, RTC)


def test_a_database_whose_only_backup_is_damaged_still_appears_failed(mssql_copy, restoreproof, config):
    root = mssql_copy("singlerestore/singlerestore.bak")
    victim = root / "singlerestore/singlerestore.bak"
    data = bytearray(victim.read_bytes())
    data[:512] = bytes(512)
    victim.write_bytes(bytes(data))
    run = verify(restoreproof, root, config)
    (db,) = run.report["databases"]
    assert db["verdict"] == "failed" and run.exit_code == 1
    assert db["database"] == "singlerestore"
    assert db["chain"]["problems"][0]["files"] == ["singlerestore/singlerestore.bak"]
    # Head and trailer both gone: the name comes from the folder, and says so.
    victim.write_bytes(bytes(len(data)))
    run = verify(restoreproof, root, config)
    (db,) = run.report["databases"]
    assert db["verdict"] == "failed" and "named from its folder" in db["reasons"][0]


def test_a_readme_beside_the_backups_is_listed_with_its_first_bytes_and_decides_nothing(mssql_copy, restoreproof):
    root = mssql_copy(RTC)
    (root / RTC / "README.txt").write_text("Backups of RestoreTimeClean, kept 14 days.\n")
    result = plan(restoreproof, root)
    assert result.exit_code == 0
    (unread,) = result.report["unreadable"]
    assert unread["kind"] == "not-a-backup"
    assert "starts with 42 61 63 6b 75 70 73" in unread["reason"]


def test_an_excluded_pattern_is_named_and_keeps_a_damaged_file_from_failing(mssql_copy, restoreproof, isolated):
    root = mssql_copy(RTC)
    (root / RTC / "old.bak").write_bytes(b"not a backup at all")
    config = isolated / "exclude.yaml"
    config.write_text(yaml.safe_dump({"exclude": ["*/old.bak"]}))
    result = restoreproof("plan", root, "--engine", "mssql", "--config", str(config))
    assert result.exit_code == 0, result.stderr
    (unread,) = result.report["unreadable"]
    assert (unread["kind"], unread["reason"]) == ("excluded", "excluded by the pattern '*/old.bak'")
    assert os.environ.get("RESTOREPROOF_CONFIG") is None


# ---- pages: faults in the data itself, found offline by page verification --------------------------------

FULL = f"{RTC}/RestoreTimeClean.bak"


def _pages(path: Path, kind: int = 1):  # type: ignore[no-untyped-def]
    """(byte offset, header) of every checksummed page of `kind` in a backup's data stream, in file order."""
    from verification.engines.mssql.pages import PAGE, decode_header, locate_data_streams
    from verification.sources import LocalSource
    from verification.sources.base import SourceFile

    reader = SourceFile(LocalSource(path.parent), path.name)
    data = path.read_bytes()
    found = []
    for stream in locate_data_streams(reader):
        for index in range(stream.pages):
            offset = stream.offset + index * PAGE
            header = decode_header(data[offset:offset + PAGE])
            if header.header_version == 1 and header.page_type == kind and header.has_checksum:
                found.append((offset, header))
    assert found, f"no checksummed page of type {kind} in {path}"
    return found


def _damage(victim: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = bytearray(victim.read_bytes())
    change(data)
    victim.write_bytes(bytes(data))


def _page_check(run, database: str = RTC) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return next(c for c in run.database(database)["checks"] if c["name"] == "page_verification")


def test_the_clean_copy_verifies_every_page_offline_and_says_it_is_no_verdict_on_the_data(
        mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    run = verify(restoreproof, root, config)
    check = _page_check(run)
    assert (check["status"], check["kind"], check["required"]) == ("passed", "backup_files", True)
    # Both data backups of the chain, every checksummed page verified.
    assert set(check["details"]["per_file"]) == {FULL, f"{RTC}/RestoreTimeClean2.bak"}
    assert check["details"]["checksums_verified"] > 100 and check["details"]["pages"] >= \
        check["details"]["checksums_verified"]
    assert run.database(RTC)["verdict"] == "error"
    assert any(r.startswith("page_verification (backup files, not a verdict on the data): no damaged page;")
               for r in run.database(RTC)["reasons"])


@pytest.mark.parametrize("target", ["auto", "offline"])
def test_a_flipped_bit_in_a_pages_body_fails_naming_file_offset_page_and_both_checksums(
        mssql_copy, restoreproof, config, target):
    root = mssql_copy(RTC)
    victim = root / FULL
    offset, header = _pages(victim)[0]
    _damage(victim, lambda data: data.__setitem__(offset + 4000, data[offset + 4000] ^ 0x10))
    run = restoreproof("verify", root, "--engine", "mssql", "--config", str(config), "--target", target)
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    check = _page_check(run)
    assert check["status"] == "failed" and check["summary"].startswith("1 damaged page(s);")
    (finding,) = check["findings"]
    assert finding.startswith(f"{FULL}: offset {offset:#x}, page {header.file_id}:{header.page_id} "
                              f"(object {header.object_id}, index {header.index_id}): checksum mismatch (stored "
                              f"{header.stored_checksum:#010x}, computed 0x")
    assert run.database(RTC)["reasons"][0].startswith("page_verification failed: 1 damaged page(s)")


def test_a_flipped_bit_in_a_page_header_fails_as_a_misplaced_page_with_a_bad_checksum(mssql_copy, restoreproof,
                                                                                          config):
    root = mssql_copy(RTC)
    victim = root / FULL
    offset, header = _pages(victim)[0]
    _damage(victim, lambda data: data.__setitem__(offset + 0x20, data[offset + 0x20] ^ 0x04))  # the page id
    run = verify(restoreproof, root, config)
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    said = "\n".join(_page_check(run)["findings"])
    moved = f"{header.file_id}:{header.page_id ^ 0x04}"
    assert f"{FULL}: offset {offset:#x}, page {moved}" in said
    assert f"holds page {moved}" in said and "checksum mismatch" in said


def test_two_pages_swapped_are_both_named_out_of_place(mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    victim = root / FULL
    (first, a), (second, b) = _pages(victim)[0], _pages(victim)[-1]
    assert (a.page_id // 8) != (b.page_id // 8)  # from two different extents

    def swap(data: bytearray) -> None:
        data[first:first + 8192], data[second:second + 8192] = data[second:second + 8192], data[first:first + 8192]

    _damage(victim, swap)
    run = verify(restoreproof, root, config)
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    said = "\n".join(_page_check(run)["findings"])
    assert f"offset {first:#x}, page {b.file_id}:{b.page_id}" in said
    assert f"offset {second:#x}, page {a.file_id}:{a.page_id}" in said
    assert "checksum mismatch" not in said  # each page is whole: only where it lies is wrong


def test_a_torn_write_of_one_sector_fails_naming_the_page(mssql_copy, restoreproof, config):
    root = mssql_copy(RTC)
    victim = root / FULL
    (offset, header), (other, _) = _pages(victim)[0], _pages(victim)[1]
    data = victim.read_bytes()
    # One 512-byte sector of the page written from another page's write (the first sector that differs).
    sector = next(s * 512 for s in range(1, 16)
                  if data[offset + s * 512:offset + s * 512 + 512] != data[other + s * 512:other + s * 512 + 512])
    _damage(victim, lambda data: data.__setitem__(slice(offset + sector, offset + sector + 512),
                                                  data[other + sector:other + sector + 512]))
    run = restoreproof("verify", root, "--engine", "mssql", "--target", "offline")
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    (finding,) = _page_check(run)["findings"]
    assert f"offset {offset:#x}, page {header.file_id}:{header.page_id}" in finding and "checksum mismatch" in finding


def test_a_zeroed_stretch_of_the_data_streams_framing_is_the_files_damage_not_a_page_fault(mssql_copy, restoreproof,
                                                                                           config):
    from verification.engines.mssql.mtf import STREAM_HEADER
    from verification.engines.mssql.pages import STREAM_PREFIX, locate_data_streams
    from verification.sources import LocalSource
    from verification.sources.base import SourceFile

    root = mssql_copy(RTC)
    victim = root / FULL
    (stream,) = locate_data_streams(SourceFile(LocalSource(root), FULL))
    header_at = stream.offset - STREAM_PREFIX - STREAM_HEADER  # the MQDA stream's own header
    _damage(victim, lambda data: data.__setitem__(slice(header_at, header_at + STREAM_HEADER), bytes(STREAM_HEADER)))
    run = verify(restoreproof, root, config)
    assert run.database(RTC)["verdict"] == "failed" and run.exit_code == 1
    check = _page_check(run)
    (said,) = check["findings"]
    # The MTF reader names the file and where its structure stopped making sense; no page is blamed.
    assert said.startswith(f"backup file damaged: {FULL}: ") and "stream header" in said
    assert ", page " not in said and check["details"]["damaged"] == [said.removeprefix("backup file damaged: ")]


# ---- pages of a striped backup: its two families read as one backup ---------------------------------------

STRIPE = "history/sql2016-stripe"
STRIPE1, STRIPE2 = f"{STRIPE}/Stripe1/restoretime2.bak", f"{STRIPE}/Stripe2/restoretime2a.bak"  # the newest full


def test_an_allocated_page_zeroed_in_the_second_stripe_fails_offline_by_the_first_stripes_pfs_page(
        mssql_copy, restoreproof):
    root = mssql_copy(STRIPE)
    # Page 1:58: slot 2 of stripe 2's extent 1:56 at 0x32200; PFS page 1:1, which marks it allocated, is in stripe 1.
    _damage(root / STRIPE2, lambda data: data.__setitem__(slice(0x36200, 0x38200), bytes(8192)))
    run = restoreproof("verify", root, "--engine", "mssql", "--target", "offline")
    assert run.database("RestoreTimeStripe")["verdict"] == "failed" and run.exit_code == 1
    check = _page_check(run, "RestoreTimeStripe")
    assert check["findings"] == [f"{STRIPE2}: offset 0x36200, page 1:58 (object 0, index 0): page 1:58 is allocated "
                                 f"(PFS page 1:1 in {STRIPE1}) but is all zeros"]
    assert set(check["details"]["per_file"]) == {STRIPE1, STRIPE2}


def test_an_extent_of_the_first_stripe_copied_into_the_second_fails_offline_naming_both_files(
        mssql_copy, restoreproof):
    root = mssql_copy(STRIPE)
    extent = (root / STRIPE1).read_bytes()[0x42200:0x52200]  # 1:64-1:71 (object 3, index 0)
    _damage(root / STRIPE2, lambda data: data.__setitem__(slice(0x32200, 0x42200), extent))  # over 1:56-1:63
    run = restoreproof("verify", root, "--engine", "mssql", "--target", "offline")
    assert run.database("RestoreTimeStripe")["verdict"] == "failed" and run.exit_code == 1
    check = _page_check(run, "RestoreTimeStripe")
    assert check["summary"].startswith("8 damaged page(s);")
    assert check["findings"] == [
        f"{STRIPE2}: offset {0x32200 + k * 8192:#x}, page 1:{64 + k} (object 3, index 0): page 1:{64 + k} seen twice: "
        f"first at offset {0x42200 + k * 8192:#x} in {STRIPE1}" for k in range(8)]


# ---- whose pages: every backup asked for (--pages all), and a broken chain's own ------------------------------

SIMPLE = "OlaMsFilter/Simple"
OLDER, NEWER = f"{SIMPLE}/test_FULL_20160629_141300.bak", f"{SIMPLE}/test_FULL_20160629_141320.bak"


def offline(restoreproof, root: Path, *options: str):  # type: ignore[no-untyped-def]
    return restoreproof("verify", root, "--engine", "mssql", "--target", "offline", *options)


def test_every_backup_asked_for_finds_a_damaged_full_outside_the_chain_and_fails_its_database(
        mssql_copy, restoreproof, isolated):
    root = mssql_copy(SIMPLE)
    offset, header = _pages(root / OLDER)[0]
    _damage(root / OLDER, lambda data: data.__setitem__(offset + 4000, data[offset + 4000] ^ 0x10))
    # By default only the chain's newer full is read: nothing wrong with it.
    chain = offline(restoreproof, root)
    name = "OlaMsFilterTest"
    assert chain.database(name)["verdict"] == "error" and chain.exit_code == 3  # offline, nothing wrong found
    check = _page_check(chain, name)
    assert check["status"] == "passed" and list(check["details"]["per_file"]) == [NEWER]
    assert f"; backups read: the planned chain's full and differential backups ({NEWER}); " in check["summary"]
    # Asked for every backup: the older full's page is named, outside the chain, and fails the database.
    run = offline(restoreproof, root, "--pages", "all")
    db = run.database(name)
    assert db["verdict"] == "failed" and run.exit_code == 1
    check = _page_check(run, name)
    assert check["status"] == "failed" and check["details"]["outside_chain"] == [OLDER]
    assert check["summary"].startswith(f"1 damaged page(s) (in backup(s) outside the planned chain: {OLDER}; none in "
                                       "the planned chain's own); 368 pages in 2 file(s): ")
    (finding,) = check["findings"]
    assert finding.startswith(f"{OLDER} (outside the planned chain): offset {offset:#x}, page "
                              f"{header.file_id}:{header.page_id} (object {header.object_id}, index "
                              f"{header.index_id}): checksum mismatch (stored {header.stored_checksum:#010x}, "
                              "computed 0x")
    assert db["reasons"][0].startswith("page_verification failed: 1 damaged page(s) (in backup(s) outside")
    assert db["reasons"][1] == "not restored: offline verification asked for (--target offline)"
    # The plan is the same either way.
    assert db["chain"] == chain.database(name)["chain"] and db["chain"]["status"] == "complete"
    # The setting says the same; the option given beats it.
    config = isolated / "all.yaml"
    config.write_text(yaml.safe_dump({"mssql": {"pages": "all"}}))
    assert offline(restoreproof, root, "--config", str(config)).database(name)["verdict"] == "failed"
    beaten = offline(restoreproof, root, "--config", str(config), "--pages", "chain")
    assert _page_check(beaten, name)["status"] == "passed" and beaten.exit_code == 3


DB1 = "sql2008-backups/db1"


def test_a_chain_without_a_full_still_has_its_differentials_verified_beside_its_failure(mssql_copy, restoreproof):
    root = mssql_copy(DB1)
    diffs = [f"{DB1}/DIFF/SQL2008_db1_DIFF_20170518_041819.bak", f"{DB1}/DIFF/SQL2008_db1_DIFF_20170518_041826.bak"]
    run = offline(restoreproof, root)
    db = run.database("db1")
    assert db["verdict"] == "failed" and run.exit_code == 1
    assert db["reasons"] == ["chain broken: no full backup of db1"]
    check = _page_check(run, "db1")
    assert check["status"] == "passed" and list(check["details"]["per_file"]) == diffs
    assert (check["details"]["files"], check["details"]["pages"], check["details"]["checksums_verified"]) == (2, 256, 248)
    # A damaged differential is named beside the broken chain.
    offset, header = _pages(root / diffs[1])[0]
    _damage(root / diffs[1], lambda data: data.__setitem__(offset + 4000, data[offset + 4000] ^ 0x10))
    damaged = offline(restoreproof, root)
    db = damaged.database("db1")
    assert db["verdict"] == "failed" and damaged.exit_code == 1
    assert db["reasons"][0] == "chain broken: no full backup of db1"
    assert db["reasons"][1].startswith("page_verification failed: 1 damaged page(s); 256 pages in 2 file(s): ")
    (finding,) = _page_check(damaged, "db1")["findings"]
    assert finding.startswith(f"{diffs[1]}: offset {offset:#x}, page {header.file_id}:{header.page_id} ")
