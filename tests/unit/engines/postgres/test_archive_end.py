"""A point after what the repository holds is refused before anything is restored (captured repository,
its segments' archive times set as a test needs them)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.unit.engines.postgres.segsize import upgraded
from verification.engines.postgres import chain
from verification.engines.postgres.archive_end import CLOCK_TOLERANCE, ArchiveEnd, archive_end, refuse_beyond
from verification.engines.postgres.repository import read_stanza
from verification.model import ChainStatus
from verification.sources.local import LocalSource

MB16 = 16 * 1024 * 1024
# The captured repository's newest backup (incr) ended at 19:50:45; its archive's last segment is ...0A.
INCR_END = datetime(2026, 11, 22, 19, 50, 45, tzinfo=UTC)
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
LAST = "00000001000000000000000A"


def _newest_segment(repo: Path) -> Path:
    return next((repo / "archive" / "demo1" / "15-1" / "0000000100000000").glob(f"{LAST}-*"))


def _end(repo: Path, archived: datetime) -> ArchiveEnd:
    os.utime(_newest_segment(repo), (archived.timestamp(), archived.timestamp()))
    source = LocalSource(repo)
    return archive_end(source, read_stanza(source, "demo1", MB16))


def _planned(repo: Path, at: datetime | None, end: ArchiveEnd):  # type: ignore[no-untyped-def]
    source = LocalSource(repo)
    plan = chain.plan(source, read_stanza(source, "demo1", MB16), at, MB16)
    refuse_beyond(plan, end, NOW)
    return plan


def test_the_archives_end_is_its_newest_segments_archive_time(captured_repo: Path) -> None:
    archived = INCR_END + timedelta(seconds=30)
    end = _end(captured_repo, archived)
    assert end == ArchiveEnd(archived, f"WAL segment {LAST} archived at {archived.isoformat()}")


def test_a_backup_ending_after_every_segment_is_the_end(captured_repo: Path) -> None:
    end = _end(captured_repo, INCR_END - timedelta(seconds=30))
    assert end == ArchiveEnd(INCR_END, f"the newest backup's end, {INCR_END.isoformat()}")


@pytest.mark.parametrize(("after", "status"), [
    (CLOCK_TOLERANCE, ChainStatus.COMPLETE),  # the end itself is held, give or take the two hosts' clocks
    (CLOCK_TOLERANCE + timedelta(microseconds=1), ChainStatus.REFUSED),
])
def test_a_point_after_the_archives_end_is_refused_naming_it(captured_repo: Path, after: timedelta,
                                                             status: ChainStatus) -> None:
    archived = INCR_END + timedelta(seconds=30)
    plan = _planned(captured_repo, archived + after, _end(captured_repo, archived))
    assert plan.chain.status is status
    rule = next(r for r in plan.chain.rules if r.rule == "point-within-archive")
    assert rule.passed is (status is ChainStatus.COMPLETE)
    if status is ChainStatus.REFUSED:
        assert [p.code for p in plan.chain.problems] == ["point-beyond-archive"]
        assert plan.chain.problems[0].message == (
            f"the point {(archived + after).isoformat()} is after the end of stanza demo1's archive: WAL segment "
            f"{LAST} archived at {archived.isoformat()}; the repository holds nothing that leads there: ask for a "
            "point at or before that end, or latest")


def test_latest_is_never_refused(captured_repo: Path) -> None:
    plan = _planned(captured_repo, None, ArchiveEnd(INCR_END, "x"))
    assert plan.chain.status is ChainStatus.COMPLETE
    assert not any(r.rule == "point-within-archive" for r in plan.chain.rules)


def test_an_unknown_archive_time_refuses_only_the_future(captured_repo: Path) -> None:
    unknown = ArchiveEnd(None, "not known")
    assert _planned(captured_repo, INCR_END + timedelta(days=1), unknown).chain.status is ChainStatus.COMPLETE
    assert _planned(captured_repo, NOW + CLOCK_TOLERANCE, unknown).chain.status is ChainStatus.COMPLETE
    future = _planned(captured_repo, NOW + CLOCK_TOLERANCE + timedelta(seconds=1), unknown)
    assert future.chain.status is ChainStatus.REFUSED
    assert f"is after now ({NOW.isoformat()})" in future.chain.problems[0].message


def test_a_broken_chain_stays_broken_with_the_refusal_beside_it(captured_repo: Path) -> None:
    next((captured_repo / "archive" / "demo1" / "15-1" / "0000000100000000").glob(
        "000000010000000000000008-*")).unlink()
    plan = _planned(captured_repo, NOW + timedelta(days=1), ArchiveEnd(INCR_END, "x"))
    assert plan.chain.status is ChainStatus.BROKEN
    assert [p.code for p in plan.chain.problems] == ["missing-wal", "point-beyond-archive"]


class NoTimes(LocalSource):
    """A copy that did not keep its files' times (an object store listing without them, say)."""

    def modified(self, path: str) -> datetime | None:
        return None


