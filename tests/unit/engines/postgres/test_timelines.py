"""Forks, fork times and two histories, from history files and segment listings (nothing started)."""

from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import FIXTURES
from verification.engines.postgres.repository import ArchivedSegment, TimelineSwitch, WalArchive, parse_history
from verification.engines.postgres.timelines import (
    Fork,
    divergences,
    entries,
    fork_segment_note,
    fork_time,
    forks,
    shared_until,
)
from verification.engines.postgres.wal import Segment
from verification.model import BackupSet, BackupType

MB16 = 16 * 1024 * 1024
SEG = 0x1000000
FORK_TEXT = FIXTURES / "timeline" / "00000002.history"


def archive(segments: list[tuple[int, int]], histories: dict[int, str]) -> WalArchive:
    found = WalArchive("15-1", MB16)
    for timeline, number in segments:
        segment = Segment(timeline, number)
        found.segments[segment] = ArchivedSegment(segment, f"archive/x/15-1/{segment.name(MB16)}")
    for timeline, text in histories.items():
        found.histories[timeline] = parse_history(text, f"{timeline:08X}.history")
    return found


def backup(label: str, start: datetime, start_wal: str, stop_lsn: str, error: bool = False) -> BackupSet:
    return BackupSet(database="s", label=label, type=BackupType.FULL, start=start, finish=start + timedelta(seconds=5),
                     start_wal=start_wal, stop_wal=start_wal, start_lsn=None, stop_lsn=stop_lsn, error=error)


# --- the history file's line and its reason -------------------------------------------------------

def test_a_real_history_line_keeps_its_reason():
    # Written by PostgreSQL 15 as a restored copy promoted at the end of the archive.
    assert parse_history(FORK_TEXT.read_text(), "00000002.history") == [
        TimelineSwitch(1, 0xE000000, "no recovery target specified")]


def test_a_line_without_a_reason_reads_with_an_empty_one():
    assert parse_history("1\t0/5000000\n", "h") == [TimelineSwitch(1, 0x5000000, "")]


@pytest.mark.parametrize(("reason", "expected"), [
    ("before 2026-11-28 09:30:00.123456+00", datetime(2026, 11, 28, 9, 30, 0, 123456, tzinfo=UTC)),
    ("after 2026-11-28 09:30:00+00", datetime(2026, 11, 28, 9, 30, tzinfo=UTC)),
    ("before 2026-11-28 11:00:00+02", datetime(2026, 11, 28, 9, 0, tzinfo=UTC)),
    ("before 2026-11-28 15:00:00.5+05:30", datetime(2026, 11, 28, 9, 30, 0, 500000, tzinfo=UTC)),
    ("  before 2026-11-28 09:30:00+00  ", datetime(2026, 11, 28, 9, 30, tzinfo=UTC)),
])
def test_a_time_targets_reason_names_the_commit_time(reason, expected):
    assert fork_time(reason) == expected


@pytest.mark.parametrize("reason", [
    "no recovery target specified", "before transaction 734", "at restore point \"nightly\"",
    "after LSN 0/5000028", "reached consistency", "before 2026-11-28 09:30:00",  # no offset: the zone is not known
    "before Sat Nov 28 09:30:00 2026 UTC",  # another DateStyle
    "before 2026-13-40 09:30:00+00",  # not a date
    "sometime 2026-11-28 09:30:00+00", "",
])
def test_a_reason_naming_no_time_in_iso_form_gives_no_time(reason):
    assert fork_time(reason) is None


# --- forks ---------------------------------------------------------------------------------------------

def test_each_timeline_s_fork_comes_from_its_own_history_file():
    found = forks(archive([], {2: "1\t0/5000000\tno recovery target specified\n",
                               3: "1\t0/5000000\tno recovery target specified\n2\t0/9000000\tbefore x\n"}))
    assert found == {2: Fork(2, 1, 0x5000000, "no recovery target specified", "00000002.history"),
                     3: Fork(3, 2, 0x9000000, "before x", "00000003.history")}


