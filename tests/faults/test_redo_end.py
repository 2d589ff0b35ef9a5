"""The end of redo proven to the record on real clusters (issue 28, class 3).

One small cluster per module: a full backup, then 200 one-row transactions and `pgbackrest check` (an
XLOG SWITCH ends the archive's last segment: snapshot "switched"); then writes that fill a segment (archived
full, no switch: snapshot "running", whose last record runs into a segment the archive does not hold);
then a clean stop (snapshot "stopped": PostgreSQL switches WAL at a shutdown when it archives). The damage is made in the last archived segment of "switched", on the record
after the middle commit, each variant failing with the segment and the LSN named and the commits after
it counted missing; the healthy snapshots pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest

from tests.faults.redo_end import (
    STANZA,
    Record,
    Snapshot,
    cluster,
    flip_payload,
    set_total_length,
    zero_from,
)
from tests.integration.conftest import leftovers
from verification.engines.postgres.serverlog import parse_pg_timestamp
from verification.engines.postgres.wal import format_lsn

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Snapshot]]:
    root = tmp_path_factory.mktemp("redo-end")
    repo = root / "repo"
    repo.mkdir()
    for made in cluster(repo):
        made.commits(200, "middle")
        made.switch()
        switched = made.snapshot(root / "switched")
        made.fill_segment()
        running = made.snapshot(root / "running")
        made.stop()
        stopped = made.snapshot(root / "stopped")
        yield {"switched": switched, "running": running, "stopped": stopped}


def commit_time(record: Record) -> datetime:
    return parse_pg_timestamp(record.desc.removeprefix("COMMIT ").split(";")[0])


def reasons(run, verdict: str) -> str:  # type: ignore[no-untyped-def]
    db = run.database(STANZA)
    assert db["verdict"] == verdict, db["reasons"]
    assert run.report is not None and leftovers(run.report["run_id"]) == []
    return "\n".join(db["reasons"])


def test_an_archive_ending_in_a_switch_passes_to_the_record(snapshots, restoreproof, tmp_path):
    snapshot = snapshots["switched"].copy(tmp_path / "repo")
    last = snapshot.records[-1]
    assert last.rmgr == "XLOG" and last.desc.startswith("SWITCH")
    run = restoreproof("verify", snapshot.repo, "-d", STANZA)
    text = reasons(run, "passed")
    assert f"its last record is XLOG SWITCH at {format_lsn(last.lsn)}, and redo done at {format_lsn(last.lsn)} " \
           "is that record; the WAL ends with an XLOG SWITCH" in text


def test_a_running_clusters_archive_ending_in_a_full_segment_passes_to_the_record(snapshots, restoreproof,
                                                                                  tmp_path):
    snapshot = snapshots["running"].copy(tmp_path / "repo")
    last = snapshot.records[-1]
    assert not last.desc.startswith("SWITCH")  # the archive's last segment was filled, not switched
    run = restoreproof("verify", snapshot.repo, "-d", STANZA)
    text = reasons(run, "passed")
    assert f"and redo done at {format_lsn(last.lsn)} is that record; the WAL ends where the next record continues " \
           f"past the end of {snapshot.segment}, into a segment the archive does not hold" in text


def test_a_cluster_stopped_cleanly_passes_its_shutdown_switch(snapshots, restoreproof, tmp_path):
    snapshot = snapshots["stopped"].copy(tmp_path / "repo")
    last = snapshot.records[-1]
    assert last.desc.startswith("SWITCH") and snapshot.segment != snapshots["running"].segment
    run = restoreproof("verify", snapshot.repo, "-d", STANZA)
    text = reasons(run, "passed")
    assert f"its last record is XLOG SWITCH at {format_lsn(last.lsn)}, and redo done at {format_lsn(last.lsn)}" in text


@pytest.mark.parametrize("damage", ["payload", "total-length", "zero-tail"])
def test_a_damaged_record_in_the_last_segment_fails_naming_the_segment_and_lsn(snapshots, restoreproof, tmp_path,
                                                                                damage):
    snapshot = snapshots["switched"].copy(tmp_path / "repo")
    commits = snapshot.commits()
    kept = commits[len(commits) // 2]
    victim = snapshot.records[snapshot.records.index(kept) + 1]  # the next transaction's first record
    size = snapshot.segment_size
    change = {"payload": flip_payload(victim, size),
              # Longer than the record and the page: the reader looks for its rest where the next records are.
              "total-length": set_total_length(victim, size, 0x10000),
              "zero-tail": zero_from(victim, size)}[damage]
    snapshot.damage(change)
    run = restoreproof("verify", snapshot.repo, "-d", STANZA)
    text = reasons(run, "failed")
    assert run.exit_code == 1
    assert f"WAL segment {snapshot.segment} of the archive ends early: its records stop at {format_lsn(victim.lsn)}, " \
           f"inside the segment, after Transaction COMMIT" in text
    assert f"every commit after {format_lsn(kept.lsn)} is missing from the restore" in text
    lost = [c for c in commits if c.lsn > victim.lsn]
    assert len(lost) >= 90  # the 200 transactions' second half, lost
    if damage == "zero-tail":
        assert "to the end of the segment, where a complete segment holds records up to its end" in text
    else:
        assert "bytes the reader cannot decode" in text
        page = (victim.lsn // 8192 + 1) * 8192
        later = len([c for c in commits if c.lsn >= page])
        assert f"still decodes {later} commit record(s) later in the segment, none of them replayed" in text
    # The restore holds the commit before the damage, none after it; pgBackRest's own check passed.
    db = run.database(STANZA)
    assert parse_pg_timestamp(db["restore_point"]["achieved"]) == commit_time(kept)
    assert {c["name"]: c["status"] for c in db["checks"]}["pgbackrest_verify"] == "passed"


def test_a_point_in_time_is_proven_by_the_commit_record_the_server_stopped_at(snapshots, restoreproof, tmp_path):
    snapshot = snapshots["switched"].copy(tmp_path / "repo")
    commits = snapshot.commits()
    kept, stop = commits[len(commits) // 3], commits[len(commits) // 3 + 1]
    # Damage after the target (the middle commit's next record) changes nothing for this point.
    victim = snapshot.records[snapshot.records.index(commits[len(commits) // 2]) + 1]
    snapshot.damage(flip_payload(victim, snapshot.segment_size))
    at = commit_time(kept) + (commit_time(stop) - commit_time(kept)) / 2
    run = restoreproof("verify", snapshot.repo, "-d", STANZA, "--at", at.isoformat())
    text = reasons(run, "passed")
    assert f"the record at {format_lsn(stop.lsn)} is Transaction COMMIT" in text
    assert f"of transaction {stop.xid}, the one the server stopped for" in text
    assert parse_pg_timestamp(run.database(STANZA)["restore_point"]["achieved"]) == commit_time(kept)
