"""The WAL segment size read from the repository, on files pgBackRest 2.45 wrote for PostgreSQL 15
clusters made with `initdb --wal-segsize=64` and `--wal-segsize=1` (tests/fixtures/postgres/segsize:
their backup.info and archive.info, the archive's file names, and the first 4 kB of each one's first
archived segment as pgBackRest gzipped it)."""

from __future__ import annotations

import bz2
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, write_manifest
from tests.unit.engines.postgres.segsize import upgraded
from verification.config import PostgresSettings, Settings
from verification.engines.postgres import chain
from verification.engines.postgres.engine import PostgresEngine
from verification.engines.postgres.repository import discover, unrecognised_files
from verification.engines.postgres.segment_size import (
    RULE,
    UNKNOWN,
    HeaderRead,
    decide,
    first_bytes,
    fitting,
    from_names,
    header_size,
    mib,
    read_header,
)
from verification.engines.postgres.wal import parse_lsn
from verification.model import BackupSet, BackupType, ChainStatus, UnreadableKind
from verification.sources import LocalSource

MIB = 1024 * 1024
SEGSIZE = FIXTURES / "segsize"
SIZES = {"seg64": 64 * MIB, "seg1": MIB}
T0 = datetime(2026, 11, 28, tzinfo=UTC)


def _repo(tmp_path: Path, stanza: str) -> Path:
    """The stanza's repository as pgBackRest left it, its archived segments empty but the first (its head)."""
    root = tmp_path / "repo"
    here = SEGSIZE / stanza
    (root / "backup" / stanza).mkdir(parents=True)
    (root / "backup" / stanza / "backup.info").write_bytes((here / "backup.info").read_bytes())
    (root / "archive" / stanza).mkdir(parents=True)
    (root / "archive" / stanza / "archive.info").write_bytes((here / "archive.info").read_bytes())
    for label in re.findall(r"^(\d{8}-\d{6}F(?:_\d{8}-\d{6}[DI])?)=", (here / "backup.info").read_text(), re.M):
        (root / "backup" / stanza / label).mkdir()
        write_manifest(root / "backup" / stanza / label, label)
    head = (here / "first-segment-head.gz").read_bytes()
    for index, name in enumerate((here / "archive-files.txt").read_text().split()):
        path = root / "archive" / stanza / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(head if index == 0 else b"")
    return root


def _backup(label: str, start: tuple[str, str], stop: tuple[str, str]) -> BackupSet:
    return BackupSet(database="db", label=label, type=BackupType.FULL, start=T0, finish=T0,
                     start_wal=start[0], start_lsn=start[1], stop_wal=stop[0], stop_lsn=stop[1])


@pytest.mark.parametrize(("segment", "lsn", "sizes"), [
    # Real pairs from the backups of the 64 MiB and 1 MiB clusters: each admits its own size only.
    ("000000010000000000000002", "0/8000028", {64 * MIB}),
    ("000000010000000000000005", "0/140001B0", {64 * MIB}),
    ("000000010000000000000009", "0/900100", {MIB}),
    ("00000001000000000000000E", "0/E00028", {MIB}),
    # pg_walfile_name names the segment before an LSN on a boundary.
    ("000000010000000000000001", "0/2000000", {16 * MIB}),
    # Segment 0 of a log: every size larger than the offset fits.
    ("000000010000000100000000", "1/28", {1 << b for b in range(20, 31)}),
    ("000000010000000000000000", "0/9000028", {256 * MIB, 512 * MIB, 1024 * MIB}),
    ("000000010000000000000003", "1/3000028", set()),  # another log
])
def test_a_segment_and_its_lsn_admit_the_sizes_that_name_it(segment: str, lsn: str, sizes: set[int]) -> None:
    assert fitting(segment, parse_lsn(lsn)) == sizes