def test_an_ancestor_s_fork_is_read_from_a_descendant_when_its_own_file_is_missing():
    found = forks(archive([], {3: "1\t0/5000000\tfirst\n2\t0/9000000\tsecond\n"}))
    assert found[2] == Fork(2, 1, 0x5000000, "first", "00000003.history")
    assert found[3] == Fork(3, 2, 0x9000000, "second", "00000003.history")


def test_the_timeline_s_own_file_wins_over_a_descendant_s_line():
    found = forks(archive([], {2: "1\t0/6000000\town\n", 3: "1\t0/5000000\tfirst\n2\t0/9000000\tsecond\n"}))
    assert found[2] == Fork(2, 1, 0x6000000, "own", "00000002.history")


def test_the_newest_descendant_s_line_wins_for_an_ancestor_without_its_own_file():
    found = forks(archive([], {3: "1\t0/5000000\tfrom three\n2\t0/9000000\tx\n",
                               4: "1\t0/5000000\tfrom four\n2\t0/9000000\tx\n3\t0/A000000\ty\n"}))
    assert found[2] == Fork(2, 1, 0x5000000, "from four", "00000004.history")


def test_no_history_no_fork():
    assert forks(archive([(1, 1), (1, 2)], {})) == {}


# --- two histories: where the parent's WAL is newer than the fork -----------------------------------------

def test_a_parent_segment_beginning_exactly_at_the_fork_is_a_second_history():
    found = archive([(1, 0), (1, 0xD), (1, 0xE), (2, 0xE)], {2: "1\t0/E000000\tno recovery target specified\n"})
    (split,) = divergences(found, MB16)
    assert split.newer == (Segment(1, 0xE),)
    assert split.at_fork is None  # no segment holds the fork inside it
    assert fork_segment_note(found, MB16) == []  # that segment is wholly after the fork: judged, not noted
    assert "000000010000000000000001" not in split.describe(MB16)
    assert split.describe(MB16) == (
        "timeline 1 went on after timeline 2 forked from it at 0/E000000 (00000002.history): 1 segment(s) of "
        "timeline 1 begin at or after the fork: 00000001000000000000000E")


def test_a_clean_failover_leaves_no_parent_segment_at_or_after_the_fork():
    found = archive([(1, 0xC), (1, 0xD), (2, 0xE), (2, 0xF)], {2: "1\t0/E000000\tno recovery target specified\n"})
    assert divergences(found, MB16) == []
    assert fork_segment_note(found, MB16) == []


def test_the_parent_segment_holding_the_fork_inside_it_alone_is_not_a_second_history():
    found = archive([(1, 0xE), (2, 0xE)], {2: "1\t0/E000100\tno recovery target specified\n"})
    assert divergences(found, MB16) == []
    (note,) = fork_segment_note(found, MB16)
    assert note.startswith("segment 00000001000000000000000E of timeline 1 holds the fork of timeline 2 at "
                           "0/E000100 and was completed by the old primary")


def test_one_segment_after_the_one_holding_the_fork_is_a_second_history():
    found = archive([(1, 0xE), (1, 0xF), (2, 0xE)], {2: "1\t0/E000100\tno recovery target specified\n"})
    (split,) = divergences(found, MB16)
    assert split.newer == (Segment(1, 0xF),)
    assert split.at_fork == Segment(1, 0xE)


def test_a_fork_one_byte_before_a_segment_boundary_counts_the_next_segment():
    found = archive([(1, 0xD), (1, 0xE)], {2: "1\t0/DFFFFFF\tno recovery target specified\n"})
    (split,) = divergences(found, MB16)
    assert (split.newer, split.at_fork) == ((Segment(1, 0xE),), Segment(1, 0xD))


def test_a_fork_one_byte_after_a_segment_boundary_does_not_count_that_segment():
    found = archive([(1, 0xE)], {2: "1\t0/E000001\tno recovery target specified\n"})
    assert divergences(found, MB16) == []
    assert len(fork_segment_note(found, MB16)) == 1


