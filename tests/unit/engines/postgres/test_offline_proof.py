"""An offline backup's point, proven from a real server log of one restored (and variants of it)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from tests.conftest import fixture_text
from verification.engines.postgres.offline_proof import prove_offline
from verification.engines.postgres.serverlog import parse_server_log
from verification.model import BackupSet, BackupType, Chain, ChainStatus, RestorePlan

LOG = fixture_text("server-offline-backup.log")
SHUT_DOWN = datetime(2026, 11, 28, 9, 45, 32, tzinfo=UTC)
BACKUP = BackupSet("off1", "20261128-094533F", BackupType.FULL, datetime(2026, 11, 28, 9, 45, 33, tzinfo=UTC),
                   datetime(2026, 11, 28, 9, 45, 39, tzinfo=UTC), online=False)


def plan(backup: BackupSet = BACKUP) -> RestorePlan:
    return RestorePlan("postgres", "off1", Chain(ChainStatus.COMPLETE, [backup]), target_backup=backup)


def test_the_servers_clean_shutdown_is_read_from_its_log() -> None:
    log = parse_server_log(LOG)
    assert log.shut_down_at == SHUT_DOWN
    assert log.redo_started is None and log.redo_done_lsn is None and log.ready is not None


def test_a_clean_shutdown_before_the_backup_started_and_no_redo_is_the_proof() -> None:
    proof = prove_offline(parse_server_log(LOG), plan())
    assert (proof.failures, proof.errors) == ([], [])
    assert proof.proofs == ['server log: "database system was shut down at 2026-11-28T09:45:32+00:00" and no redo: '
                            "offline backup 20261128-094533F restored to its own point, the clean shutdown before it "
                            "started (2026-11-28T09:45:33+00:00)"]


@pytest.mark.parametrize(("start", "proven"), [
    (datetime(2026, 11, 28, 9, 45, 31, tzinfo=UTC), True),  # the second both are rounded to
    (datetime(2026, 11, 28, 9, 45, 30, tzinfo=UTC), False),
])
def test_a_shutdown_after_the_backup_began_is_not_its_state(start: datetime, proven: bool) -> None:
    proof = prove_offline(parse_server_log(LOG), plan(replace(BACKUP, start=start)))
    assert bool(proof.proofs) is proven and bool(proof.errors) is not proven and proof.failures == []
    if not proven:
        assert proof.errors == [
            "offline backup 20261128-094533F: the restored folder says its server was shut down at "
            f"2026-11-28T09:45:32+00:00, after the backup started ({start.isoformat()}); the backup cannot hold that "
            "state, so the point reached is unproven"]


def test_redo_on_start_means_no_clean_shutdown_and_proves_nothing() -> None:
    crashed = LOG.replace("database system was shut down at 2026-11-28 09:45:32 UTC",
                          "database system was interrupted; last known up at 2026-11-28 09:45:32 UTC")
    crashed += "2026-11-28 09:47:17.260 UTC [79] LOG:  redo starts at 0/1000028\n"
    proof = prove_offline(parse_server_log(crashed), plan())
    assert proof.proofs == [] and proof.failures == []
    assert proof.errors == ["offline backup 20261128-094533F: the server replayed WAL on start (redo starts at ... in "
                            "its log), so the folder was not cleanly shut down when it was backed up; the point reached "
                            "is not the backup's own and is not proven"]


def test_a_log_without_the_shutdown_line_proves_nothing() -> None:
    proof = prove_offline(parse_server_log(LOG.replace("was shut down at", "was shut down in recovery at")), plan())
    assert proof.proofs == [] and "does not say it found a clean shutdown" in proof.errors[0]


@pytest.mark.parametrize("backup", [None, replace(BACKUP, online=True), replace(BACKUP, online=None)])
def test_only_an_offline_backups_plan_is_proven_so(backup: BackupSet | None) -> None:
    with pytest.raises(ValueError, match="not a plan of an offline backup: off1"):
        prove_offline(parse_server_log(LOG), RestorePlan("postgres", "off1", Chain(ChainStatus.COMPLETE, []),
                                                         target_backup=backup))