@pytest.mark.parametrize("stanza", SIZES)
def test_the_repository_of_a_cluster_of_another_size_is_read_with_its_size(tmp_path: Path, stanza: str) -> None:
    source = LocalSource(_repo(tmp_path, stanza))
    (found,) = discover(source, 16 * MIB)
    assert found.segment_size is not None
    assert found.segment_size.bytes == SIZES[stanza]
    assert found.segment_size.setting_ignored
    assert found.segment_size.detail.startswith(f"{SIZES[stanza]} bytes ({SIZES[stanza] // MIB} MiB), from the "
                                                "backups: the only size that fits 4 WAL position(s)")
    assert "postgres.wal_segment_size (16777216 bytes (16 MiB)) ignored" in found.segment_size.detail
    newest = found.backups[-1]
    planned = chain.plan(source, found, None, SIZES[stanza])
    assert planned.chain.wal is not None
    # From the newest backup's segment to the archive's last, every one named as the archive names it.
    archived = sorted(line.split("/")[-1][:24] for line in (SEGSIZE / stanza / "archive-files.txt").read_text().split()
                      if "-" in line)
    assert (planned.chain.wal.first, planned.chain.wal.last) == (newest.start_wal, archived[-1])
    assert planned.chain.wal.segments == int(archived[-1], 16) - int(newest.start_wal or "", 16) + 1
    assert planned.chain.wal.segment_bytes == SIZES[stanza]
    assert planned.chain.status is ChainStatus.COMPLETE, planned.chain.problems


def test_the_16_mib_repository_reads_16_mib_from_its_backups(captured_repo: Path) -> None:
    (stanza,) = discover(LocalSource(captured_repo), 64 * MIB)
    assert stanza.segment_size is not None
    assert stanza.segment_size.bytes == 16 * MIB and stanza.segment_size.setting_ignored
    assert "from the backups" in stanza.segment_size.detail


@pytest.mark.parametrize("stanza", SIZES)
def test_an_archived_segments_long_page_header_states_its_size(stanza: str) -> None:
    head = (SEGSIZE / stanza / "first-segment-head.gz").read_bytes()
    assert header_size("f.gz", ".gz", lambda n: head[:n]) == HeaderRead("f.gz", SIZES[stanza])
    plain = first_bytes(head, ".gz")
    assert read_header(plain) == SIZES[stanza]
    assert header_size("f.bz2", ".bz2", lambda n: bz2.compress(plain)[:n]).size == SIZES[stanza]
    assert header_size("f", "", lambda n: plain[:n]).size == SIZES[stanza]
    assert header_size("f.lz4", ".lz4", lambda n: b"").why == ".lz4 compression is not read here"
    assert header_size("f", "", lambda n: b"\0" * n).size is None
    assert header_size("f.gz", ".gz", lambda n: b"not gzip").why.startswith("does not decompress")
    # A page address that is not a multiple of the stated size: not a segment's first page.
    moved = plain[:8] + (int.from_bytes(plain[8:16], "little") + 8192).to_bytes(8, "little") + plain[16:]
    assert read_header(moved) is None


AMBIGUOUS = [_backup("20261128-000000F", ("000000010000000000000000", "0/9000028"),
                     ("000000010000000000000000", "0/9000100"))]


def test_ambiguous_backups_take_the_size_an_archived_header_states() -> None:
    found = decide(AMBIGUOUS, 16 * MIB, lambda: HeaderRead("archive/x/seg", 512 * MIB))
    assert found.bytes == 512 * MIB
    assert found.detail.startswith("536870912 bytes (512 MiB), from the long page header of the archived segment "
                                   "archive/x/seg; the backups allow sizes 268435456 bytes (256 MiB) to 1073741824")


def test_ambiguous_backups_and_a_fitting_setting_use_the_setting_and_say_so() -> None:
    found = decide(AMBIGUOUS, 256 * MIB, lambda: HeaderRead("archive/x/seg.zst", None, ".zst compression is not "
                                                                                       "read here"))
    assert (found.bytes, found.setting_used, found.setting_ignored) == (256 * MIB, True, False)
    assert found.detail.startswith("268435456 bytes (256 MiB), from the setting postgres.wal_segment_size: the "
                                   "repository cannot tell")
    assert "header: archive/x/seg.zst: .zst compression is not read here" in found.detail


def test_a_setting_the_backups_rule_out_is_never_used() -> None:
    # The header states a size the backups rule out: neither it nor the setting is taken.
    found = decide(AMBIGUOUS, 16 * MIB, lambda: HeaderRead("archive/x/seg.gz", 64 * MIB))
    assert found.bytes is None
    assert "archive/x/seg.gz states 67108864 bytes (64 MiB), which the backups do not allow" in found.detail
    assert found.detail.endswith("postgres.wal_segment_size (16777216 bytes (16 MiB)) does not fit them: set it "
                                 "to the cluster's (SHOW wal_segment_size)")


