"""WAL on a newer timeline, as a real restore-and-promote left it (fixtures/postgres/timeline):
timeline 2 forked from timeline 1 at 0/E000000 after the newest backup."""

import os
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, write_manifest
from verification.engines.postgres.chain import choose_backup, known_timelines, on_history, plan
from verification.engines.postgres.repository import discover
from verification.model import ChainStatus
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024
TIMELINE = FIXTURES / "timeline"


@pytest.fixture
def timeline_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    backup = repo / "backup" / "demo1"
    backup.mkdir(parents=True)
    shutil.copy(TIMELINE / "backup.info", backup / "backup.info")
    for label in ("20261122-200156F", "20261122-200156F_20261122-200203D", "20261122-200156F_20261122-200211I"):
        (backup / label).mkdir()
        write_manifest(backup / label, label)
    archive = repo / "archive" / "demo1" / "15-1"
    archive.mkdir(parents=True)
    shutil.copy(TIMELINE / "00000002.history", archive / "00000002.history")
    for line in (TIMELINE / "archive-listing.txt").read_text().split():
        (archive / line).parent.mkdir(exist_ok=True)
        (archive / line).write_bytes(b"")
    return repo


def make_plan(repo: Path):  # type: ignore[no-untyped-def]
    source = LocalSource(repo)
    (stanza,) = discover(source, MB16)
    return plan(source, stanza, None, MB16)


def test_latest_follows_the_newest_timeline_to_the_end_of_its_wal(timeline_repo):
    result = make_plan(timeline_repo)
    assert result.chain.status is ChainStatus.COMPLETE
    wal = result.chain.wal
    assert (wal.timeline, wal.first, wal.last, wal.segments) == (2, "00000001000000000000000C",
                                                                 "00000002000000000000000F", 4)
    assert "across timelines 1 -> 2" in wal.bound
    # Timeline 2 supplies segments from E, where its history file says it left timeline 1 (0/E000000).
    assert wal.timelines == ((1, 0), (2, 0xE))


def test_a_missing_segment_on_the_new_timeline_breaks_the_chain(timeline_repo):
    (victim,) = timeline_repo.rglob("00000002000000000000000E-*")
    victim.unlink()
    result = make_plan(timeline_repo)
    assert result.chain.status is ChainStatus.BROKEN
    assert result.chain.problems[0].files == ("00000002000000000000000E",)


def test_timeline_one_segments_after_the_fork_do_not_count(timeline_repo):
    # A segment E on timeline 1 (the abandoned branch) cannot stand in for timeline 2's E.
    (victim,) = timeline_repo.rglob("00000002000000000000000E-*")
    victim.rename(victim.parent.parent / "0000000100000000" / ("00000001000000000000000E-" + "0" * 40 + ".gz"))
    assert make_plan(timeline_repo).chain.problems[0].files == ("00000002000000000000000E",)


def test_missing_history_file_is_named(timeline_repo):
    next(timeline_repo.rglob("00000002.history")).unlink()
    result = make_plan(timeline_repo)
    assert result.chain.status is ChainStatus.BROKEN
    assert [(p.code, p.files) for p in result.chain.problems] == [("missing-history", ("00000002.history",))]


def test_a_fork_before_the_backup_started_is_not_a_descendant(timeline_repo):
    next(timeline_repo.rglob("00000002.history")).write_text("1\t0/5000000\tno recovery target specified\n")
    result = make_plan(timeline_repo)
    problem = result.chain.problems[0]
    assert problem.code == "timeline-not-descendant"
    assert "left timeline 1 at 0/5000000, at or before the backup's start at 0/C000028" in problem.message


# --- one history: a parent that goes on after the fork -------------------------------------------------

# The fixture's backups: full 0/7000028 (20:01:56), diff 0/9000028 (20:02:03), incr 0/C000028 (20:02:11 to
# 20:02:15), all on timeline 1; timeline 2 left timeline 1 at 0/E000000 ("no recovery target specified").
AFTER_FORK = datetime(2026, 11, 22, 21, 0, tzinfo=UTC)


def timeline_one(repo: Path, name: str) -> None:
    """A segment timeline 1 wrote on: archived a minute after timeline 2's history file."""
    folder = next(repo.rglob("0000000100000000"))
    segment = folder / f"{name}-{'0' * 40}.gz"
    segment.write_bytes(b"")
    later = next(repo.rglob("00000002.history")).stat().st_mtime + 60
    os.utime(segment, (later, later))


def plan_at(repo: Path, at: datetime | None = None, timeline: int | None = None):  # type: ignore[no-untyped-def]
    source = LocalSource(repo)
    (stanza,) = discover(source, MB16)
    return plan(source, stanza, at, MB16, timeline)


