"""A verdict is never 'passed' by default: each missing piece of evidence has its own test."""

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.unit.factories import broken_plan, complete_plan, online_outcome, passed_check
from verification.engines.base import RestoreOutcome
from verification.exit_codes import ExitCode
from verification.model import (
    DATABASES_CHECKED,
    DATABASES_EXISTING,
    DATABASES_NOT_CHECKED,
    CheckKind,
    CheckResult,
    CheckStatus,
    Problem,
    Verdict,
)
from verification.report_model import RunReport
from verification.verdict import OFFLINE_NOT_RESTORED, OFFLINE_REASON, decide, offline_clean


def test_passed_needs_complete_chain_online_restore_and_passing_checks():
    verdict, reasons = decide(complete_plan(), online_outcome(passed_check(), passed_check("pg_checksums")))
    assert verdict is Verdict.PASSED
    assert reasons[0].startswith("chain complete: full 20261122-010000F")
    assert any(r.startswith("pg_amcheck: no corruption") for r in reasons)


def test_broken_chain_fails_with_the_problem_even_without_a_restore():
    verdict, reasons = decide(broken_plan(), None)
    assert verdict is Verdict.FAILED
    assert reasons == ["chain broken: missing 000000010000000000000003"]


def test_no_restore_is_an_error_not_a_pass():
    assert decide(complete_plan(), None) == (Verdict.ERROR, ["the restore did not run"])


def test_online_but_no_check_ran_is_not_a_pass():
    verdict, reasons = decide(complete_plan(), online_outcome())
    assert verdict is Verdict.ERROR
    assert "no integrity check of the restored database ran" in reasons[0]


def test_only_optional_checks_is_not_a_pass():
    optional = CheckResult("pg_checksums", CheckStatus.SKIPPED, "no checksums", required=False)
    assert decide(complete_plan(), online_outcome(optional))[0] is Verdict.ERROR


def test_not_online_is_not_a_pass_even_with_passing_checks():
    outcome = online_outcome(passed_check())
    outcome.online = False
    assert decide(complete_plan(), outcome)[0] is Verdict.ERROR


def test_a_failed_check_fails_with_its_findings():
    bad = CheckResult("pg_checksums", CheckStatus.FAILED, "1 bad checksums",
                      ['checksum verification failed in file "base/5/16396", block 3'])
    verdict, reasons = decide(complete_plan(), online_outcome(passed_check(), bad))
    assert verdict is Verdict.FAILED
    assert reasons == ['pg_checksums failed: 1 bad checksums: checksum verification failed in file "base/5/16396", '
                       'block 3']


def test_restore_failure_fails_and_check_errors_are_kept_beside_it():
    outcome = RestoreOutcome(failures=["pgbackrest restore of backup X failed: [029] zlib data error"],
                             checks=[CheckResult("pgbackrest_verify", CheckStatus.ERROR, "did not report")])
    verdict, reasons = decide(complete_plan(), outcome)
    assert verdict is Verdict.FAILED
    assert reasons[0].startswith("pgbackrest restore of backup X failed")
    assert reasons[1].startswith("pgbackrest_verify error")


def test_infrastructure_error_is_error():
    verdict, reasons = decide(complete_plan(), RestoreOutcome(errors=["target: container did not start"]))
    assert verdict is Verdict.ERROR and reasons == ["target: container did not start"]


def test_a_required_check_that_errored_blocks_the_pass():
    errored = CheckResult("sql:orders", CheckStatus.ERROR, "query failed")
    verdict, reasons = decide(complete_plan(), online_outcome(passed_check(), errored))
    assert verdict is Verdict.ERROR
    assert reasons == ["sql:orders error: query failed"]


def test_an_optional_check_never_decides_but_is_reported():
    optional = CheckResult("sql:nice-to-have", CheckStatus.FAILED, "returned '0', expected '1'", required=False)
    verdict, reasons = decide(complete_plan(), online_outcome(passed_check(), optional))
    assert verdict is Verdict.PASSED
    assert reasons[-1] == "(optional) sql:nice-to-have failed: returned '0', expected '1'"


def test_run_verdict_failed_outranks_error_and_empty_is_error():
    from tests.unit.factories import T0
    from verification.cli import exit_code
    from verification.model import RunResult

    run = RunResult("r", "postgres", "/x", T0)
    assert run.verdict is Verdict.ERROR and exit_code(run.verdict) == 2
    for verdict in (Verdict.ERROR, Verdict.FAILED, Verdict.PASSED):
        run.databases.append(type("D", (), {"verdict": verdict})())  # only .verdict is read
    assert run.verdict is Verdict.FAILED and exit_code(run.verdict) == 1


