"""Catalog and chain planning on the real SQL Server corpus and on damaged copies of it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from tests.unit.engines.mssql.mtf_edit import Backup
from verification.cli import app
from verification.engines.mssql.catalog import scan
from verification.engines.mssql.chain import plan
from verification.model import ChainStatus, RestorePlan
from verification.sources import LocalSource

runner = CliRunner()


def plans(root: Path, at: datetime | None = None) -> dict[str, RestorePlan]:
    catalog = scan(LocalSource(root))
    return {catalog.display_name(db): plan(db, catalog.display_name(db), at) for db in catalog.databases}


def files(result: RestorePlan) -> list[str]:
    return [Path(b.path).name for b in result.chain.backups]


def rules(result: RestorePlan) -> dict[str, list[bool]]:
    found: dict[str, list[bool]] = {}
    for rule in result.chain.rules:
        found.setdefault(rule.rule, []).append(rule.passed)
    return found


def test_full_diff_and_logs_latest(mssql_corpus):
    result = plans(mssql_corpus / "RestoreTimeClean")["RestoreTimeClean"]
    assert result.chain.status is ChainStatus.COMPLETE
    assert files(result) == ["RestoreTimeClean.bak", "RestoreTimeClean2.bak", "RestoreTimeClean2_1.trn",
                             "RestoreTimeClean2_2.trn", "RestoreTimeClean2_3.trn"]
    assert rules(result)["differential-base"] == [True]
    # The logs before the differential are superseded by it, and say so.
    assert "RestoreTimeClean_1.trn" not in files(result)


def test_removing_a_log_breaks_the_chain_with_sql_servers_own_words(mssql_copy):
    root = mssql_copy("RestoreTimeClean")
    (root / "RestoreTimeClean/RestoreTimeClean2_2.trn").unlink()
    result = plans(root)["RestoreTimeClean"]
    assert result.chain.status is ChainStatus.BROKEN
    (problem,) = result.chain.problems
    assert problem.code == "log-gap"
    assert (problem.expected_lsn, problem.found_lsn) == ("25000000020000001", "25000000021000001")
    assert problem.files == ("RestoreTimeClean/RestoreTimeClean2_1.trn", "RestoreTimeClean/RestoreTimeClean2_3.trn")
    assert ("The log in this backup set begins at LSN 25000000021000001, which is too recent to apply to the "
            "database. An earlier log backup that includes LSN 25000000020000001 can be restored.") in problem.message
    assert "4305" in problem.message
    assert rules(result)["log-continuity"] == [False]


def test_point_in_time_stops_at_the_terminal_log(mssql_corpus):
    at = datetime(2020, 5, 12, 13, 31, 0, tzinfo=UTC)
    result = plans(mssql_corpus / "sql2008-backups/StopAt", at)["StopAt"]
    assert result.chain.status is ChainStatus.COMPLETE
    # StopAt_21 is the first log starting after the target; StopAt_23 must not be applied after a STOPAT in 21
    # (the corpus README shows SQL Server's 4305 when it was).
    assert files(result) == ["StopAt.bak", "StopAt_1.trn", "StopAt_2.trn", "StopAt_21.trn"]
    assert result.stop_at == at
    assert rules(result)["terminal-log"] == [True]


def _finish_two_minutes_later(path: Path) -> None:
    """A slow log backup: BackupFinishDate two minutes after BackupStartDate (MTF minutes sit above 6 bits)."""
    backup = Backup(path.read_bytes())
    start = int.from_bytes(backup.data[backup.chunk(0, b"SCIN") + 0x4D:][:5], "big")
    later = start + (2 << 6)
    backup.in_both_copies(b"SCIN", 0x52, ">IB", later >> 8, later & 0xFF)
    path.write_bytes(bytes(backup.data))


def test_a_log_that_finished_after_the_target_but_started_before_it_is_not_the_terminal_log(mssql_copy):
    # RestoreTimeClean2_2.trn started 13:24:13; restamped, it finished 13:26:13. Its records end near its
    # start, so a target inside its backup window is in RestoreTimeClean2_3.trn: chosen by its finish,
    # 2_2 would get the STOPAT, SQL Server would stop at its end (message 4322) short of the target.
    root = mssql_copy("RestoreTimeClean")
    _finish_two_minutes_later(root / "RestoreTimeClean/RestoreTimeClean2_2.trn")
    chained = ["RestoreTimeClean.bak", "RestoreTimeClean2.bak", "RestoreTimeClean2_1.trn", "RestoreTimeClean2_2.trn"]
    for second in (1, 47, 2 * 60):  # just after its start, inside its window, at its very finish
        at = datetime(2017, 6, 1, 13, 24, 13, tzinfo=UTC) + timedelta(seconds=second)
        result = plans(root, at)["RestoreTimeClean"]
        assert files(result) == [*chained, "RestoreTimeClean2_3.trn"], at
        assert result.chain.status is ChainStatus.COMPLETE
        assert rules(result)["terminal-log-by-start"] == [True]
        assert result.chain.rules[-1].detail == (
            "RestoreTimeClean/RestoreTimeClean2_3.trn starts at 2017-06-01T13:29:13+00:00, at or after the target, "
            f"and holds the records up to its start: RESTORE LOG ... WITH STOPAT = '{at.isoformat()}'")
    # At its start exactly, 2_2 holds the target: it is the terminal log, and nothing is said about straddling.
    at_start = plans(root, datetime(2017, 6, 1, 13, 24, 13, tzinfo=UTC))["RestoreTimeClean"]
    assert files(at_start) == chained
    assert "terminal-log-by-start" not in rules(at_start)
    # A second before its start, 2_2 is still the terminal log (it started after the target).
    before = plans(root, datetime(2017, 6, 1, 13, 24, 12, tzinfo=UTC))["RestoreTimeClean"]
    assert files(before) == chained
    assert "terminal-log-by-start" not in rules(before)


def test_a_target_while_the_last_log_was_written_is_not_reachable(mssql_copy):
    root = mssql_copy("RestoreTimeClean")
    _finish_two_minutes_later(root / "RestoreTimeClean/RestoreTimeClean2_3.trn")
    result = plans(root, datetime(2017, 6, 1, 13, 30, tzinfo=UTC))["RestoreTimeClean"]
    assert result.chain.status is ChainStatus.BROKEN
    (problem,) = result.chain.problems
    assert problem.code == "terminal-log-missing"
    assert problem.message == (
        "no log backup reaches 2017-06-01T13:30:00+00:00: the chain ends with RestoreTimeClean/RestoreTimeClean2_3.trn "
        "(started 2017-06-01T13:29:13+00:00, finished 2017-06-01T13:31:13+00:00, LastLSN 25000000022000001); no log "
        "backup started at or after the target")
    assert [(r.rule, r.passed, r.detail) for r in result.chain.rules[-2:]] == [
        ("terminal-log-by-start", True,
         "RestoreTimeClean/RestoreTimeClean2_3.trn started at 2017-06-01T13:29:13+00:00, before the target, and "
         "finished at 2017-06-01T13:31:13+00:00: its records end near its start, so it is restored whole and is not "
         "the terminal log"),
        ("terminal-log", False, problem.message)]


def test_point_in_time_after_every_backup_is_refused_not_broken(mssql_corpus):
    # Nothing in the source was written after the point: no file can be missing for it, so the
    # request is refused ("error", with the point the backups can serve), never a failed chain.
    result = plans(mssql_corpus / "sql2008-backups/StopAt", datetime(2030, 1, 1, tzinfo=UTC))["StopAt"]
    assert result.chain.status is ChainStatus.REFUSED
    (problem,) = result.chain.problems
    assert problem.code == "point-beyond-backups"
    assert problem.message.startswith("the point 2030-01-01T00:00:00+00:00 is after every backup of database StopAt "
                                      "(the newest, ")
    assert "StopAt_23.trn" in problem.message and problem.message.endswith(
        "nothing in the source leads there; ask for a point at or before that, or latest")
    assert [(r.rule, r.passed) for r in result.chain.rules[-1:]] == [("point-within-backups", False)]


def test_the_last_logs_finish_is_the_boundary_between_a_missing_log_and_a_point_too_late(mssql_copy):
    root = mssql_copy("RestoreTimeClean")
    _finish_two_minutes_later(root / "RestoreTimeClean/RestoreTimeClean2_3.trn")  # 13:29:13 .. 13:31:13
    just_before = plans(root, datetime(2017, 6, 1, 13, 31, 12, tzinfo=UTC))["RestoreTimeClean"]
    assert just_before.chain.status is ChainStatus.BROKEN  # written after the point: its log is missing
    assert [p.code for p in just_before.chain.problems] == ["terminal-log-missing"]
    at_its_finish = plans(root, datetime(2017, 6, 1, 13, 31, 13, tzinfo=UTC))["RestoreTimeClean"]
    assert at_its_finish.chain.status is ChainStatus.REFUSED  # nothing written after it
    assert [p.code for p in at_its_finish.chain.problems] == ["point-beyond-backups"]


def test_point_before_every_full_is_refused_not_broken(mssql_corpus):
    # Retention or a point before the first backup: nothing kept restores to it, no file is missing.
    result = plans(mssql_corpus / "sql2008-backups/StopAt", datetime(2001, 1, 1, tzinfo=UTC))["StopAt"]
    assert result.chain.status is ChainStatus.REFUSED
    (problem,) = result.chain.problems
    assert problem.code == "point-before-backups"
    assert problem.message.startswith("the point 2001-01-01T00:00:00+00:00 is before every full backup of database "
                                      "StopAt (the oldest, StopAt.bak, finished ")
    assert problem.message.endswith("ask for a point at or after that, or latest")


def test_a_point_at_the_oldest_fulls_finish_is_served_and_a_differential_without_its_full_is_broken(mssql_copy):
    root = mssql_copy("DoubleDiffing")
    full = plans(root)["doublediff"].chain.backups[0]
    assert plans(root, full.finish)["doublediff"].chain.status is ChainStatus.COMPLETE
    (root / "DoubleDiffing/difftest-full.bak").unlink()
    orphaned = plans(root, full.finish)["doublediff"]
    assert orphaned.chain.status is ChainStatus.BROKEN  # its differentials remain: their full is missing
    assert [p.code for p in orphaned.chain.problems] == ["no-full"]


def test_striped_sets_need_every_family(mssql_copy):
    root = mssql_copy("history/sql2016-stripe")
    complete = plans(root)["RestoreTimeStripe"]
    assert complete.chain.status is ChainStatus.COMPLETE
    assert [b.family for b in complete.chain.backups][:2] == ["1/2", "2/2"]
    (root / "history/sql2016-stripe/Stripe2/restoretime_22a.trn").unlink()
    broken = plans(root)["RestoreTimeStripe"]
    assert broken.chain.status is ChainStatus.BROKEN
    problem = broken.chain.problems[0]
    assert problem.code == "missing-family"
    assert "family 2 of 2 is missing" in problem.message and "restoretime_22.trn" in problem.message


def test_2008_stripe_set_plans_both_families(mssql_corpus):
    result = plans(mssql_corpus / "sql2008-backups/RestoreTimeStripe")["RestoreTimeStripe"]
    assert result.chain.status is ChainStatus.COMPLETE
    assert files(result)[:2] == ["RestoreTimeStripe2.bak", "RestoreTimeStripe2a.bak"]
    assert len(result.chain.backups) % 2 == 0


def test_differentials_on_the_wrong_base_are_skipped_and_said(mssql_copy):
    # Two full cycles mixed: remove the second full, so the newer differentials have no base here.
    root = mssql_copy("OlaMsFilter/complex")
    (root / "OlaMsFilter/complex/Full/test_FULL_20160629_142200.bak").unlink()
    result = plans(root)["OlaMsFilterTest"]
    assert files(result)[:2] == ["test_FULL_20160629_141300.bak", "test_DIFF_20160629_141900.bak"]
    wrong = [r.detail for r in result.chain.rules if r.rule == "differential-base" and not r.passed]
    assert len(wrong) == 2 and all("skipped: its base" in d for d in wrong)
    assert any("test_DIFF_20160629_142800.bak" in d for d in wrong)
    assert result.chain.status is ChainStatus.COMPLETE  # the logs carry the chain past the skipped diffs


def test_ola_layout_empty_logs_and_two_incarnations(mssql_corpus):
    result = plans(mssql_corpus / "OlaMsFilter")
    assert set(result) == {"OlaMsFilterTest (created 2018-06-29 14:11:15)",
                           "OlaMsFilterTest (created 2018-07-02 08:15:24)"}
    complex_ = result["OlaMsFilterTest (created 2018-07-02 08:15:24)"]
    assert files(complex_) == ["test_FULL_20160629_142200.bak", "test_DIFF_20160629_142800.bak"]
    (empty,) = [r for r in complex_.chain.rules if r.rule == "empty-logs-skipped"]
    assert empty.detail.startswith("6 empty log backup(s) skipped")


def test_ola_server_layout_trusts_headers(mssql_corpus):
    result = plans(mssql_corpus / "sql2008-backups")
    assert result["db1"].chain.status is ChainStatus.BROKEN  # the corpus has no full of db1
    assert result["db1"].chain.problems[0].code == "no-full"
    assert [b.type for b in result["db2"].chain.backups] == ["full", "diff"]


def test_cli_plan_json_contract(mssql_corpus):
    result = runner.invoke(app, ["plan", str(mssql_corpus / "RestoreTimeClean"), "--engine", "mssql", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    (db,) = data["databases"]
    assert db["database"] == "RestoreTimeClean" and db["stop_at"] is None
    first = db["chain"]["backups"][0]
    assert first["path"] == "RestoreTimeClean.bak" and first["type"] == "full"
    assert first["first_lsn"] == "25000000006200170" and first["last_lsn"] == "25000000013200001"
    assert first["family"] == "1/1" and first["size_bytes"] == 1460736
    assert db["chain"]["status"] == "complete" and all("rule" in r for r in db["chain"]["rules"])


def test_cli_plan_broken_exit_1(mssql_copy):
    root = mssql_copy("RestoreTimeClean")
    (root / "RestoreTimeClean/RestoreTimeClean2_2.trn").unlink()
    result = runner.invoke(app, ["plan", str(root), "--engine", "mssql", "--json"])
    assert result.exit_code == 1
    problem = json.loads(result.stdout)["databases"][0]["chain"]["problems"][0]
    assert problem["expected_lsn"] == "25000000020000001" and problem["found_lsn"] == "25000000021000001"


def test_cli_plan_corrupt_file_exit_1_names_it(mssql_copy):
    root = mssql_copy("RestoreTimeClean")
    victim = root / "RestoreTimeClean/RestoreTimeClean2_3.trn"
    victim.write_bytes(victim.read_bytes()[:20000])
    result = runner.invoke(app, ["plan", str(root), "--engine", "mssql", "--json"])
    assert result.exit_code == 1  # a damaged backup is "failed", like a broken chain
    assert "RestoreTimeClean/RestoreTimeClean2_3.trn: end of file at offset 0x4e20" in result.stderr
    assert "the file is truncated" in result.stderr
    (entry,) = json.loads(result.stdout)["unreadable"]
    assert entry["path"] == "RestoreTimeClean/RestoreTimeClean2_3.trn" and entry["kind"] == "corrupt"


def test_compressed_backups_are_listed_never_skipped(mssql_corpus):
    result = runner.invoke(app, ["plan", str(mssql_corpus / "history"), "--engine", "mssql", "--json"])
    assert result.exit_code == 2  # unread backup files: not everything could be proven
    unreadable = json.loads(result.stdout)["unreadable"]
    assert {u["path"] for u in unreadable} == {"compressed/SharePoint_Config_a.bak",
                                               "compressed/SharePoint_Config_b.bak"}
    assert all(u["kind"] == "needs-server" for u in unreadable)
    assert "needs-server: compressed/SharePoint_Config_a.bak: natively compressed" in result.stderr


def test_auto_detects_sql_server_files(mssql_corpus):
    result = runner.invoke(app, ["plan", str(mssql_corpus / "DoubleDiffing"), "--json"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["engine"] == "mssql"
    assert [Path(b["path"]).name for b in data["databases"][0]["chain"]["backups"]] == ["difftest-full.bak",
                                                                                        "difftest-diff2.bak"]


def test_a_target_at_the_end_of_a_differential_needs_no_log(mssql_corpus):
    # OlaMsFilter complex: DIFF_142500 finished 08:17:48; the next log began at 08:17:55.
    at = datetime(2018, 7, 2, 8, 17, 48, tzinfo=UTC)
    result = plans(mssql_corpus / "OlaMsFilter/complex", at)["OlaMsFilterTest"]
    assert result.chain.status is ChainStatus.COMPLETE
    assert files(result) == ["test_FULL_20160629_142200.bak", "test_DIFF_20160629_142500.bak"]
    (terminal,) = [r for r in result.chain.rules if r.rule == "terminal-log"]
    assert terminal.passed and "restored without a log or STOPAT" in terminal.detail


def test_random_points_on_chains_without_logs_stay_complete(mssql_corpus):
    from verification.config import load_settings
    from verification.engines.mssql.engine import MssqlEngine
    from verification.restore_points import PointChoice, PointStrategy

    engine = MssqlEngine(load_settings())
    for folder in ("DoubleDiffing", "sql2008-backups/SimpleRecovery"):
        for seed in range(1, 6):
            (result,) = engine.plan(LocalSource(mssql_corpus / folder), None,
                                    PointChoice(PointStrategy.RANDOM, seed)).plans
            assert result.chain.status is ChainStatus.COMPLETE, (folder, seed, result.chain.problems)
            assert result.chain.backups[-1].finish <= result.stop_at or result.chain.backups[-1].type == "log"


def test_plan_lists_the_files_it_reads_and_the_backups_secured_points(mssql_corpus):
    from verification.config import Settings
    from verification.engines.mssql.engine import MssqlEngine
    from verification.prediction.objectives import rpo

    result = plans(mssql_corpus / "RestoreTimeClean")["RestoreTimeClean"]
    assert [Path(f).name for f in result.files] == files(result)
    assert result.history is not None and len(result.history.points) >= len(result.chain.backups)
    newest = result.history.newest
    assert newest is not None and newest.at == max(b.finish for b in result.chain.backups)
    works = {w.phase: w for w in MssqlEngine(Settings()).phase_work(result)}
    logs = sum(b.size_bytes or 0 for b in result.chain.backups if b.type == "log")
    assert works["log_restore"].bytes_read == logs > 0
    assert works["transfer"].bytes_read == sum(b.size_bytes or 0 for b in result.chain.backups if b.type != "log")
    # Restored to the end of the last log: nothing behind the newest backup; the worst gap is between two sets.
    achieved = rpo(86400.0, result.history, newest.at, newest.at)
    assert achieved.behind_newest_seconds == 0.0
    assert achieved.worst_log_gap_seconds is not None and achieved.worst_log_gap_seconds > 0


def test_a_damaged_backup_is_known_by_its_trailer_whatever_its_name(mssql_copy):
    # The newest log, its head zeroed and renamed to an extension nobody lists: still the
    # database's damaged log backup (its closing copy says whose), never "not a backup".
    root = mssql_copy("RestoreTimeClean")
    newest = root / "RestoreTimeClean/RestoreTimeClean2_3.trn"
    data = bytearray(newest.read_bytes())
    data[0:4] = bytes(4)
    newest.unlink()
    (root / "RestoreTimeClean/RestoreTimeClean2_3.tlog").write_bytes(bytes(data))
    result = runner.invoke(app, ["plan", str(root), "--engine", "mssql", "--json"])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    (entry,) = out["unreadable"]
    assert (entry["path"], entry["kind"], entry["database"]) == (
        "RestoreTimeClean/RestoreTimeClean2_3.tlog", "corrupt", "RestoreTimeClean")
    (db,) = out["databases"]
    assert [d["code"] for d in db["chain"]["defects"]] == ["unreadable-backup"]


# ---- rules from the whole header ---------------------------------------------------------------------------

import dataclasses  # noqa: E402

from verification.engines.mssql.catalog import DatabaseCatalog, MediaSet  # noqa: E402
from verification.engines.mssql.chain import duration  # noqa: E402

SIMPLE = "sql2008-backups/SimpleRecovery"
F1_FORK = 0x9C  # SCIN: RecoveryForkID; then the parent fork's LSN (+0xAC) and GUID (+0xB8)


def test_simple_recovery_rounds_a_point_between_backups_down_and_is_not_broken(mssql_corpus):
    at = datetime(2018, 4, 6, 12, 50, 0, tzinfo=UTC)  # 2 h 9 min 28 s after the second differential
    result = plans(mssql_corpus / SIMPLE, datetime(2018, 4, 6, 10, 38, 0, tzinfo=UTC))["SimpleBackTest"]
    assert result.chain.status is ChainStatus.COMPLETE and not result.chain.problems
    assert files(result) == ["SimpleBacktest.bak", "SimpleBackTest_1.bak"]
    (rounded,) = [r for r in result.chain.rules if r.rule == "point-in-time-rounded"]
    assert rounded.detail == ("SIMPLE recovery restores only to the end of a backup: the target "
                              "2018-04-06T10:38:00+00:00 is rounded down by 2 min 28 s to the end of diff "
                              "SimpleBackTest_1.bak (2018-04-06T10:35:32+00:00)")
    assert rules(result)["recovery-model"] == [True]
    late = plans(mssql_corpus / SIMPLE, at)["SimpleBackTest"]
    assert files(late) == ["SimpleBacktest.bak", "SimpleBackTest_2.bak"]
    assert "rounded down by 2 h 9 min to the end of diff SimpleBackTest_2.bak" in late.chain.rules[-1].detail
    latest = plans(mssql_corpus / SIMPLE)["SimpleBackTest"]
    assert latest.chain.status is ChainStatus.COMPLETE and "point-in-time-rounded" not in rules(latest)
    assert [b.recovery_model for b in latest.chain.backups] == ["SIMPLE", "SIMPLE"]


def test_a_full_recovery_database_without_its_logs_is_still_broken(mssql_copy):
    root = mssql_copy("sql2008-backups/StopAt")
    for log in (root / "sql2008-backups/StopAt").glob("*.trn"):
        log.unlink()
    result = plans(root, datetime(2020, 5, 12, 13, 31, 0, tzinfo=UTC))["StopAt"]
    # Not rounded down to the data backup as for SIMPLE recovery; with nothing written after the point,
    # the request is refused: no file is proven missing.
    assert result.chain.status is ChainStatus.REFUSED
    assert [p.code for p in result.chain.problems] == ["point-beyond-backups"]
    assert "recovery-model" not in rules(result) and result.chain.backups[0].recovery_model == "FULL"


def test_duration_is_said_as_a_reader_says_it():
    assert [duration(s) for s in (0, 0.2, 0.5, 45, 148, 7980, 8068, 90061)] == [
        "0 s", "under 1 s", "under 1 s", "45 s", "2 min 28 s", "2 h 13 min", "2 h 14 min", "1 d 1 h"]


def test_differential_base_is_checked_by_guid(mssql_corpus):
    result = plans(mssql_corpus / "DoubleDiffing")["doublediff"]
    (base,) = [r for r in result.chain.rules if r.rule == "differential-base"]
    assert base.detail == ("differential difftest-diff2.bak: DifferentialBaseGUID "
                           "f24e3dc4-fb3c-48aa-9360-fc9ee26d1464 equals the full's BackupSetGUID (DatabaseBackupLSN "
                           "24000000006800099, the full's CheckpointLSN 24000000006800099)")
    diff = result.chain.backups[1]
    assert diff.differential_base_guid == result.chain.backups[0].backup_set_guid


def test_a_differential_whose_guid_names_another_full_is_refused_even_if_its_lsn_matches(mssql_copy):
    root = mssql_copy("DoubleDiffing")
    for name in ("difftest-diff1.bak", "difftest-diff2.bak"):
        path = root / "DoubleDiffing" / name
        backup = Backup(path.read_bytes())
        backup.in_both_copies(b"SCIN", 0x110, "<16s", bytes(range(16)))  # DifferentialBaseGUID
        path.write_bytes(bytes(backup.data))
    result = plans(root)["doublediff"]
    assert files(result) == ["difftest-full.bak"]
    assert [d.code for d in result.chain.defects] == ["differential-on-another-base"] * 2
    assert "DifferentialBaseGUID 03020100-0504-0706-0809-0a0b0c0d0e0f" in result.chain.defects[0].message


def mark(db: DatabaseCatalog, name: str, **changes: object) -> None:
    """Set header fields the offline reader cannot see (copy-only, damaged) on a real backup's header."""
    for media in db.sets:
        for number, header in media.families.items():
            if Path(header.path).name == name:
                media.families[number] = dataclasses.replace(header, **changes)  # type: ignore[arg-type]


