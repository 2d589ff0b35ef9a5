"""A backup's own consistent point (recovery_target 'immediate'), proven from a real server log of the
demo's full restored to it (backup-lsn-stop 0/7000100), and variants of it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.conftest import fixture_text
from verification.engines.postgres.consistent_point import prove_consistent_point
from verification.engines.postgres.serverlog import CONSISTENCY_STOP, parse_server_log
from verification.model import BackupSet, BackupType, Chain, ChainStatus, RestorePlan

LOG = fixture_text("server-recovery-immediate.log")
FULL = BackupSet("demo1", "20261128-092612F", BackupType.FULL, datetime(2026, 11, 28, 9, 26, 12, tzinfo=UTC),
                 datetime(2026, 11, 28, 9, 26, 17, tzinfo=UTC), start_lsn="0/7000028", stop_lsn="0/7000100")


def plan(backup: BackupSet = FULL) -> RestorePlan:
    return RestorePlan("postgres", "demo1", Chain(ChainStatus.COMPLETE, [backup]), backup.finish, backup,
                       consistent_point=True)


def test_the_stop_at_consistency_and_its_lsn_are_read_from_the_log() -> None:
    log = parse_server_log(LOG)
    assert (log.stop_detail, log.consistent_lsn, log.redo_done_lsn) == (CONSISTENCY_STOP, 0x7000100, 0x7000100)
    assert log.stopped_at is None and log.last_transaction is None


def test_consistency_at_the_backups_stop_lsn_is_the_proof() -> None:
    proof = prove_consistent_point(parse_server_log(LOG), plan())
    assert (proof.failures, proof.errors) == ([], [])
    assert proof.proofs == ['server log: "consistent recovery state reached at 0/7000100", backup 20261128-092612F\'s '
                            'end (backup-lsn-stop), and "recovery stopping after reaching consistency"']


@pytest.mark.parametrize("stop_lsn", ["0/70000FF", "0/7000101"])
def test_consistency_one_byte_off_the_backups_end_is_not_its_point(stop_lsn: str) -> None:
    from dataclasses import replace

    proof = prove_consistent_point(parse_server_log(LOG), plan(replace(FULL, stop_lsn=stop_lsn)))
    assert proof.proofs == []
    assert proof.failures == [
        f"the server reached a consistent state at 0/7000100, not at backup 20261128-092612F's end ({stop_lsn}, "
        "backup-lsn-stop)"]


def test_redo_done_past_a_page_boundary_after_the_backups_end_is_still_its_point() -> None:
    # The backup's end on a page boundary: the next record (redo done at) starts after the page header.
    from dataclasses import replace

    log = parse_server_log(LOG.replace("redo done at 0/7000100", "redo done at 0/7000118"))
    proof = prove_consistent_point(log, plan(replace(FULL, stop_lsn="0/7000100")))
    assert proof.failures == [] and len(proof.proofs) == 1


def test_no_stop_line_and_no_consistency_line_are_each_said() -> None:
    log = parse_server_log("\n".join(line for line in LOG.splitlines()
                                     if "consistent recovery state" not in line and CONSISTENCY_STOP not in line))
    proof = prove_consistent_point(log, plan())
    assert proof.failures == [
        "recovery to backup 20261128-092612F's consistent point: the server never said \"recovery stopping after "
        "reaching consistency\"",
        "recovery to backup 20261128-092612F's consistent point: the server never said where it reached a "
        "consistent state"]


def test_a_backup_without_a_stop_lsn_cannot_be_checked() -> None:
    from dataclasses import replace

    proof = prove_consistent_point(parse_server_log(LOG), plan(replace(FULL, stop_lsn=None)))
    assert proof.proofs == [] and proof.failures == []
    assert proof.errors == ["backup 20261128-092612F records no stop LSN (backup-lsn-stop), so its consistent point "
                            "cannot be checked"]


def test_only_a_plan_to_a_consistent_point_is_proven_so() -> None:
    from dataclasses import replace

    for wrong in (replace(plan(), consistent_point=False), replace(plan(), target_backup=None)):
        with pytest.raises(ValueError, match="not a plan to a backup's consistent point: demo1"):
            prove_consistent_point(parse_server_log(LOG), wrong)