def test_online_with_passing_checks_but_no_proof_of_the_point_reached_is_not_a_pass():
    outcome = online_outcome(passed_check())
    outcome.proofs = []
    verdict, reasons = decide(complete_plan(), outcome)
    assert verdict is Verdict.ERROR
    assert reasons == ["nothing the server said proves the restore reached the planned point"]


def test_a_passed_verdict_quotes_the_servers_proof():
    verdict, reasons = decide(complete_plan(), online_outcome(passed_check()))
    assert verdict is Verdict.PASSED
    assert "redo done at 0/3000088, in 000000010000000000000003, the last planned segment" in reasons


def test_a_known_bad_newer_backup_fails_even_when_the_older_chain_restores_perfectly():
    from verification.model import Problem

    plan = complete_plan()
    plan.chain.defects.append(Problem("newest-backup-error", "newest backup 20261123-010000F is flagged in error",
                                      ("backup/demo1/20261123-010000F",)))
    verdict, reasons = decide(plan, online_outcome(passed_check()))
    assert verdict is Verdict.FAILED
    assert reasons[0] == "newest backup 20261123-010000F is flagged in error"
    # The defect is named first, then what the older chain did prove is still not hidden.
    assert decide(plan, None) == (Verdict.FAILED, ["newest backup 20261123-010000F is flagged in error",
                                                   "the restore did not run"])
    broken = broken_plan()
    broken.chain.defects = plan.chain.defects
    assert decide(broken, None)[1] == ["newest backup 20261123-010000F is flagged in error",
                                       "chain broken: missing 000000010000000000000003"]


def test_a_blank_reason_is_named_as_a_bug_never_shown_as_nothing():
    verdict, reasons = decide(complete_plan(), RestoreOutcome(errors=["  "]))
    assert verdict is Verdict.ERROR
    assert reasons == ["(a step gave no reason: a restoreproof bug, please report it)"]


def test_run_verdict_counts_unread_and_corrupt_files():
    from verification.model import UnreadableKind, overall_verdict

    assert overall_verdict(["passed"], []) is Verdict.PASSED
    assert overall_verdict(["passed"], ["not-a-backup", "excluded"]) is Verdict.PASSED
    assert overall_verdict(["passed"], [UnreadableKind.NEEDS_SERVER]) is Verdict.ERROR
    assert overall_verdict(["passed"], [UnreadableKind.UNADDRESSABLE]) is Verdict.ERROR  # maybe a backup, unread
    assert overall_verdict(["passed"], ["not-a-backup", "unaddressable"]) is Verdict.ERROR
    # Archived and not restored: unread, never "failed" (nothing says the backup is bad), never passed.
    assert overall_verdict(["passed"], [UnreadableKind.ARCHIVED]) is Verdict.ERROR
    assert overall_verdict(["passed"], ["excluded", "archived"]) is Verdict.ERROR
    assert overall_verdict(["failed"], ["archived"]) is Verdict.FAILED  # a proven bad backup still outranks it
    assert overall_verdict(["passed"], ["corrupt"]) is Verdict.FAILED
    assert overall_verdict(["passed"], ["something-new"]) is Verdict.ERROR
    assert overall_verdict([], []) is Verdict.ERROR
    assert overall_verdict(["passed"], [], unverified=True) is Verdict.ERROR


# Exact reasons: each sentence is what an auditor reads, so each is pinned (mutation testing found
# tests that only looked at the verdict).

def test_a_broken_chain_without_a_named_problem_still_says_so_with_its_failed_checks():
    plan = broken_plan()
    plan.chain.problems = []
    bad = CheckResult("pgbackrest_verify", CheckStatus.FAILED, "1 invalid file", ["invalid checksum: backup/x"])
    outcome = online_outcome(bad)
    assert decide(plan, outcome) == (Verdict.FAILED, [
        "chain broken (no detail)", "pgbackrest_verify failed: 1 invalid file: invalid checksum: backup/x"])
    assert decide(broken_plan(), outcome) == (Verdict.FAILED, [
        "chain broken: missing 000000010000000000000003",
        "pgbackrest_verify failed: 1 invalid file: invalid checksum: backup/x"])


def test_not_online_and_no_check_say_exactly_why():
    outcome = online_outcome(passed_check())
    outcome.online = False
    assert decide(complete_plan(), outcome) == (
        Verdict.ERROR, ["the restored server never came online, and no step said why"])
    assert decide(complete_plan(), online_outcome()) == (
        Verdict.ERROR, ["no integrity check of the restored database ran, so nothing proves the restored data intact"])