def test_the_fork_segment_note_needs_that_segment_archived():
    assert fork_segment_note(archive([(2, 0xE)], {2: "1\t0/E000100\tx\n"}), MB16) == []


def test_every_newer_segment_is_listed_in_order_and_other_timelines_are_not():
    found = archive([(1, 0x11), (1, 0xF), (1, 0x10), (3, 0x11), (2, 0x10)],
                    {2: "1\t0/F000000\tx\n", 3: "1\t0/F000000\tx\n2\t0/11000000\ty\n"})
    split = divergences(found, MB16)
    assert [(d.fork.timeline, d.newer) for d in split] == [
        (2, (Segment(1, 0xF), Segment(1, 0x10), Segment(1, 0x11)))]


def test_a_grandchild_s_parent_that_went_on_is_found_too():
    found = archive([(2, 0x10), (2, 0x12), (3, 0x11)], {2: "1\t0/F000000\tx\n", 3: "1\t0/F000000\tx\n2\t0/11000000\ty\n"})
    (split,) = divergences(found, MB16)
    assert (split.fork.timeline, split.fork.parent, split.newer) == (3, 2, (Segment(2, 0x12),))


def test_five_newer_segments_are_all_named_with_nothing_more():
    found = archive([(1, n) for n in range(0xE, 0xE + 5)], {2: "1\t0/E000000\tx\n"})
    assert divergences(found, MB16)[0].describe(MB16).endswith(": 00000001000000000000000E, 00000001000000000000000F, "
                                                               "000000010000000000000010, 000000010000000000000011, "
                                                               "000000010000000000000012")


def test_more_than_five_newer_segments_are_counted_and_the_rest_summed_up():
    found = archive([(1, n) for n in range(0xE, 0xE + 7)], {2: "1\t0/E000000\tx\n"})
    text = divergences(found, MB16)[0].describe(MB16)
    assert "7 segment(s)" in text and "000000010000000000000012" in text and text.endswith(" and 2 more")
    assert "000000010000000000000013" not in text


# --- the time of a fork ---------------------------------------------------------------------------------

T0 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


def test_the_reason_s_time_is_the_shared_history_s_end():
    fork = Fork(2, 1, 0xE000000, "before 2026-11-28 09:30:00+00", "00000002.history")
    until, basis = shared_until(fork, [])
    assert until == datetime(2026, 11, 28, 9, 30, tzinfo=UTC)
    assert basis == '00000002.history: recovery stopped "before 2026-11-28 09:30:00+00"'


def test_a_backup_whose_wal_ends_at_or_before_the_fork_bounds_the_shared_history():
    fork = Fork(2, 1, 0xE000000, "no recovery target specified", "00000002.history")
    backups = [backup("a", T0, "000000010000000000000007", "0/7000100"),
               backup("b", T0 + timedelta(hours=1), "00000001000000000000000D", "0/E000000"),  # ends at the fork
               backup("c", T0 + timedelta(hours=2), "00000001000000000000000E", "0/E000100"),  # after it
               backup("d", T0 + timedelta(hours=3), "00000002000000000000000E", "0/E000200"),  # the child's
               backup("e", T0 + timedelta(hours=4), "00000001000000000000000A", "0/A000100", error=True)]
    until, basis = shared_until(fork, backups)
    assert until == T0 + timedelta(hours=1)
    assert "backup b on timeline 1" in basis and "no recovery target specified" in basis


def test_no_time_and_no_bounding_backup_is_a_time_not_known():
    fork = Fork(2, 1, 0xE000000, "no recovery target specified", "00000002.history")
    assert shared_until(fork, [backup("c", T0, "00000001000000000000000E", "0/E000100")]) == (
        None, 'unknown: 00000002.history names no time ("no recovery target specified") and no backup bounds it')


