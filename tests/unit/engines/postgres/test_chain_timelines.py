"""WAL on a newer timeline, as a real restore-and-promote left it (fixtures/postgres/timeline):
timeline 2 forked from timeline 1 at 0/E000000 after the newest backup."""

import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, write_manifest
from verification.engines.postgres.chain import plan
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