def test_a_passed_verdict_names_every_backup_the_wal_the_point_and_each_check():
    from datetime import UTC, datetime

    from tests.unit.factories import backup
    from verification.model import BackupType

    plan = complete_plan()
    plan.chain.backups.append(backup("20261122-010000F_20261122-020000D", BackupType.DIFF))
    skipped = CheckResult("pg_checksums", CheckStatus.SKIPPED, "not run: disabled by the setting x: false",
                          required=False)
    verdict, reasons = decide(plan, online_outcome(passed_check(), skipped))
    assert verdict is Verdict.PASSED
    assert reasons == [
        "chain complete: full 20261122-010000F, diff 20261122-010000F_20261122-020000D",
        "WAL complete: 2 segments 000000010000000000000002 to 000000010000000000000003",
        "restored to latest and online (last transaction: 2026-11-22T01:00:00+00:00)",
        "redo done at 0/3000088, in 000000010000000000000003, the last planned segment",
        "pg_amcheck: no corruption",
        "pg_checksums skipped: not run: disabled by the setting x: false"]
    plan.stop_at = datetime(2026, 11, 22, 0, 30, tzinfo=UTC)
    outcome = online_outcome(passed_check())
    outcome.achieved = None
    assert decide(plan, outcome)[1][2] == ("restored to 2026-11-22T00:30:00+00:00 and online (last transaction: "
                                           "no transaction time reported)")


def test_a_defect_beside_a_failure_lists_both_and_no_proof():
    from verification.model import Problem

    plan = complete_plan()
    plan.chain.defects.append(Problem("newer-backup-error", "newest backup flagged in error"))
    outcome = online_outcome(passed_check())
    outcome.failures.append("recovery did not reach the planned end")
    assert decide(plan, outcome) == (Verdict.FAILED, ["newest backup flagged in error",
                                                      "recovery did not reach the planned end"])
    # Without a failure, what the older chain proved follows the defect.
    assert decide(plan, online_outcome(passed_check())) == (Verdict.FAILED, [
        "newest backup flagged in error", "redo done at 0/3000088, in 000000010000000000000003, the last planned "
        "segment", "pg_amcheck: no corruption"])


def test_findings_beyond_ten_are_counted_not_dropped():
    many = CheckResult("pg_amcheck", CheckStatus.FAILED, "corruption", [f"block {i}" for i in range(12)])
    reason = decide(complete_plan(), online_outcome(many))[1][0]
    assert reason == ("pg_amcheck failed: corruption: " + "; ".join(f"block {i}" for i in range(10))
                      + " (+2 more)")
    ten = CheckResult("pg_amcheck", CheckStatus.FAILED, "corruption", [f"block {i}" for i in range(10)])
    assert decide(complete_plan(), online_outcome(ten))[1][0].endswith("block 9")


def test_a_required_check_skipped_beside_one_that_passed_is_an_error_never_a_pass():
    skipped = CheckResult("pg_checksums", CheckStatus.SKIPPED, "not run: the cluster has no data checksums")
    assert decide(complete_plan(), online_outcome(passed_check(), skipped)) == (Verdict.ERROR, [
        "required check pg_checksums is skipped: not run: the cluster has no data checksums"])


def test_eleven_findings_show_ten_and_count_the_eleventh():
    eleven = CheckResult("pg_amcheck", CheckStatus.FAILED, "corruption", [f"block {i}" for i in range(11)])
    assert decide(complete_plan(), online_outcome(eleven))[1][0].endswith("block 9 (+1 more)")


def test_an_error_after_a_proven_failure_never_turns_the_verdict_to_error():
    # Failed outranks error, and both are said: the failure first, then what stopped restoreproof.
    bad = CheckResult("pg_amcheck", CheckStatus.FAILED, "pg_amcheck found corruption (1 lines)", ["block 3"])
    errored = CheckResult("pg_checksums", CheckStatus.ERROR, "pg_checksums could not run (exit 1)")
    outcome = online_outcome(bad, errored)
    outcome.errors.append("the target was not removed (ConnectionError: gone); `restoreproof reap` removes what "
                          "is left")
    assert decide(complete_plan(), outcome) == (Verdict.FAILED, [
        "pg_amcheck failed: pg_amcheck found corruption (1 lines): block 3",
        "the target was not removed (ConnectionError: gone); `restoreproof reap` removes what is left",
        "pg_checksums error: pg_checksums could not run (exit 1)"])


def test_a_broken_chain_keeps_every_failure_and_error_the_restore_met_in_that_order():
    outcome = RestoreOutcome(failures=["pgbackrest restore of backup X failed: [029] zlib data error"],
                             errors=["target: container exited"],
                             checks=[CheckResult("pgbackrest_verify", CheckStatus.ERROR, "did not report"),
                                     CheckResult("pg_amcheck", CheckStatus.FAILED, "corruption")])
    assert decide(broken_plan(), outcome) == (Verdict.FAILED, [
        "chain broken: missing 000000010000000000000003",
        "pgbackrest restore of backup X failed: [029] zlib data error", "pg_amcheck failed: corruption",
        "target: container exited", "pgbackrest_verify error: did not report"])