def test_a_copy_only_full_is_never_a_differential_base(mssql_corpus):
    catalog = scan(LocalSource(mssql_corpus / "OlaMsFilter/complex"))
    (db,) = catalog.databases
    mark(db, "test_FULL_20160629_142200.bak", is_copy_only=True)
    result = plan(db, "test", None)
    assert [d.code for d in result.chain.defects] == ["differential-on-copy-only-full"] * 2
    assert rules(result)["differential-base"] == [False, False, True]
    assert any(r.detail == "full Full/test_FULL_20160629_142200.bak is copy-only: never a differential base"
               for r in result.chain.rules)
    # The copy-only full still restores the logs after it.
    assert result.chain.status is ChainStatus.COMPLETE
    assert files(result)[0] == "test_FULL_20160629_142200.bak" and "test_DIFF_20160629_142800.bak" not in files(result)


def test_a_copy_only_log_is_not_required_and_does_not_break(mssql_corpus):
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    (db,) = catalog.databases
    regular = next(m for m in db.sets if m.files == ["RestoreTimeClean2_2.trn"])
    h = regular.header
    # A copy-only log taken between RestoreTimeClean2_1 and 2_2: it starts where 2_2 starts, ends earlier.
    copy_only = dataclasses.replace(h, path="copyonly.trn", media_set_guid="c0c0c0c0-0000-0000-0000-000000000000",
                                    last_lsn=h.first_lsn + 5 * 10**5, is_copy_only=True)
    db.sets.append(MediaSet(copy_only.media_set_guid, 1, {1: copy_only}))
    db.sets.sort(key=lambda s: (s.header.last_lsn, s.header.first_lsn))
    result = plan(db, "RestoreTimeClean", None)
    assert result.chain.status is ChainStatus.COMPLETE
    assert "copyonly.trn" not in files(result)
    assert files(result)[-2:] == ["RestoreTimeClean2_2.trn", "RestoreTimeClean2_3.trn"]
    (said,) = [r for r in result.chain.rules if r.rule == "copy-only-logs"]
    assert said.detail.endswith(": copyonly.trn")
    # Without the regular log, the copy-only one is what continues the chain, and it is used.
    db.sets.remove(regular)
    assert "copyonly.trn" in files(plan(db, "RestoreTimeClean", None))


