"""Chain planning and proof on the captured repository, and on damaged copies of it."""

from datetime import UTC, datetime, timedelta

from tests.conftest import LABELS
from verification.engines.postgres.chain import plan
from verification.engines.postgres.repository import discover
from verification.model import ChainStatus
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024


def make_plan(repo, at=None):
    source = LocalSource(repo)
    (stanza,) = discover(source, MB16)
    return plan(source, stanza, at, MB16)


def rules(result):
    return {r.rule: r.passed for r in result.chain.rules}


def test_latest_restores_the_incremental_with_its_whole_chain(captured_repo):
    result = make_plan(captured_repo)
    assert result.chain.status is ChainStatus.COMPLETE
    assert result.target_backup.label == LABELS[2]
    assert [b.label for b in result.chain.backups] == LABELS
    # From the incremental's start segment to the end of the archive.
    assert (result.chain.wal.first, result.chain.wal.last) == ("000000010000000000000008", "00000001000000000000000A")
    assert result.chain.wal.segments == 3
    assert result.chain.wal.timelines == ((1, 0),)  # one timeline, supplying every segment
    assert result.chain.problems == []
    assert all(rules(result).values()) and len(rules(result)) >= 5


def test_point_in_time_uses_the_newest_backup_finished_before_it(captured_repo):
    # The diff finished 19:50:42; the incr started 19:50:42 and finished 19:50:45.
    at = datetime(2026, 11, 22, 19, 50, 43, tzinfo=UTC)
    result = make_plan(captured_repo, at)
    assert result.target_backup.label == LABELS[1]
    assert [b.label for b in result.chain.backups] == LABELS[:2]
    assert result.chain.wal.first == "000000010000000000000006"
    assert result.stop_at == at


def test_point_in_time_is_bounded_by_the_next_backup(captured_repo):
    # Between the full (stop 19:50:38) and the diff (start 19:50:39): WAL up to the diff's start.
    at = datetime(2026, 11, 22, 19, 50, 38, 500000, tzinfo=UTC)
    result = make_plan(captured_repo, at)
    assert result.target_backup.label == LABELS[0]
    assert (result.chain.wal.first, result.chain.wal.last) == ("000000010000000000000004", "000000010000000000000006")
    assert "the first after the target" in result.chain.wal.bound


def test_missing_wal_segment_breaks_the_chain_and_is_named(captured_repo):
    segments = captured_repo / "archive/demo1/15-1/0000000100000000"
    (victim,) = segments.glob("000000010000000000000009-*")
    victim.unlink()
    result = make_plan(captured_repo)
    assert result.chain.status is ChainStatus.BROKEN
    (problem,) = result.chain.problems
    assert problem.code == "missing-wal"
    assert problem.files == ("000000010000000000000009",)
    assert "000000010000000000000009" in problem.message
    assert rules(result)["wal-continuous-to-target"] is False
    # The backup's own WAL (segment 8) is still there.
    assert rules(result)["wal-for-consistency"] is True


def test_missing_backup_of_the_chain_is_named(captured_repo):
    diff = captured_repo / "backup/demo1" / LABELS[1]
    (diff / "backup.manifest").unlink()
    result = make_plan(captured_repo)
    assert result.chain.status is ChainStatus.BROKEN
    codes = [p.code for p in result.chain.problems]
    assert codes == ["missing-backup"]
    assert LABELS[1] in result.chain.problems[0].message
    assert rules(result)["referenced-backups-present"] is False


def test_backup_stop_segment_missing_fails_consistency(captured_repo):
    segments = captured_repo / "archive/demo1/15-1/0000000100000000"
    (victim,) = segments.glob("000000010000000000000008-*")
    victim.unlink()
    result = make_plan(captured_repo)
    assert rules(result)["wal-for-consistency"] is False
    assert result.chain.problems[0].files == ("000000010000000000000008",)


def test_a_point_before_every_backup_is_refused_not_a_broken_chain(captured_repo):
    # Expired by retention, or before the first backup: nothing missing, a request the repository cannot serve.
    result = make_plan(captured_repo, datetime(2020, 1, 1, tzinfo=UTC))
    assert result.chain.status is ChainStatus.REFUSED
    assert result.target_backup is None
    (problem,) = result.chain.problems
    assert problem.code == "point-before-backups"
    assert problem.message.startswith("the point 2020-01-01T00:00:00+00:00 is before every backup of stanza demo1 "
                                      "(the oldest, ")
    assert problem.message.endswith("the repository keeps nothing that restores to it; ask for a point at or after "
                                    "that, or latest")


def test_the_oldest_backups_finish_is_the_first_point_served(captured_repo):
    (stanza,) = discover(LocalSource(captured_repo), MB16)
    oldest = min(b.finish for b in stanza.backups)
    served = make_plan(captured_repo, oldest)
    assert served.target_backup is not None and "point-before-backups" not in [p.code for p in served.chain.problems]
    assert make_plan(captured_repo, oldest - timedelta(seconds=1)).chain.status is ChainStatus.REFUSED


def test_a_chain_copied_from_a_standby_names_its_backups_and_the_primary_s_part():
    from dataclasses import replace

    from tests.unit.factories import backup
    from verification.engines.postgres.chain import _copied_from_standby
    from verification.model import BackupType

    full = replace(backup("20261122-010000F"), extra={"backup_standby": True})
    incr = replace(backup("20261122-010000F_20261122-020000I", BackupType.INCR), extra={"backup_standby": False})
    rule = _copied_from_standby([full, incr], "backup/demo1/backup.info")
    assert rule is not None and rule.passed
    assert rule.detail == (
        "full 20261122-010000F copied from a standby (option-backup-standby in backup/demo1/backup.info), begun and "
        "ended on the primary (backup_label, WAL range and backup-lsn-stop are the primary's); "
        "incr 20261122-010000F_20261122-020000I copied from the primary")
    assert _copied_from_standby([incr], "backup/demo1/backup.info") is None


def test_a_chain_copied_from_the_primary_says_nothing_of_a_standby(captured_repo):
    assert "copied-from-standby" not in rules(make_plan(captured_repo))


def test_a_later_backup_of_another_cluster_does_not_bound_the_old_archive(captured_repo):
    # After a stanza upgrade the new cluster (db-id 2) numbers its segments afresh: its start segment
    # says nothing of how far the old cluster's archive must reach.
    from dataclasses import replace

    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    old_newest = stanza.backup(LABELS[2])
    assert old_newest is not None
    at = datetime(2026, 11, 22, 19, 55, 0, tzinfo=UTC)
    alone = plan(source, stanza, at, MB16)
    new_cluster = replace(old_newest, label="20261122-200000F", references=(), db_id=2,
                          start=datetime(2026, 11, 22, 19, 59, 50, tzinfo=UTC),
                          finish=datetime(2026, 11, 22, 20, 0, 0, tzinfo=UTC),
                          start_wal="0000000100000000000000FF", stop_wal="0000000100000000000000FF",
                          start_lsn="0/FF000028", stop_lsn="0/FF000138")
    upgraded = plan(source, replace(stanza, backups=[*stanza.backups, new_cluster]), at, MB16)
    assert alone.chain.status is upgraded.chain.status is ChainStatus.COMPLETE
    assert upgraded.chain.wal == alone.chain.wal and upgraded.chain.defects == []