def _backup_files_check(status: CheckStatus, summary: str = "6,280 pages verified",
                        findings: list[str] | None = None) -> CheckResult:
    from verification.model import CheckKind

    return CheckResult("page_verification", status, summary, findings or [], kind=CheckKind.BACKUP_FILES)


def test_a_passed_check_of_the_backup_files_alone_never_passes_a_database():
    verdict, reasons = decide(complete_plan(), online_outcome(_backup_files_check(CheckStatus.PASSED)))
    assert verdict is Verdict.ERROR
    assert reasons == ["no integrity check of the restored database ran, so nothing proves the restored data intact"]


def test_a_check_of_the_backup_files_passes_beside_a_check_of_the_restored_database():
    verdict, reasons = decide(complete_plan(), online_outcome(_backup_files_check(CheckStatus.PASSED), passed_check()))
    assert verdict is Verdict.PASSED
    assert "page_verification: 6,280 pages verified" in reasons


def test_a_failed_check_of_the_backup_files_fails_the_database_without_a_restore():
    bad = _backup_files_check(CheckStatus.FAILED, "1 damaged page", ["x.bak offset 0x2000 page 1:9: checksum mismatch"])
    outcome = RestoreOutcome(errors=["not restored: no image"], checks=[bad])
    assert decide(complete_plan(), outcome) == (Verdict.FAILED, [
        "page_verification failed: 1 damaged page: x.bak offset 0x2000 page 1:9: checksum mismatch",
        "not restored: no image"])


def test_a_failed_check_of_the_backup_files_fails_a_database_that_restored_and_passed_its_checks():
    bad = _backup_files_check(CheckStatus.FAILED, "1 damaged page", ["page 1:9: checksum mismatch"])
    verdict, reasons = decide(complete_plan(), online_outcome(passed_check(), bad))
    assert verdict is Verdict.FAILED
    assert reasons[0] == "page_verification failed: 1 damaged page: page 1:9: checksum mismatch"


def test_an_error_says_what_the_backup_files_showed_and_that_it_is_no_verdict_on_the_data():
    restored = CheckResult("dbcc_checkdb", CheckStatus.PASSED, "no errors")
    outcome = RestoreOutcome(errors=["not restored: no image"],
                             checks=[_backup_files_check(CheckStatus.PASSED), restored])
    assert decide(complete_plan(), outcome) == (Verdict.ERROR, [
        "not restored: no image",
        "page_verification (backup files, not a verdict on the data): 6,280 pages verified"])


def test_a_point_rounded_down_is_never_claimed_as_the_point_asked_for():
    from datetime import UTC, datetime

    from verification.model import POINT_ROUNDED_RULE, RuleCheck

    plan = complete_plan()
    plan.stop_at = datetime(2018, 4, 6, 10, 38, tzinfo=UTC)
    detail = "the target is rounded down by 2 min 28 s to the end of diff SimpleBackTest_1.bak"
    plan.chain.rules.append(RuleCheck(POINT_ROUNDED_RULE, False, "not applicable"))
    assert decide(plan, online_outcome(passed_check()))[1][2].startswith("restored to 2018-04-06T10:38:00+00:00 and")
    plan.chain.rules.append(RuleCheck(POINT_ROUNDED_RULE, True, detail))
    assert decide(plan, online_outcome(passed_check()))[1][2] == (
        "restored to the newest point before 2018-04-06T10:38:00+00:00 and online (last transaction: "
        f"2026-11-22T01:00:00+00:00): {detail}")


def _data_check(name: str, status: CheckStatus, summary: str, findings: list[str] | None = None,
                required: bool = True) -> CheckResult:
    from verification.model import CheckKind

    return CheckResult(name, status, summary, findings or [], required=required, kind=CheckKind.DATA)


def test_passed_data_checks_alone_never_pass_a_database():
    # What the data holds proves nothing about its pages: it never stands in for the integrity check.
    data = _data_check("data:orders", CheckStatus.PASSED, "2 expectations met on database shop, table public.orders")
    baseline = _data_check("data_baseline", CheckStatus.PASSED, "4 tables: row counts, keys as expected")
    assert decide(complete_plan(), online_outcome(data, baseline)) == (Verdict.ERROR, [
        "no integrity check of the restored database ran, so nothing proves the restored data intact"])
    both = decide(complete_plan(), online_outcome(data, _backup_files_check(CheckStatus.PASSED)))
    assert both[0] is Verdict.ERROR


