"""What a PostgreSQL restore reads (for the evidence's hashes) and what the backups secure over time."""

import os
from datetime import UTC, datetime
from pathlib import Path

from tests.conftest import LABELS
from verification.engines.postgres.chain import plan
from verification.engines.postgres.footprint import backup_history, chain_files
from verification.engines.postgres.repository import discover
from verification.sources import LocalSource

MB16 = 16 * 1024 * 1024
SEGMENTS = "archive/demo1/15-1/0000000100000000"


def _segment(repo: Path, number: int) -> str:
    (path,) = (repo / SEGMENTS).glob(f"00000001000000000000000{number:X}-*")
    return f"{SEGMENTS}/{path.name}"


def test_the_chain_s_files_are_its_info_files_backups_and_the_wal_it_replays(captured_repo: Path) -> None:
    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    latest = plan(source, stanza, None, MB16)
    info = ["backup/demo1/backup.info", "archive/demo1/archive.info"]
    assert chain_files(source, stanza, latest, MB16) == [
        *info, *(f"backup/demo1/{label}/backup.manifest" for label in LABELS),
        *(_segment(captured_repo, n) for n in (8, 9, 10))]
    # To a point before the differential: the full and the WAL up to the next backup's start.
    early = plan(source, stanza, datetime(2026, 11, 22, 19, 50, 40, tzinfo=UTC), MB16)
    assert chain_files(source, stanza, early, MB16) == [
        *info, f"backup/demo1/{LABELS[0]}/backup.manifest", *(_segment(captured_repo, n) for n in (4, 5, 6, 7, 8))]


def test_a_timeline_s_history_file_is_part_of_the_chain(captured_repo: Path) -> None:
    (captured_repo / SEGMENTS).parent.joinpath("00000002.history").write_text("1\t0/9000000\tno recovery target\n")
    (captured_repo / SEGMENTS / f"000000020000000000000009-{'0' * 40}.gz").write_bytes(b"")
    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    files = chain_files(source, stanza, plan(source, stanza, None, MB16), MB16)
    assert files[-1] == "archive/demo1/15-1/00000002.history"
    assert f"{SEGMENTS}/000000020000000000000009-{'0' * 40}.gz" in files


def test_what_the_backups_secure_is_each_backup_s_end_and_each_segment_s_archive_time(captured_repo: Path) -> None:
    for n in range(1, 11):
        archived = datetime(2026, 11, 22, 19, 50, n, tzinfo=UTC).timestamp()
        os.utime(captured_repo / _segment(captured_repo, n), (archived, archived))
    source = LocalSource(captured_repo)
    (stanza,) = discover(source, MB16)
    history = backup_history(source, stanza)
    assert history.basis == ("backup end times, and WAL segment archive times (file modification times in the "
                             "repository)")
    assert [(p.name, p.at.strftime("%H:%M:%S")) for p in history.points] == [
        *((f"0000000100000000000000{n:02X}", f"19:50:{n:02d}") for n in range(1, 11)),
        (LABELS[0], "19:50:38"), (LABELS[1], "19:50:42"), (LABELS[2], "19:50:45")]