def rule(result, name: str):  # type: ignore[no-untyped-def]
    return next(r for r in result.chain.rules if r.rule == name)


def test_a_clean_failover_passes_latest_and_names_the_fork(timeline_repo):
    result = plan_at(timeline_repo)
    assert result.chain.status is ChainStatus.COMPLETE
    assert (result.chain.timeline, result.chain.timeline_choice, result.target_timeline) == (
        2, "latest: the newest timeline", None)
    assert [(t.timeline, t.parent, t.fork_lsn, t.fork_time, t.restored) for t in result.chain.timelines] == [
        (1, None, None, None, True), (2, 1, "0/E000000", None, True)]
    assert rule(result, "one-history").passed
    assert rule(result, "one-history").detail == "no timeline's WAL goes on after a fork from it"


def test_timeline_one_going_on_from_the_fork_fails_latest_naming_the_fork_and_its_segments(timeline_repo):
    timeline_one(timeline_repo, "00000001000000000000000E")
    timeline_one(timeline_repo, "00000001000000000000000F")
    result = plan_at(timeline_repo)
    assert result.chain.status is ChainStatus.BROKEN
    (problem,) = [p for p in result.chain.problems if p.code == "two-histories"]
    assert problem.files == ("00000001000000000000000E", "00000001000000000000000F")
    assert problem.message == (
        "two histories in archive 15-1 of stanza demo1: timeline 1 went on after timeline 2 forked from it at "
        "0/E000000 (00000002.history): 2 segment(s) of timeline 1 begin at or after the fork: "
        "00000001000000000000000E, 00000001000000000000000F; a restore to latest follows timeline 2 and leaves "
        "that WAL out. Restore one history explicitly: --timeline 1 or --timeline 2")
    assert not rule(result, "one-history").passed
    assert result.chain.unread == [] and result.target_timeline is None


def test_only_the_segment_holding_a_fork_inside_it_is_named_not_failed(timeline_repo):
    next(timeline_repo.rglob("00000002.history")).write_text("1\t0/E000100\tno recovery target specified\n")
    timeline_one(timeline_repo, "00000001000000000000000E")
    result = plan_at(timeline_repo)
    assert result.chain.status is ChainStatus.COMPLETE, result.chain.problems
    detail = rule(result, "one-history").detail
    assert rule(result, "one-history").passed
    assert "segment 00000001000000000000000E of timeline 1 holds the fork of timeline 2 at 0/E000100" in detail


def test_the_segment_after_the_one_holding_the_fork_fails(timeline_repo):
    next(timeline_repo.rglob("00000002.history")).write_text("1\t0/E000100\tno recovery target specified\n")
    timeline_one(timeline_repo, "00000001000000000000000E")
    timeline_one(timeline_repo, "00000001000000000000000F")
    result = plan_at(timeline_repo)
    (problem,) = [p for p in result.chain.problems if p.code == "two-histories"]
    assert problem.files == ("00000001000000000000000F",)


def test_a_time_after_an_unknown_fork_time_with_two_histories_is_refused_naming_both_timelines(timeline_repo):
    timeline_one(timeline_repo, "00000001000000000000000E")
    result = plan_at(timeline_repo, AFTER_FORK)
    assert result.chain.status is ChainStatus.BROKEN
    (refusal,) = result.chain.unread
    assert refusal.code == "timeline-ambiguous" and refusal.files == ("00000002.history",)
    assert refusal.message.startswith(f"--at {AFTER_FORK.isoformat()}: which history held that time is not proven: "
                                      "timeline 2 forked from timeline 1 at 0/E000000 (fork time not in "
                                      "00000002.history")
    assert refusal.message.endswith("Choose one: --timeline 1 or --timeline 2")
    assert refusal in result.chain.problems
    assert not rule(result, "one-history").passed
    assert result.target_timeline is None


def test_a_time_before_the_fork_proven_by_a_backup_is_restored_on_the_shared_history(timeline_repo):
    timeline_one(timeline_repo, "00000001000000000000000E")
    # The incr's WAL ends at 0/C000100, before the fork: everything before its start is on both timelines.
    at = datetime(2026, 11, 22, 20, 2, 10, 999999, tzinfo=UTC)
    result = plan_at(timeline_repo, at)
    assert result.chain.unread == []
    assert not [p for p in result.chain.problems if p.code in ("two-histories", "timeline-ambiguous")]
    assert rule(result, "one-history").passed
    assert rule(result, "one-history").detail.startswith("two histories (")
    assert result.target_timeline == 2  # said to PostgreSQL, never its default
    assert result.chain.timeline_choice == f"the history all timelines share before {at.isoformat()}"