def test_entries_list_every_timeline_with_its_fork_and_whether_it_is_restored():
    found = archive([(1, 0xD), (2, 0xE), (3, 0xF)],
                    {2: "1\t0/E000000\tbefore 2026-11-28 09:30:00+00\n",
                     3: "1\t0/E000000\tbefore 2026-11-28 09:30:00+00\n2\t0/F000000\tno recovery target specified\n"})
    listed = entries(found, 1, (1, 2), 2, [])
    assert [(e.timeline, e.parent, e.fork_lsn, e.fork_time, e.restored) for e in listed] == [
        (1, None, None, None, True),
        (2, 1, "0/E000000", datetime(2026, 11, 28, 9, 30, tzinfo=UTC), True),
        (3, 2, "0/F000000", None, False)]
    assert listed[0].fork_time_basis == "no history file: a first timeline"
    assert listed[1].fork_time_basis.startswith("00000002.history: recovery stopped")
    assert listed[2].fork_time_basis.startswith("unknown: 00000003.history names no time")


def test_entries_name_the_backup_s_and_the_target_timeline_even_without_wal():
    assert [e.timeline for e in entries(archive([], {}), 1, (1,), 1, [])] == [1]


def test_a_real_time_target_history_names_the_commit_time_recovery_stopped_before():
    # Written by PostgreSQL 15 after pgbackrest restore --type=time --target-action=promote: its log said
    # "recovery stopping before commit of transaction 726, time 2026-11-28 10:07:47.974078+00".
    text = (FIXTURES / "timeline" / "00000002-time-target.history").read_text()
    (switch,) = parse_history(text, "00000002.history")
    assert (switch.parent, switch.switch_lsn) == (1, 0x30185D8)
    assert fork_time(switch.reason) == datetime(2026, 11, 28, 10, 7, 47, 974078, tzinfo=UTC)


# --- went on, or given up: the parent's newer segments' archive times against the child's history file ---

def _restored_in_place() -> tuple[WalArchive, dict[str, datetime]]:
    """Production on timeline 1 wrote segments 3..6; at 10:00 it was restored in place to 09:30 and
    promoted: timeline 2 forks inside segment 4, its history file archived at once."""
    found = archive([(1, 3), (1, 4), (1, 5), (1, 6), (2, 4), (2, 5)],
                    {2: "1\t0/4A00000\tbefore 2026-11-28 09:30:00.000001+00\n"})
    found.history_files[2] = "archive/x/15-1/00000002.history"
    born = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
    times = {found.segments[Segment(1, n)].file: born - timedelta(minutes=10 - n) for n in (3, 4, 5, 6)}
    times[found.history_files[2]] = born
    return found, times


def test_a_parents_segments_all_archived_before_the_child_existed_are_a_history_given_up():
    found, times = _restored_in_place()
    (given_up,) = divergences(found, MB16, times.get)
    assert given_up.went_on is False
    assert [s.number for s in given_up.newer] == [5, 6]


@pytest.mark.parametrize(("after", "went_on"), [(timedelta(seconds=1), True), (timedelta(0), None),
                                                (-timedelta(seconds=1), False)])
def test_one_newer_segment_archived_after_the_childs_history_means_the_parent_went_on(after, went_on):
    found, times = _restored_in_place()
    times[found.segments[Segment(1, 6)].file] = times[found.history_files[2]] + after
    assert divergences(found, MB16, times.get)[0].went_on is went_on


def test_a_time_not_known_proves_neither():
    found, times = _restored_in_place()
    del times[found.segments[Segment(1, 5)].file]
    assert divergences(found, MB16, times.get)[0].went_on is None
    found, times = _restored_in_place()
    del times[found.history_files[2]]
    assert divergences(found, MB16, times.get)[0].went_on is None
    # One known to come after is proof enough, whatever else is not known.
    times[found.history_files[2]] = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)
    del times[found.segments[Segment(1, 5)].file]
    times[found.segments[Segment(1, 6)].file] = datetime(2026, 11, 28, 10, 5, tzinfo=UTC)
    assert divergences(found, MB16, times.get)[0].went_on is True


def test_without_archive_times_every_divergence_is_taken_as_gone_on():
    found, _ = _restored_in_place()
    assert divergences(found, MB16)[0].went_on is True