def test_a_passed_data_check_beside_an_integrity_check_is_said_among_the_proofs():
    data = _data_check("data_freshness", CheckStatus.PASSED, "newest row in shop.public.orders.created_at: "
                       "2026-11-22T00:59:58+00:00, 2 s before the restore point")
    verdict, reasons = decide(complete_plan(), online_outcome(passed_check(), data))
    assert verdict is Verdict.PASSED
    assert reasons[-2:] == ["pg_amcheck: no corruption", "data_freshness: newest row in shop.public.orders.created_at: "
                            "2026-11-22T00:59:58+00:00, 2 s before the restore point"]


def test_a_failed_data_check_fails_the_database_with_its_finding_in_the_reasons():
    finding = ("database shop, table public.orders: expect_column_values_to_not_be_null(column='customer_id') "
               "failed, observed '7 unexpected (0.7% of rows), e.g. [None, None, None, None, None]'")
    failed = _data_check("data:public.orders", CheckStatus.FAILED,
                         "1 of 2 expectations failed on database shop, table public.orders", [finding])
    assert decide(complete_plan(), online_outcome(passed_check(), failed)) == (Verdict.FAILED, [
        f"data:public.orders failed: 1 of 2 expectations failed on database shop, table public.orders: {finding}"])
    # Failed without an integrity check too: a proven failure needs no other proof.
    assert decide(complete_plan(), online_outcome(failed))[0] is Verdict.FAILED


def test_a_data_check_that_errored_is_an_error_even_beside_a_passed_integrity_check():
    errored = _data_check("data_checks", CheckStatus.ERROR,
                          "the data checks could not run: OperationalError: connection refused")
    assert decide(complete_plan(), online_outcome(passed_check(), errored)) == (Verdict.ERROR, [
        "data_checks error: the data checks could not run: OperationalError: connection refused"])
    optional = _data_check("data:nice", CheckStatus.ERROR, "not run: it names database x, which the restored server "
                           "does not hold (it holds shop)", required=False)
    verdict, reasons = decide(complete_plan(), online_outcome(passed_check(), optional))
    assert verdict is Verdict.PASSED
    assert reasons[-1] == ("(optional) data:nice error: not run: it names database x, which the restored server does "
                           "not hold (it holds shop)")


# -- backups that exist but could not be read ---------------------------------------------------------

UNREAD = Problem("unread-backup", "LOG/db_LOG_2.trn could not be read (archived: in GLACIER) and may hold the "
                                  "backups its chain lacks", ("LOG/db_LOG_2.trn",))


def test_a_gap_an_unread_backup_may_fill_is_an_error_not_a_failure():
    plan = broken_plan()
    plan.chain.unread.append(UNREAD)
    assert decide(plan, None) == (Verdict.ERROR, [
        "not judged: LOG/db_LOG_2.trn could not be read (archived: in GLACIER) and may hold the backups its chain "
        "lacks", "chain broken: missing 000000010000000000000003"])


def test_a_known_bad_backup_or_a_failed_check_still_fails_a_chain_with_unread_backups():
    plan = broken_plan()
    plan.chain.unread.append(UNREAD)
    plan.chain.defects.append(Problem("unreadable-backup", "full backup F.bak is damaged", ("F.bak",)))
    assert decide(plan, None)[0] is Verdict.FAILED
    plan.chain.defects.clear()
    outcome = RestoreOutcome(checks=[CheckResult("page_verify", CheckStatus.FAILED, "2 pages damaged")])
    verdict, reasons = decide(plan, outcome)
    assert verdict is Verdict.FAILED and "page_verify failed: 2 pages damaged" in reasons


def test_a_complete_chain_that_restored_and_passed_is_not_passed_beside_a_newer_unread_backup():
    plan = complete_plan()
    plan.chain.unread.append(UNREAD)
    verdict, reasons = decide(plan, online_outcome(passed_check(), passed_check("pg_checksums")))
    assert verdict is Verdict.ERROR
    assert reasons[0].startswith("not judged: LOG/db_LOG_2.trn could not be read")
    assert not any(r.startswith("chain complete") for r in reasons)


# --- a target that ran out of memory or disk -------------------------------------------------------

OOM = "the target ran out of memory: container t OOM-killed (limit 32 MiB, docker.memory)"


def test_what_a_starved_target_met_is_an_error_with_the_cause_first_never_a_failure():
    corrupt = CheckResult("pg_amcheck", CheckStatus.FAILED, "pg_amcheck found corruption",
                          ["server closed the connection unexpectedly"])
    outcome = online_outcome(corrupt)
    outcome.failures.append("the restored server did not come online: LOG: startup process was terminated by signal 9")
    outcome.errors.append("pg_checksums could not run")
    outcome.exhausted.append(OOM)
    assert decide(complete_plan(), outcome) == (Verdict.ERROR, [
        OOM,
        "not taken as a verdict (the target ran out of resources): the restored server did not come online: LOG: "
        "startup process was terminated by signal 9",
        "not taken as a verdict (the target ran out of resources): pg_amcheck failed: pg_amcheck found corruption: "
        "server closed the connection unexpectedly",
        "pg_checksums could not run"])