def test_a_damaged_backup_fails_the_chain(mssql_corpus):
    catalog = scan(LocalSource(mssql_corpus / "RestoreTimeClean"))
    (db,) = catalog.databases
    mark(db, "RestoreTimeClean2.bak", is_damaged=True)
    result = plan(db, "RestoreTimeClean", None)
    assert result.chain.status is ChainStatus.BROKEN
    (problem,) = result.chain.problems
    assert problem.code == "damaged-backup" and problem.files == ("RestoreTimeClean2.bak",)
    assert "WITH CONTINUE_AFTER_ERROR" in problem.message
    assert rules(result)["backups-not-damaged"] == [False]
    # Known undamaged everywhere: said so.
    for media in db.sets:
        for n, header in media.families.items():
            media.families[n] = dataclasses.replace(header, is_damaged=False)
    assert rules(plan(db, "RestoreTimeClean", None))["backups-not-damaged"] == [True]


def refork(path: Path, fork: bytes, parent: bytes | None = None, point: tuple[int, int, int] | None = None) -> None:
    backup = Backup(path.read_bytes())
    backup.in_both_copies(b"SCIN", F1_FORK, "<16s", fork)
    if parent is not None and point is not None:
        backup.in_both_copies(b"SCIN", 0xAC, "<IIH", *point)
        backup.in_both_copies(b"SCIN", 0xB8, "<16s", parent)
    path.write_bytes(bytes(backup.data))