def test_backups_that_fit_no_size_together_fall_back_and_say_why() -> None:
    backups = [_backup("a", ("000000010000000000000002", "0/8000028"), ("000000010000000000000002", "0/8000100")),
               _backup("b", ("000000010000000000000009", "0/900028"), ("000000010000000000000009", "0/900100"))]
    found = decide(backups, 16 * MIB, lambda: None)
    assert found.setting_used and found.bytes == 16 * MIB
    assert "fit no segment size together" in found.detail and "header: no archived segment to read" in found.detail


def only_segment_zero(info: Path) -> None:
    """The seg64 backups moved into segment 0 of their log: every size from 64 MiB up fits them."""
    text = info.read_text()
    for old, new in (("0/8000028", "0/3000028"), ("0/8000100", "0/3000100"), ("0/140000D8", "0/3100000"),
                     ("0/140001B0", "0/3200000"), ('"000000010000000000000002"', '"000000010000000000000000"'),
                     ('"000000010000000000000005"', '"000000010000000000000000"')):
        text = text.replace(old, new)
    info.write_text(text)


def test_a_stanza_whose_size_nothing_tells_is_refused_naming_the_setting(tmp_path: Path) -> None:
    root = _repo(tmp_path, "seg64")
    info = root / "backup" / "seg64" / "backup.info"
    # Backups of segment 0 only, and no archived segment: only the setting could tell, and 16 MiB does not fit.
    only_segment_zero(info)
    for segment in (root / "archive").rglob("0000*-*"):
        segment.unlink()
    engine = PostgresEngine(Settings())
    (planned,) = engine.plan(LocalSource(root), None).plans
    assert planned.chain.status is ChainStatus.REFUSED
    assert [p.code for p in planned.chain.problems] == [UNKNOWN]
    assert planned.chain.rules[0].rule == RULE and not planned.chain.rules[0].passed
    assert "postgres.wal_segment_size (16777216 bytes (16 MiB)) does not fit them" in planned.chain.problems[0].message


def test_a_set_setting_the_backups_contradict_is_reported_ignored(tmp_path: Path) -> None:
    source = LocalSource(_repo(tmp_path, "seg1"))
    told = PostgresEngine(Settings(postgres=PostgresSettings(wal_segment_size=16 * MIB))).plan(source, None)
    assert [w for w in told.warnings if "seg1" in w] == [
        f"stanza seg1: WAL segment size {told.plans[0].chain.rules[0].detail}"]
    assert told.plans[0].chain.rules[0].rule == RULE and "16 MiB)) ignored" in told.plans[0].chain.rules[0].detail
    # Left at its default, the setting is not news.
    assert not [w for w in PostgresEngine(Settings()).plan(source, None).warnings if "seg1" in w]


def test_names_the_setting_cannot_number_rule_it_out() -> None:
    # 256 MiB segments number 16 per log: segment part 0x10 is no name such a cluster archives.
    names = ["000000010000000000000010"]
    assert from_names(names) == {size for size in SIZES.values() if size <= 128 * MIB} | {
        1 << b for b in range(20, 28)}
    found = decide(AMBIGUOUS, 256 * MIB, lambda: None, names)
    assert found.bytes is None and not found.setting_used
    assert found.detail.endswith("postgres.wal_segment_size (268435456 bytes (256 MiB)) does not fit the archive's "
                                 "segment names (one numbers more segments per log than it allows): set it to the "
                                 "cluster's (SHOW wal_segment_size)")
    assert decide(AMBIGUOUS, 256 * MIB, lambda: None, ["00000001000000000000000F"]).bytes == 256 * MIB


ORDERS = [("seg64", "seg1"), ("seg1", "seg64")]