def test_a_starved_target_never_passes_even_when_every_check_passed():
    outcome = online_outcome(passed_check())
    outcome.exhausted.append(OOM)
    assert decide(complete_plan(), outcome) == (Verdict.ERROR, [OOM])


def test_what_was_proven_without_the_target_still_fails_beside_a_starved_target():
    plan = complete_plan()
    plan.chain.defects.append(Problem("newest-backup-error", "newest backup X is flagged in error", ()))
    bad_file = _backup_files_check(CheckStatus.FAILED, "1 damaged page", ["page 1:9: checksum mismatch"])
    outcome = RestoreOutcome(failures=["the restored server did not come online"], checks=[bad_file], exhausted=[OOM])
    assert decide(plan, outcome) == (Verdict.FAILED, [
        "newest backup X is flagged in error",
        "page_verification failed: 1 damaged page: page 1:9: checksum mismatch",
        OOM,
        "not taken as a verdict (the target ran out of resources): the restored server did not come online"])


def refused_plan(*defects: Problem):  # type: ignore[no-untyped-def]
    from verification.model import ChainStatus

    plan = complete_plan()
    plan.chain.status = ChainStatus.REFUSED
    plan.chain.problems.append(Problem("point-beyond-archive", "the archive ends at T"))
    plan.chain.defects.extend(defects)
    return plan


def test_a_request_the_backups_cannot_serve_is_an_error_naming_it_never_failed():
    assert decide(refused_plan(), None) == (Verdict.ERROR, ["not restored: the archive ends at T"])


def test_a_refused_request_beside_a_known_bad_backup_fails_on_the_defect_alone():
    verdict, reasons = decide(refused_plan(Problem("newer-backup-error", "backup B is flagged in error")), None)
    assert verdict is Verdict.FAILED
    assert reasons == ["backup B is flagged in error", "not restored: the archive ends at T"]


def test_the_plan_commands_exit_code_for_a_refused_request_is_could_not_check():
    from verification.cli import plan_exit_code

    assert plan_exit_code([refused_plan()], []) == 2
    assert plan_exit_code([broken_plan()], []) == 1 == plan_exit_code(
        [refused_plan(Problem("newer-backup-error", "backup B is flagged in error"))], [])


# -- every database of the restored cluster looked at -----------------------------------------------

def _covering(name: str, status: CheckStatus, existing: list[str], checked: list[str],
              not_checked: dict[str, str] | None = None, kind: CheckKind = CheckKind.RESTORED,
              required: bool = True) -> CheckResult:
    return CheckResult(name, status, "summary", kind=kind, required=required,
                       details={DATABASES_EXISTING: existing, DATABASES_CHECKED: checked,
                                DATABASES_NOT_CHECKED: not_checked or {}})


def test_a_database_no_passed_integrity_check_looked_at_keeps_the_verdict_from_passing():
    # A check that passed although it says a database was left out (any check of the restored server
    # that states its databases): the verdict names the database and why.
    amcheck = _covering("pg_amcheck", CheckStatus.PASSED, ["archive", "postgres"], ["postgres"],
                        {"archive": "it refuses connections"})
    assert decide(complete_plan(), online_outcome(amcheck)) == (Verdict.ERROR, [
        "database archive of the restored cluster was not looked at by any integrity check: it refuses connections"])


def test_a_database_another_passed_integrity_check_looked_at_is_covered():
    first = _covering("pg_amcheck", CheckStatus.PASSED, ["archive", "postgres"], ["postgres"], {"archive": "why"})
    second = _covering("other", CheckStatus.PASSED, ["archive"], ["archive"])
    assert decide(complete_plan(), online_outcome(first, second))[0] is Verdict.PASSED


def test_a_database_only_a_data_check_or_an_optional_check_that_did_not_pass_looked_at_is_not_covered():
    amcheck = _covering("pg_amcheck", CheckStatus.PASSED, ["archive", "postgres"], ["postgres"])
    data = _covering("data_baseline", CheckStatus.PASSED, ["archive"], ["archive"], kind=CheckKind.DATA)
    optional = _covering("extra", CheckStatus.ERROR, ["archive"], ["archive"], required=False)
    verdict, reasons = decide(complete_plan(), online_outcome(amcheck, data, optional))
    assert verdict is Verdict.ERROR
    assert reasons[0] == ("database archive of the restored cluster was not looked at by any integrity check: "
                          "no check said why")


