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