def test_a_log_of_another_recovery_fork_is_not_applied(mssql_copy):
    root = mssql_copy("sql2008-backups/StopAt")
    folder = root / "sql2008-backups/StopAt"
    refork(folder / "StopAt_2.trn", bytes(range(16)))
    result = plans(root)["StopAt"]
    assert result.chain.status is ChainStatus.BROKEN
    assert files(result) == ["StopAt.bak", "StopAt_1.trn"]
    (gap,) = result.chain.problems
    assert gap.code == "log-gap"
    assert gap.message.endswith("; not applied, being on another recovery fork than "
                                "8a118155-c949-42c1-bce2-eff2a9f9ed28: sql2008-backups/StopAt/StopAt_2.trn "
                                "(recovery fork 03020100-0504-0706-0809-0a0b0c0d0e0f)")
    (fork,) = [r for r in result.chain.rules if r.rule == "recovery-fork"]
    assert "StopAt_2.trn (recovery fork 03020100-0504-0706-0809-0a0b0c0d0e0f)" in fork.detail


def test_logs_on_a_fork_that_branched_off_the_chain_are_followed(mssql_copy, mssql_corpus):
    root = mssql_copy("sql2008-backups/StopAt")
    folder = root / "sql2008-backups/StopAt"
    parent = Backup((folder / "StopAt.bak").read_bytes())
    at = parent.chunk(1, b"SCIN")
    old_fork = bytes(parent.data[at + F1_FORK:at + F1_FORK + 16])
    # The database was restored to the end of StopAt_2 (LSN 19000000019300001) and went on: a new fork.
    for name in ("StopAt_21.trn", "StopAt_23.trn"):
        refork(folder / name, bytes(range(16)), old_fork, (19, 193, 1))
    result = plans(root)["StopAt"]
    assert result.chain.status is ChainStatus.COMPLETE
    assert files(result) == ["StopAt.bak", "StopAt_1.trn", "StopAt_2.trn", "StopAt_21.trn", "StopAt_23.trn"]
    (fork,) = [r for r in result.chain.rules if r.rule == "recovery-fork"]
    assert fork.detail == ("sql2008-backups/StopAt/StopAt_21.trn continues on recovery fork "
                           "03020100-0504-0706-0809-0a0b0c0d0e0f, which branched off fork "
                           f"{read_fork(mssql_corpus)} at LSN 19000000019300001")


