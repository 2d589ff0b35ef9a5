"""A point restoreproof chose on a quiet archive: when it may be proven as the archive's end."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import LABELS, fixture_text
from verification.engines.postgres.chain import plan
from verification.engines.postgres.quiet_point import chosen_point, continued, replay_gap, to_latest, why_not_to_end
from verification.engines.postgres.repository import discover
from verification.engines.postgres.serverlog import parse_server_log
from verification.engines.postgres.settings import (
    TARGETS,
    SettingsError,
    latest_recovery,
    pgbackrest_recovery,
)
from verification.model import ChainStatus, ChosenPoint, WalRange
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024
# Between the full's end (19:50:38) and the diff's start (19:50:39) of the captured repository.
AT = datetime(2026, 11, 22, 19, 50, 38, 500000, tzinfo=UTC)
WAL = WalRange(1, "000000010000000000000004", "00000001000000000000000A", 7, "the end of the archive")


def planned(repo, at=AT):
    source = LocalSource(repo)
    (stanza,) = discover(source, MB16)
    result = plan(source, stanza, at, MB16)
    return result, chosen_point(stanza, result, "random", MB16)


def test_a_chosen_point_carries_the_wal_to_the_archive_s_end_and_the_newest_backup(captured_repo):
    result, chosen = planned(captured_repo)
    # The point's own range ends at the next backup's start; the restore to the end replays the rest.
    assert (result.chain.wal.first, result.chain.wal.last) == ("000000010000000000000004", "000000010000000000000006")
    assert chosen.wal_to_end is not None and chosen.gap is None
    assert (chosen.wal_to_end.first, chosen.wal_to_end.last) == ("000000010000000000000004", "00000001000000000000000A")
    assert chosen.newest_backup == LABELS[2]
    assert chosen.newest_backup_end == datetime(2026, 11, 22, 19, 50, 45, tzinfo=UTC)
    assert why_not_to_end(replace(result, chosen_point=chosen)) is None
    latest = to_latest(replace(result, chosen_point=chosen))
    assert (latest.stop_at, latest.chain.wal, result.stop_at) == (None, chosen.wal_to_end, AT)


def test_a_gap_after_the_point_s_range_keeps_the_end_unproven(captured_repo):
    segments = captured_repo / "archive/demo1/15-1/0000000100000000"
    (victim,) = segments.glob("000000010000000000000009-*")
    victim.unlink()
    result, chosen = planned(captured_repo)
    assert result.chain.status is ChainStatus.COMPLETE  # the point itself needs WAL only to segment 6
    assert chosen.wal_to_end is None and "000000010000000000000009" in chosen.gap
    why = why_not_to_end(replace(result, chosen_point=chosen))
    assert why.startswith("the archive does not hold the WAL to its end whole: ") and "000000010000000000000009" in why


def point(at: datetime = AT, **changes) -> tuple:
    chosen = ChosenPoint("random", LABELS[2], datetime(2026, 11, 22, 19, 50, 45, tzinfo=UTC), WAL)
    return at, replace(chosen, **changes)


@pytest.mark.parametrize(("at", "chosen", "consistent", "why"), [
    (AT, None, False, "2026-11-22T19:50:38.500000+00:00 was asked for, not chosen by restoreproof"),
    (*point(), True, "no point in time was planned"),
    (*point(AT + timedelta(seconds=7)), False,
     f"2026-11-22T19:50:45.500000+00:00 is after the newest backup's end ({LABELS[2]}, 2026-11-22T19:50:45+00:00): "
     "the archive is not shown to cover it, and a transaction after it may never have been archived"),
    (*point(wal_to_end=None, gap="segment 9 missing"), False,
     "the archive does not hold the WAL to its end whole: segment 9 missing"),
    (*point(newest_backup=None, newest_backup_end=None), False,
     "no backup on the history restored records its end, so the archive is not shown to cover the point"),
    (*point(AT + timedelta(seconds=6, microseconds=500000)), False, None),  # at the newest backup's very end
    (*point(), False, None),
])
def test_only_a_chosen_point_the_archive_covers_goes_on_to_the_end(captured_repo, at, chosen, consistent, why):
    result, _ = planned(captured_repo)
    assert why_not_to_end(replace(result, stop_at=at, chosen_point=chosen, consistent_point=consistent)) == why


def test_the_recovery_for_latest_is_pgbackrest_s_without_the_point():
    text = fixture_text("settings/pgbackrest-auto-conf-pitr.conf")
    latest = latest_recovery(text)
    assert pgbackrest_recovery(latest) == {name: value for name, value in pgbackrest_recovery(text).items()
                                           if name not in (*TARGETS, "recovery_target_action")}
    assert "\n# recovery_target_time = '2026-11-28 09:45:00.123456+00' # removed by restoreproof" in latest
    assert "\n# recovery_target_action = 'promote' # removed by restoreproof" in latest
    # The backup's own lines before pgBackRest's block are left as they are.
    written = fixture_text("settings/pgbackrest-auto-conf-alter-system.conf")
    assert latest_recovery(written + "recovery_target_xid = '7'\n").startswith(written)
    with pytest.raises(SettingsError, match="block"):
        latest_recovery("recovery_target_time = '2026-11-28 09:45:00+00'\n")


def test_the_two_starts_are_one_replay_only_where_the_second_resumes_within_the_first():
    first = parse_server_log(fixture_text("server-recovery-no-transaction-after-target.log"))
    second = parse_server_log(fixture_text("server-recovery-continued-to-end.log"))
    assert replay_gap(first, second) is None
    log = continued(first, second)
    assert log.segments_restored == [f"00000001000000000000000{n}" for n in range(2, 6)]
    assert (log.redo_done_lsn, log.redo_start_lsn) == (second.redo_done_lsn, second.redo_start_lsn)
    later = replace(second, redo_start_lsn=(first.redo_done_lsn or 0) + 1)
    assert replay_gap(first, later) == (
        "recovery continued to the archive's end began redo at 0/5000091, after the first start's redo done at "
        "0/5000090: the WAL between is not shown replayed")
    assert "no 'redo starts at' line" in (replay_gap(first, replace(second, redo_start_lsn=None)) or "")
    assert "no 'redo done at' line" in (replay_gap(replace(first, redo_done_lsn=None), second) or "")


def test_a_backup_of_another_cluster_in_the_stanza_never_covers_the_old_archive(captured_repo):
    # After a dump/restore stanza-upgrade the new cluster (db-id 2) also runs on timeline 1 and numbers
    # its segments from the start: its backups say nothing of the old cluster's archive.
    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    old_newest = stanza.backup(LABELS[2])
    assert old_newest is not None and old_newest.finish == datetime(2026, 11, 22, 19, 50, 45, tzinfo=UTC)
    at = datetime(2026, 11, 22, 19, 55, 0, tzinfo=UTC)

    def why_not(backups):
        upgraded = replace(stanza, backups=backups)
        result = plan(source, upgraded, at, MB16)
        return why_not_to_end(replace(result, chosen_point=chosen_point(upgraded, result, "random", MB16)))

    alone = why_not(list(stanza.backups))
    new_cluster = replace(old_newest, label="20261122-200000F", references=(), db_id=2,
                          start=datetime(2026, 11, 22, 19, 59, 50, tzinfo=UTC),
                          finish=datetime(2026, 11, 22, 20, 0, 0, tzinfo=UTC),
                          start_wal="000000010000000000000002", stop_wal="000000010000000000000002",
                          start_lsn="0/2000028", stop_lsn="0/2000138")
    assert alone is not None and alone.startswith("2026-11-22T19:55:00+00:00 is after the newest backup's end")
    assert why_not([*stanza.backups, new_cluster]) == alone


def _archive_ends_at(repo, last: int) -> None:
    """The archive with every segment after `last` gone (as if not archived yet)."""
    for path in (repo / "archive/demo1/15-1/0000000100000000").glob("0000*-*"):
        if int(path.name[16:24], 16) > last:
            path.unlink()


def test_an_archive_ending_at_the_newest_backup_s_stop_segment_holds_the_wal_to_its_end(captured_repo):
    _archive_ends_at(captured_repo, 8)  # the incr's stop segment, 000000010000000000000008
    result, chosen = planned(captured_repo)
    assert chosen.gap is None and chosen.wal_to_end is not None
    assert chosen.wal_to_end.last == "000000010000000000000008" and chosen.newest_backup == LABELS[2]
    assert why_not_to_end(replace(result, chosen_point=chosen)) is None


def test_an_archive_ending_before_the_newest_backup_s_stop_segment_is_not_its_end(captured_repo):
    _archive_ends_at(captured_repo, 7)
    _, chosen = planned(captured_repo)
    assert chosen.wal_to_end is None and chosen.newest_backup == LABELS[2]
    assert chosen.gap == (f"the archive's WAL from backup {LABELS[0]} ends at 000000010000000000000007, before backup "
                          f"{LABELS[2]}'s stop segment 000000010000000000000008")


def test_the_timeline_asked_for_is_the_one_followed_to_the_end(captured_repo):
    # The captured archive holds timeline 1 only: asked for another, no WAL leads to its end.
    _, on_one = planned(captured_repo)
    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    result = plan(source, stanza, AT, MB16)
    elsewhere = chosen_point(stanza, result, "random", MB16, timeline=2)
    assert on_one.wal_to_end is not None and on_one.wal_to_end.timeline == 1
    assert elsewhere.wal_to_end is None and elsewhere.gap


def test_the_two_starts_keep_every_line_that_ended_either_early_and_every_archive_error():
    first = parse_server_log(fixture_text("server-recovery-no-transaction-after-target.log"))
    second = parse_server_log(fixture_text("server-recovery-continued-to-end.log"))
    early, said = ["invalid record length at 0/5000090"], ["pgBackRest archive-get ERROR: [045]: segment gone"]
    log = continued(replace(first, early_end=early, archive_get_errors=said), second)
    assert (log.early_end, log.archive_get_errors) == (early, said)
    log = continued(first, replace(second, early_end=early, archive_get_errors=said + said))
    assert (log.early_end, log.archive_get_errors) == (early, said)
    # Where both resume at the same record, the second is one replay with the first.
    assert replay_gap(first, replace(second, redo_start_lsn=first.redo_done_lsn)) is None


def test_a_stanza_none_of_whose_backups_records_its_stop_has_no_newest_end(captured_repo):
    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    result = plan(source, stanza, AT, MB16)
    unrecorded = replace(stanza, backups=[replace(b, stop_wal=None) for b in stanza.backups])
    chosen = chosen_point(unrecorded, result, "random", MB16)
    assert (chosen.strategy, chosen.newest_backup, chosen.newest_backup_end) == ("random", None, None)
    assert why_not_to_end(replace(result, chosen_point=chosen)) == (
        "no backup on the history restored records its end, so the archive is not shown to cover the point")


def test_the_plan_to_the_end_is_latest_from_the_same_backup_never_a_consistent_point(captured_repo):
    result, chosen = planned(captured_repo)
    latest = to_latest(replace(result, chosen_point=chosen, consistent_point=True))
    assert latest.consistent_point is False and latest.stop_at is None and latest.target_backup == result.target_backup


def test_what_keeps_the_two_starts_from_being_one_replay_is_said_whole(captured_repo):
    first = parse_server_log(fixture_text("server-recovery-no-transaction-after-target.log"))
    second = parse_server_log(fixture_text("server-recovery-continued-to-end.log"))
    assert replay_gap(replace(first, redo_done_lsn=None), second) == (
        "the first start's log does not say where redo ended (no 'redo done at' line), so the replay continued to "
        "the archive's end is not shown to follow it")
    result, chosen = planned(captured_repo)
    unknown = replace(chosen, wal_to_end=None, gap=None)
    assert why_not_to_end(replace(result, chosen_point=unknown)) == (
        "the archive does not hold the WAL to its end whole: not known")