def test_an_archive_whose_newest_segment_has_no_time_has_no_known_end(captured_repo: Path) -> None:
    source = NoTimes(captured_repo)
    end = archive_end(source, read_stanza(source, "demo1", MB16))
    newest = _newest_segment(captured_repo).relative_to(captured_repo)
    assert end == ArchiveEnd(None, f"the archive time of {newest} is not known")


def test_a_stanza_without_wal_ends_at_its_newest_backup(captured_repo: Path) -> None:
    for segment in (captured_repo / "archive" / "demo1" / "15-1" / "0000000100000000").iterdir():
        segment.unlink()
    source = NoTimes(captured_repo)
    assert archive_end(source, read_stanza(source, "demo1", MB16)) == ArchiveEnd(
        INCR_END, f"the newest backup's end, {INCR_END.isoformat()}")


def test_a_stanza_without_backups_or_wal_has_no_end(captured_repo: Path) -> None:
    from dataclasses import replace

    for segment in (captured_repo / "archive" / "demo1" / "15-1" / "0000000100000000").iterdir():
        segment.unlink()
    source = LocalSource(captured_repo)
    stanza = replace(read_stanza(source, "demo1", MB16), backups=[])
    assert archive_end(source, stanza) == ArchiveEnd(None, "the stanza holds no backup and no WAL")


def test_the_rules_say_the_point_and_the_end_both_ways(captured_repo: Path) -> None:
    archived = INCR_END + timedelta(seconds=30)
    end = _end(captured_repo, archived)
    held = _planned(captured_repo, archived, end)
    (rule,) = [r for r in held.chain.rules if r.rule == "point-within-archive"]
    assert rule.detail == f"{archived.isoformat()} is not after the archive's end ({end.what})"
    refused = _planned(captured_repo, archived + CLOCK_TOLERANCE + timedelta(seconds=1), end)
    (rule,) = [r for r in refused.chain.rules if r.rule == "point-within-archive"]
    assert rule.detail == refused.chain.problems[0].message


def test_a_point_at_now_after_the_archive_is_said_to_be_after_the_archive(captured_repo: Path) -> None:
    at = NOW + CLOCK_TOLERANCE
    plan = _planned(captured_repo, at, ArchiveEnd(INCR_END, "its end"))
    assert plan.chain.problems[0].message.startswith(f"the point {at.isoformat()} is after the end of stanza demo1's "
                                                     "archive: its end;")


def test_an_upgraded_stanza_ends_at_the_newest_archived_segment_of_any_cluster(tmp_path: Path) -> None:
    # The old cluster (1 MiB, 15-1) reached segment 0F; the new one (64 MiB, 15-2) numbers from 1 again
    # and ends at 07, archived an hour after its newest backup: the higher number is not the newer.
    before, after = upgraded(tmp_path, "seg1", "seg64")
    for archive_id, name, when in (("15-1", "00000001000000000000000F", before.finish + timedelta(minutes=1)),
                                   ("15-2", "000000010000000000000007", after.finish + timedelta(hours=1))):
        (path,) = (tmp_path / "archive" / "up" / archive_id / "0000000100000000").glob(f"{name}-*")
        os.utime(path, (when.timestamp(), when.timestamp()))
    source = LocalSource(tmp_path)
    end = archive_end(source, read_stanza(source, "up", MB16))
    archived = after.finish + timedelta(hours=1)
    assert end == ArchiveEnd(archived, f"WAL segment 000000010000000000000007 archived at {archived.isoformat()}")