def read_fork(root: Path) -> str:
    from verification.engines.mssql.mtf import read_backup_header
    from verification.sources.base import SourceFile
    fork = read_backup_header(SourceFile(LocalSource(root), "sql2008-backups/StopAt/StopAt.bak")).recovery_fork_guid
    assert fork is not None
    return fork


# ---- from the review: a newer differential lost under SIMPLE, "latest" on a newer fork, the base ----------


def test_simple_recovery_keeps_a_newer_differential_missing_a_stripe_as_a_defect(mssql_corpus):
    (db,) = scan(LocalSource(mssql_corpus / "sql2008-backups/SimpleRecovery")).databases
    newest = max((m for m in db.sets if m.header.backup_type == "diff"), key=lambda m: m.header.last_lsn)
    newest.family_count = 2  # its second stripe is missing
    result = plan(db, "SimpleBackTest", None)
    assert result.chain.status is ChainStatus.COMPLETE  # the older differential still restores: proven, not passed
    assert files(result) == ["SimpleBacktest.bak", "SimpleBackTest_1.bak"]
    (defect,) = result.chain.defects
    assert defect.code == "newer-diff-incomplete" and defect.files == ("SimpleBackTest_2.bak",)


def test_a_target_at_the_very_end_of_a_simple_backup_is_not_rounded(mssql_corpus):
    from verification.model import POINT_ROUNDED_RULE

    (db,) = scan(LocalSource(mssql_corpus / "sql2008-backups/SimpleRecovery")).databases
    diff = max((m for m in db.sets if m.header.backup_type == "diff"), key=lambda m: m.header.last_lsn)
    result = plan(db, "SimpleBackTest", diff.finish)
    assert POINT_ROUNDED_RULE not in rules(result)
    assert rules(result)["terminal-log"] == [True]