def test_the_bound_itself_is_refused(timeline_repo):
    timeline_one(timeline_repo, "00000001000000000000000E")
    result = plan_at(timeline_repo, datetime(2026, 11, 22, 20, 2, 11, tzinfo=UTC))
    assert [p.code for p in result.chain.unread] == ["timeline-ambiguous"]


def test_a_fork_time_named_by_the_history_file_decides_the_history(timeline_repo):
    next(timeline_repo.rglob("00000002.history")).write_text("1\t0/E000000\tbefore 2026-11-22 20:30:00+00\n")
    timeline_one(timeline_repo, "00000001000000000000000E")
    before = plan_at(timeline_repo, datetime(2026, 11, 22, 20, 29, 59, tzinfo=UTC))
    assert before.chain.unread == [] and before.target_timeline == 2
    assert [t.fork_time for t in before.chain.timelines] == [None, datetime(2026, 11, 22, 20, 30, tzinfo=UTC)]
    at_fork = plan_at(timeline_repo, datetime(2026, 11, 22, 20, 30, tzinfo=UTC))
    assert [p.code for p in at_fork.chain.unread] == ["timeline-ambiguous"]
    assert '(fork time 00000002.history: recovery stopped "before 2026-11-22 20:30:00+00")' in \
        at_fork.chain.unread[0].message


def test_a_time_on_a_forked_archive_with_one_history_names_the_timeline_to_postgresql(timeline_repo):
    result = plan_at(timeline_repo, AFTER_FORK)
    assert result.chain.status is ChainStatus.COMPLETE
    assert result.target_timeline == 2
    assert result.chain.timeline_choice == f"the one history holding {AFTER_FORK.isoformat()}"


def test_a_time_without_a_fork_leaves_postgresql_s_default(timeline_repo):
    next(timeline_repo.rglob("00000002.history")).unlink()
    for name in timeline_repo.rglob("00000002000000000000000*"):
        name.unlink()
    result = plan_at(timeline_repo, AFTER_FORK)
    assert result.chain.status is ChainStatus.COMPLETE
    assert result.target_timeline is None
    assert rule(result, "one-history").detail == "one timeline, no fork"


def test_timeline_one_chosen_restores_timeline_one_to_its_end(timeline_repo):
    timeline_one(timeline_repo, "00000001000000000000000E")
    timeline_one(timeline_repo, "00000001000000000000000F")
    result = plan_at(timeline_repo, None, 1)
    assert result.chain.status is ChainStatus.COMPLETE, result.chain.problems
    wal = result.chain.wal
    assert (wal.timeline, wal.last, wal.timelines) == (1, "00000001000000000000000F", ((1, 0),))
    assert (result.target_timeline, result.chain.timeline, result.chain.timeline_choice) == (1, 1, "--timeline 1")
    assert [(t.timeline, t.restored) for t in result.chain.timelines] == [(1, True), (2, False)]
    detail = rule(result, "one-history").detail
    assert rule(result, "one-history").passed
    assert detail.startswith("timeline 1 chosen with --timeline 1; the archive holds two histories: timeline 1 went on")


def test_timeline_two_chosen_follows_its_history(timeline_repo):
    result = plan_at(timeline_repo, AFTER_FORK, 2)
    assert result.chain.status is ChainStatus.COMPLETE
    assert (result.target_timeline, result.chain.wal.timelines) == (2, ((1, 0), (2, 0xE)))
    assert rule(result, "one-history").detail == "timeline 2 chosen with --timeline 2"


def test_a_timeline_the_stanza_does_not_have_is_refused(timeline_repo):
    result = plan_at(timeline_repo, None, 7)
    assert result.chain.status is ChainStatus.BROKEN
    (refusal,) = result.chain.unread
    assert (refusal.code, refusal.message) == (
        "timeline-unknown", "--timeline 7: stanza demo1 has no timeline 7 (its archive and backups hold timelines 1, 2)")
    assert result.chain.problems == [refusal]
    assert result.target_backup is None


def test_a_backup_on_the_child_timeline_is_not_chosen_for_the_parent(timeline_repo):
    source = LocalSource(timeline_repo)
    (stanza,) = discover(source, MB16)
    incr = stanza.backups[-1]
    child = replace(incr, label="child", start_wal="00000002000000000000000F", start_lsn="0/F000028",
                    start=incr.start + timedelta(hours=1), finish=incr.finish + timedelta(hours=1))
    stanza.backups.append(child)
    assert choose_backup(stanza, None, None) is child
    assert choose_backup(stanza, None, 2) is child
    assert choose_backup(stanza, None, 1) is incr
    assert on_history(stanza, incr, 2)  # taken on timeline 1 before timeline 2 left it
    late = replace(incr, start_lsn="0/E000000")
    assert not on_history(stanza, late, 2)  # at the fork: not before it
    assert not on_history(stanza, replace(incr, start_lsn=None), 2)
    assert not on_history(stanza, replace(incr, start_wal=None), 1)
    assert not on_history(stanza, child, 1)
    assert not on_history(stanza, incr, 3)  # no history for timeline 3