def test_an_optional_integrity_check_that_passed_covers_a_database():
    amcheck = _covering("pg_amcheck", CheckStatus.PASSED, ["archive", "postgres"], ["postgres"])
    extra = _covering("extra", CheckStatus.PASSED, ["archive"], ["archive"], required=False)
    assert decide(complete_plan(), online_outcome(amcheck, extra))[0] is Verdict.PASSED


def test_a_database_a_data_check_says_it_left_out_does_not_block_a_pass():
    # The data checks leave the templates out; pg_amcheck checked them.
    amcheck = _covering("pg_amcheck", CheckStatus.PASSED, ["postgres", "template1"], ["postgres", "template1"])
    data = _covering("data_baseline", CheckStatus.PASSED, ["postgres", "template1"], ["postgres"],
                     {"template1": "a template database"}, kind=CheckKind.DATA)
    verdict, reasons = decide(complete_plan(), online_outcome(amcheck, data))
    assert verdict is Verdict.PASSED
    assert "pg_amcheck: summary" in reasons


def test_a_passed_verdict_on_a_forked_archive_says_which_timeline_was_restored():
    from verification.model import TimelineFork

    plan = complete_plan()
    plan.chain.timelines = [TimelineFork(1, None, None, None, "no history file: a first timeline", False),
                            TimelineFork(2, 1, "0/E000000", None, "unknown", True)]
    plan.chain.timeline, plan.chain.timeline_choice = 2, "latest: the newest timeline"
    verdict, reasons = decide(plan, online_outcome(passed_check()))
    assert verdict is Verdict.PASSED
    assert reasons[2] == ("restored to latest on timeline 2 (latest: the newest timeline) and online (last transaction: "
                          "2026-11-22T01:00:00+00:00)")
    plan.chain.timelines = plan.chain.timelines[:1]  # one timeline: nothing to tell apart
    assert decide(plan, online_outcome(passed_check()))[1][2].startswith("restored to latest and online")


# ---- offline_clean: an offline run that found nothing wrong, decided from its published report ------------