def _new_fork(db, names: tuple[str, ...], point: int, first: int | None = None) -> str:  # type: ignore[no-untyped-def]
    """Put the logs named on a new recovery fork that branched off the chain's at LSN `point`."""
    old = db.sets[0].header.recovery_fork_guid
    new = "03020100-0504-0706-0809-0a0b0c0d0e0f"
    for media in db.sets:
        for n, header in media.families.items():
            if header.path.endswith(names):
                media.families[n] = dataclasses.replace(header, recovery_fork_guid=new, parent_fork_guid=old,
                                                        fork_point_lsn=point,
                                                        first_lsn=first if first is not None else header.first_lsn)
    return old


def test_latest_follows_the_newest_fork_and_leaves_the_abandoned_branch(mssql_corpus):
    # Restored to the end of StopAt_2 and went on as a new fork (StopAt_23); StopAt_21 is the branch left.
    (db,) = scan(LocalSource(mssql_corpus / "sql2008-backups/StopAt")).databases
    end_of_2 = 19000000019300001
    old = _new_fork(db, ("StopAt_23.trn",), end_of_2, first=end_of_2)
    result = plan(db, "StopAt", None)
    assert result.chain.status is ChainStatus.COMPLETE and not result.chain.defects
    assert files(result) == ["StopAt.bak", "StopAt_1.trn", "StopAt_2.trn", "StopAt_23.trn"]
    abandoned = [r.detail for r in result.chain.rules if r.rule == "recovery-fork" and "abandoned" in r.detail]
    assert abandoned == [f"the newest log backup StopAt_23.trn is on recovery fork "
                         f"03020100-0504-0706-0809-0a0b0c0d0e0f, which branched off fork {old} at LSN {end_of_2}: "
                         f"the logs of fork {old} after that point are an abandoned branch, not applied: "
                         "StopAt_21.trn"]