def test_a_fork_time_nothing_bounds_is_said_unknown_in_the_refusal(timeline_repo):
    # Timeline 2 left inside the full's own WAL: no backup's WAL ends before the fork.
    next(timeline_repo.rglob("00000002.history")).write_text("1\t0/7000050\tno recovery target specified\n")
    result = plan_at(timeline_repo, AFTER_FORK)
    (refusal,) = result.chain.unread
    assert refusal.code == "timeline-ambiguous"
    assert ('(fork time unknown: 00000002.history names no time ("no recovery target specified") and no backup '
            'bounds it) and both went on after it (timeline 1 went on after timeline 2 forked from it at 0/7000050')\
        in refusal.message
    assert rule(result, "one-history").detail.startswith(f"two histories, and {AFTER_FORK.isoformat()} may be after "
                                                         "the fork: --at")
    assert result.chain.timeline_choice is None


def test_two_histories_choose_no_timeline(timeline_repo):
    timeline_one(timeline_repo, "00000001000000000000000E")
    assert plan_at(timeline_repo).chain.timeline_choice is None


def test_no_backup_for_the_timeline_asked_says_so(timeline_repo):
    result = plan_at(timeline_repo, datetime(2026, 11, 22, 20, 0, tzinfo=UTC), 1)
    (problem,) = result.chain.problems
    assert problem.message == ("stanza demo1 has no backup finished before 2026-11-22T20:00:00+00:00 from which "
                               "timeline 1 can be recovered")
    # Without a timeline asked for, the point comes before every backup: refused, naming the oldest.
    before = plan_at(timeline_repo, datetime(2026, 11, 22, 20, 0, tzinfo=UTC))
    assert before.chain.status is ChainStatus.REFUSED
    assert before.chain.problems[0].message.startswith(
        "the point 2026-11-22T20:00:00+00:00 is before every backup of stanza demo1 (the oldest, 20261122-200156F, "
        "finished 2026-11-22T20:02:01+00:00)")


def test_a_backup_without_a_wal_range_has_no_timeline_and_is_not_read_for_one(timeline_repo):
    source = LocalSource(timeline_repo)
    (stanza,) = discover(source, MB16)
    offline = replace(stanza.backups[-1], stop_wal=None)
    stanza.backups[-1] = offline
    result = plan(source, stanza, None, MB16)
    assert (result.chain.wal, result.chain.timeline, result.chain.timelines, result.chain.timeline_choice) == (
        None, None, [], None)
    stanza.backups[-1] = replace(offline, start_wal=None)
    assert known_timelines(stanza) == {1, 2}
    assert not on_history(stanza, replace(stanza.backups[0], db_id=None), 2)  # no archive to read


def test_latest_on_a_parent_that_may_have_gone_on_is_an_error_naming_both_timelines(captured_repo) -> None:  # type: ignore[no-untyped-def]
    # The captured archive, a timeline 2 forking at the start of segment 9 of timeline 1, whose segments 9
    # and A are there: from a copy that kept no archive times, which came first is not known.
    from verification.engines.postgres import chain
    from verification.engines.postgres.repository import read_stanza
    from verification.model import ChainStatus
    from verification.sources.local import LocalSource

    segments = captured_repo / "archive" / "demo1" / "15-1" / "0000000100000000"
    (segments.parent / "00000002.history").write_text("1\t0/9000000\tno recovery target specified\n")
    (segments / f"000000020000000000000009-{'0' * 40}.gz").write_bytes(b"")

    class NoTimes(LocalSource):
        def modified(self, path: str):  # type: ignore[no-untyped-def]
            return None

    source = NoTimes(captured_repo)
    planned = chain.plan(source, read_stanza(source, "demo1", 16 * 1024 * 1024), None, 16 * 1024 * 1024)
    assert planned.chain.status is ChainStatus.BROKEN
    assert [p.code for p in planned.chain.problems] == ["two-histories-unproven"]
    assert planned.chain.unread == planned.chain.problems  # not judged: the verdict is error, not failed
    assert "Restore one history explicitly: --timeline 1 or --timeline 2" in planned.chain.problems[0].message