@pytest.mark.parametrize(("old", "new"), ORDERS)
def test_an_upgraded_stanza_tells_each_clusters_size_from_its_own_files(tmp_path: Path, old: str, new: str) -> None:
    before, after = upgraded(tmp_path, old, new)
    source = LocalSource(tmp_path)
    (stanza,) = discover(source, 16 * MIB)
    assert {k: v.bytes for k, v in stanza.segment_sizes.items()} == {"15-1": SIZES[old], "15-2": SIZES[new]}
    assert {k: a.segment_size for k, a in stanza.archives.items()} == {"15-1": SIZES[old], "15-2": SIZES[new]}
    for cluster in (before, after):
        assert stanza.segment_sizes[cluster.archive_id].detail.startswith(
            f"{mib(SIZES[cluster.fixture])}, from the backups: the only size that fits 4 WAL position(s)")
        # Every archived segment read under its own cluster's size, named as the archive names it.
        names = [line.split("/")[-1] for line in (SEGSIZE / cluster.fixture / "archive-files.txt").read_text().split()]
        archived = sorted(name[:24] for name in names if "-" in name)
        archive = stanza.archives[cluster.archive_id]
        assert sorted(s.name(SIZES[cluster.fixture]) for s in archive.segments) == archived
    assert stanza.segment_size is stanza.segment_sizes["15-2"]  # the cluster the stanza now backs up
    assert unrecognised_files(source, stanza) == []


@pytest.mark.parametrize(("old", "new"), ORDERS)
def test_latest_of_an_upgraded_stanza_plans_the_new_cluster_with_its_size(tmp_path: Path, old: str,
                                                                           new: str) -> None:
    _, after = upgraded(tmp_path, old, new)
    found = PostgresEngine(Settings()).plan(LocalSource(tmp_path), None)
    assert [f for f in found.unreadable if f.kind is UnreadableKind.CORRUPT] == []
    (planned,) = found.plans
    assert planned.target_backup is not None and planned.target_backup.label == after.labels[-1]
    assert planned.chain.status is ChainStatus.COMPLETE, planned.chain.problems
    assert all(rule.passed for rule in planned.chain.rules), planned.chain.rules
    size = planned.chain.rules[0]
    assert size.rule == RULE and size.detail.startswith(
        f"cluster 15-2 (archive id): {mib(SIZES[new])}, from the backups")
    assert planned.chain.wal is not None and planned.chain.wal.segment_bytes == SIZES[new]
    last = (SEGSIZE / new / "archive-files.txt").read_text().split()[-1].split("/")[-1][:24]
    assert (planned.chain.wal.first, planned.chain.wal.last) == (planned.target_backup.start_wal, last)


@pytest.mark.parametrize(("old", "new"), ORDERS)
def test_a_point_in_the_old_clusters_time_plans_it_with_its_own_size(tmp_path: Path, old: str, new: str) -> None:
    before, _ = upgraded(tmp_path, old, new)
    found = PostgresEngine(Settings()).plan(LocalSource(tmp_path), before.finish + timedelta(minutes=5))
    (planned,) = found.plans
    assert planned.target_backup is not None and planned.target_backup.label == before.labels[-1]
    assert planned.chain.status is ChainStatus.COMPLETE, planned.chain.problems
    assert planned.chain.rules[0].rule == RULE and planned.chain.rules[0].detail.startswith(
        f"cluster 15-1 (archive id): {mib(SIZES[old])}, from the backups")
    assert planned.chain.wal is not None and planned.chain.wal.segment_bytes == SIZES[old]
    last = (SEGSIZE / old / "archive-files.txt").read_text().split()[-1].split("/")[-1][:24]
    assert planned.chain.wal.last == last
    assert "in archive 15-1" in next(r.detail for r in planned.chain.rules if r.rule == "wal-continuous-to-target")


def test_a_cluster_whose_size_cannot_be_told_refuses_only_its_own_plans(tmp_path: Path) -> None:
    before, after = upgraded(tmp_path, "seg64", "seg1")
    # The old cluster's backups and archive tell nothing (segment 0 only, no archived segment), and the
    # setting's 16 MiB does not fit them.
    info = tmp_path / "backup" / "up" / "backup.info"
    only_segment_zero(info)
    for segment in (tmp_path / "archive" / "up" / "15-1").rglob("0000*-*"):
        segment.unlink()
    engine = PostgresEngine(Settings())
    (latest,) = engine.plan(LocalSource(tmp_path), None).plans
    assert latest.chain.status is ChainStatus.COMPLETE and latest.chain.wal is not None
    assert latest.chain.wal.segment_bytes == MIB
    (past,) = engine.plan(LocalSource(tmp_path), before.finish + timedelta(minutes=5)).plans
    assert past.chain.status is ChainStatus.REFUSED and [p.code for p in past.chain.problems] == [UNKNOWN]
    assert past.chain.problems[0].message.startswith("stanza up cannot be planned: cluster 15-1 (archive id): the "
                                                     "WAL segment size cannot be told")
    assert after.archive_id == "15-2"