def test_a_newest_log_on_a_fork_the_chain_cannot_reach_fails_latest(mssql_corpus):
    # The new fork branched off before what the full already restored: SQL Server cannot follow it.
    (db,) = scan(LocalSource(mssql_corpus / "sql2008-backups/StopAt")).databases
    full_end = max(m.header.last_lsn for m in db.sets if m.header.backup_type == "full")
    _new_fork(db, ("StopAt_21.trn", "StopAt_23.trn"), full_end - 1)
    result = plan(db, "StopAt", None)
    assert files(result) == ["StopAt.bak", "StopAt_1.trn", "StopAt_2.trn"]
    (defect,) = result.chain.defects
    assert defect.code == "newest-log-on-another-fork"
    assert defect.message.startswith("the newest log backup StopAt_23.trn (finished ")
    assert "03020100-0504-0706-0809-0a0b0c0d0e0f) is not on the branch restored" in defect.message


def test_a_fork_point_the_chain_has_passed_is_not_followed(mssql_corpus):
    # Branched off at the end of StopAt_1, but StopAt_2 (same fork as the chain) already went past it.
    (db,) = scan(LocalSource(mssql_corpus / "sql2008-backups/StopAt")).databases
    log_1 = next(m for m in db.sets if m.files[0].endswith("StopAt_1.trn"))
    _new_fork(db, ("StopAt_21.trn", "StopAt_23.trn"), log_1.header.last_lsn)
    at = next(m for m in db.sets if m.files[0].endswith("StopAt_23.trn")).finish
    result = plan(db, "StopAt", at)  # a point in time: the newest-fork rule for "latest" does not apply
    assert "StopAt_21.trn" not in files(result) and "StopAt_23.trn" not in files(result)