@pytest.fixture(scope="module")
def offline_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The report.json of a real offline run (`verify --target offline`) of a clean SQL Server chain."""
    from tests.conftest import MSSQL_CORPUS
    from verification.cli import app

    if not (MSSQL_CORPUS / "MANIFEST.tsv").exists():
        pytest.skip(f"the SQL Server backup corpus is not at {MSSQL_CORPUS}")
    folder = tmp_path_factory.mktemp("offline")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_STATE_HOME", str(folder / "state"))
        env.setenv("RESTOREPROOF_PREDICTION__PROBES", "never")
        env.delenv("RESTOREPROOF_CONFIG", raising=False)
        ran = CliRunner().invoke(app, ["verify", str(MSSQL_CORPUS / "RestoreTimeClean"), "--engine", "mssql",
                                       "--target", "offline", "--json", "--report-dir", str(folder / "reports")])
    # With --json too: the report alone on stdout, nothing on stderr, and the offline code of its own.
    assert (ran.exit_code, ran.stderr) == (ExitCode.OFFLINE_CLEAN, ""), ran.output
    report: dict[str, Any] = json.loads(ran.stdout)
    return report


def clean_after(report: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> bool:
    changed = copy.deepcopy(report)
    change(changed)
    return offline_clean(RunReport.model_validate(changed))


def test_an_offline_run_with_nothing_wrong_is_clean_and_says_only_why_nothing_was_restored(offline_report):
    assert offline_clean(RunReport.model_validate(offline_report))
    (db,) = offline_report["databases"]
    assert (offline_report["verdict"], db["verdict"], db["chain"]["status"]) == ("error", "error", "complete")
    assert db["reasons"][0] == f"not restored: {OFFLINE_REASON}" == OFFLINE_NOT_RESTORED
    assert db["reasons"][1].startswith("page_verification (backup files, not a verdict on the data): no damaged page;")
    # A file that would not keep a run from passing (not a backup) leaves it clean.
    assert clean_after(offline_report, lambda r: r["unreadable"].append(
        {"path": "notes.txt", "kind": "not-a-backup", "reason": "not a SQL Server backup"}))


def _db(report: dict[str, Any]) -> dict[str, Any]:
    db: dict[str, Any] = report["databases"][0]
    return db


def _fail_check(report: dict[str, Any], status: str, required: bool = True) -> None:
    _db(report)["checks"][0].update(status=status, required=required)


def _second_database(report: dict[str, Any], reason: str) -> None:
    other = copy.deepcopy(_db(report))
    other.update(database="Other", reasons=[reason])
    report["databases"].append(other)


PROBLEM = {"code": "lsn-gap", "message": "log backup missing", "files": ["x.trn"]}

NOT_CLEAN: dict[str, Callable[[dict[str, Any]], None]] = {
    "run failed": lambda r: r.update(verdict="failed"),
    "run passed": lambda r: r.update(verdict="passed"),
    "database failed": lambda r: _db(r).update(verdict="failed"),
    "no database": lambda r: r.update(databases=[]),
    "a database due never verified": lambda r: r["not_verified"].append({"database": "B", "reason": "never ran"}),
    "a file that needs a server": lambda r: r["unreadable"].append(
        {"path": "c.bak", "kind": "needs-server", "reason": "natively compressed"}),
    "a corrupt file": lambda r: r["unreadable"].append({"path": "c.bak", "kind": "corrupt", "reason": "truncated"}),
    "a file not permitted": lambda r: r["unreadable"].append(
        {"path": "c.bak", "kind": "permission", "reason": "permission denied"}),
    "refused chain": lambda r: _db(r)["chain"].update(status="refused"),
    "broken chain": lambda r: _db(r)["chain"].update(status="broken"),
    "chain problem": lambda r: _db(r)["chain"]["problems"].append(PROBLEM),
    "known-bad backup": lambda r: _db(r)["chain"]["defects"].append(PROBLEM),
    "backup not read": lambda r: _db(r)["chain"]["unread"].append(PROBLEM),
    "check failed": lambda r: _fail_check(r, "failed"),
    "check errored": lambda r: _fail_check(r, "error"),
    "optional check errored": lambda r: _fail_check(r, "error", required=False),
    "a backup-file check skipped": lambda r: _fail_check(r, "skipped", required=False),
    "an optional check errored beside it, said nowhere else": lambda r: _db(r)["checks"].append(
        {"name": "data_checks", "status": "error", "required": False, "kind": "restored", "summary": "timed out"}),
    "another error reason": lambda r: _db(r)["reasons"].append("staging: s3 object gone"),
    "a passed check's summary not the one said": lambda r: _db(r)["checks"][0].update(summary="other"),
    "not restored for want of a target": lambda r: _db(r)["reasons"].__setitem__(
        0, "not restored: no Docker engine reachable"),
    "the offline reason said twice": lambda r: _db(r)["reasons"].append(OFFLINE_NOT_RESTORED),
    "a second database in error for another reason": lambda r: _second_database(r, "the restore did not run"),
}


@pytest.mark.parametrize("what", NOT_CLEAN)
def test_any_other_kind_of_error_is_not_clean(offline_report, what):
    assert not clean_after(offline_report, NOT_CLEAN[what])


@pytest.mark.parametrize(("folder", "noise", "status"), [("singlerestore", "singlerestore.bak", "skipped"),
                                                          ("DoubleDiffing", "difftest-diff2.bak", "passed")])
def test_an_offline_run_whose_page_check_read_no_page_of_a_backup_is_not_clean(tmp_path, monkeypatch, folder, noise,
                                                                                 status):
    """A backup whose every data page is noise (overwritten, or encrypted): the page check reads none of
    them (skipped when it is the only one, passed on the others beside it); nothing looked at that
    backup, so the offline run did not find "nothing wrong"."""
    import os
    import shutil

    from tests.conftest import MSSQL_CORPUS
    from verification.cli import app
    from verification.engines.mssql.pages import PAGE, locate_data_streams
    from verification.sources.base import SourceFile
    from verification.sources.local import LocalSource

    if not (MSSQL_CORPUS / folder).exists():
        pytest.skip(f"the SQL Server backup corpus is not at {MSSQL_CORPUS}")
    # The one database whose backup is noise (singlerestore/ holds another beside it).
    shutil.copytree(MSSQL_CORPUS / folder, tmp_path / "repo", ignore=shutil.ignore_patterns("testlastbackup*"))
    backup = tmp_path / "repo" / noise
    streams = locate_data_streams(SourceFile(LocalSource(tmp_path / "repo"), noise))
    with backup.open("r+b") as file:
        for stream in streams:
            file.seek(stream.offset)
            file.write(os.urandom(stream.pages * PAGE))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("RESTOREPROOF_PREDICTION__PROBES", "never")
    monkeypatch.delenv("RESTOREPROOF_CONFIG", raising=False)
    ran = CliRunner().invoke(app, ["verify", str(tmp_path / "repo"), "--engine", "mssql", "--target", "offline",
                                   "--json", "--report-dir", str(tmp_path / "reports")])
    (db,) = json.loads(ran.stdout)["databases"]
    assert [(c["name"], c["status"]) for c in db["checks"]] == [("page_verification", status)]
    assert ran.exit_code == ExitCode.ERROR, ran.output
