"""A verdict is never 'passed' by default: each missing piece of evidence has its own test."""

from tests.unit.factories import broken_plan, complete_plan, online_outcome, passed_check
from verification.engines.base import RestoreOutcome
from verification.model import CheckResult, CheckStatus, Verdict
from verification.verdict import decide


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
    assert "no integrity check ran" in reasons[0]


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