def test_a_differential_whose_guid_matches_but_lsn_does_not_is_not_on_that_base(mssql_corpus):
    from verification.engines.mssql.chain import on_base

    (db,) = scan(LocalSource(mssql_corpus / "RestoreTimeClean")).databases
    full = next(m for m in db.sets if m.header.backup_type == "full").header
    diff = next(m for m in db.sets if m.header.backup_type == "diff").header
    assert on_base(diff, full)
    assert not on_base(dataclasses.replace(diff, database_backup_lsn=diff.database_backup_lsn + 1), full)
    assert not on_base(dataclasses.replace(diff, differential_base_guid="0" * 32), full)
    # Without GUIDs (a header that carries none), the LSN alone decides, both ways.
    bare_full, bare_diff = (dataclasses.replace(full, backup_set_guid=None),
                            dataclasses.replace(diff, differential_base_guid=None))
    assert on_base(bare_diff, bare_full)
    assert not on_base(dataclasses.replace(bare_diff, database_backup_lsn=1), bare_full)


def test_a_fork_that_branched_off_another_fork_is_not_followed(mssql_corpus):
    (db,) = scan(LocalSource(mssql_corpus / "sql2008-backups/StopAt")).databases
    end_of_2 = 19000000019300001
    _new_fork(db, ("StopAt_21.trn", "StopAt_23.trn"), end_of_2)
    for media in db.sets:  # the same fork point, but the parent is not the chain's fork
        for n, header in media.families.items():
            if header.parent_fork_guid is not None:
                media.families[n] = dataclasses.replace(header, parent_fork_guid="ffffffff-0000-0000-0000-000000000000")
    at = next(m for m in db.sets if m.files[0].endswith("StopAt_23.trn")).finish
    assert files(plan(db, "StopAt", at)) == ["StopAt.bak", "StopAt_1.trn", "StopAt_2.trn"]
    latest = plan(db, "StopAt", None)
    assert files(latest) == ["StopAt.bak", "StopAt_1.trn", "StopAt_2.trn"]
    assert [d.code for d in latest.chain.defects] == ["newest-log-on-another-fork"]


def test_every_header_fact_reaches_the_backup_set_as_read(mssql_corpus):
    from verification.engines.mssql.chain import backup_sets
    from verification.model import BackupFile

    (db,) = scan(LocalSource(mssql_corpus / "restoretimeclean2016")).databases
    media = next(m for m in db.sets if m.header.backup_type == "diff")
    (backup,) = backup_sets(media)
    assert (backup.recovery_model, backup.copy_only, backup.backup_set_guid, backup.differential_base_lsn,
            backup.differential_base_guid, backup.recovery_fork_guid, backup.fork_point_lsn, backup.parent_fork_guid,
            backup.begins_log_chain, backup.bulk_logged, backup.damaged, backup.compatibility_level,
            backup.collation) == (
        "FULL", False, "a62c00af-c30b-41e9-b2cd-ed06e068ede7", "39000000048800071",
        "c6c44151-8a2c-4c6c-9bf5-2e02090c8ebc", "6d3a541d-31c4-4207-975e-917419133822", "25000000015300001",
        "e4b9b1b7-255c-4866-af1f-eb4a29e8c2c9", False, None, None, 100, "SQL_Latin1_General_CP1_CI_AS")
    assert (backup.position, backup.writer, backup.layout_proven) == (
        1, "SQL Server 13.0.5081 (SQL Server 2016)", True)
    data = "C:\\Program Files\\Microsoft SQL Server\\MSSQL13.SQL2016\\MSSQL\\DATA\\RestoreTimeClean"
    assert backup.database_files == (
        BackupFile("RestoreTimeClean", "D", 3407872, 1, "PRIMARY", f"{data}.mdf"),
        BackupFile("RestoreTimeClean_log", "L", 5963776, 2, None, f"{data}_log.LDF"))
    # The flags no corpus file sets arrive as the header says them, never dropped.
    family = next(iter(media.families))
    media.families[family] = dataclasses.replace(media.families[family], is_copy_only=True, is_damaged=False,
                                                 has_bulk_logged_data=True, differential_base_lsn=None,
                                                 fork_point_lsn=None)
    (flagged,) = backup_sets(media)
    assert (flagged.copy_only, flagged.damaged, flagged.bulk_logged, flagged.differential_base_lsn,
            flagged.fork_point_lsn) == (True, False, True, None, None)
    # A log that starts where the database's log chain began.
    log = next(m for m in scan(LocalSource(mssql_corpus / "RestoreTimeClean")).databases[0].sets
               if m.files == ["RestoreTimeClean_1.trn"])
    assert backup_sets(log)[0].begins_log_chain is log.header.begins_log_chain is True


def test_duration_edges():
    assert [duration(s) for s in (1, 59, 60, 86399, 86400, 3600, 3661)] == [
        "1 s", "59 s", "1 min", "23 h 59 min", "1 d", "1 h", "1 h 1 min"]


def test_a_guid_on_one_side_only_leaves_the_lsn_to_decide(mssql_corpus):
    from verification.engines.mssql.chain import _base_named, on_base

    (db,) = scan(LocalSource(mssql_corpus / "RestoreTimeClean")).databases
    full = next(m for m in db.sets if m.header.backup_type == "full").header
    diff = next(m for m in db.sets if m.header.backup_type == "diff").header
    without_full_guid = dataclasses.replace(full, backup_set_guid=None)
    wrong_guid = dataclasses.replace(diff, differential_base_guid="0" * 32)
    assert on_base(wrong_guid, without_full_guid)  # nothing to compare the GUID with: the LSN agrees
    assert _base_named(wrong_guid, without_full_guid) == ("DatabaseBackupLSN 25000000006200170 equals the full's "
                                                          "CheckpointLSN")
