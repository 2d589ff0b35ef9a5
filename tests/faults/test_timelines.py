"""Two histories in one archive, made for real (tests/faults/timelines.py): a copy restored from
production's repository and promoted archives timeline 2 into the same stanza while production goes on
on timeline 1; and a clean failover, where production stopped before the copy took over."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.timelines import STANZA, Forked, forked
from verification.engines.postgres.serverlog import parse_pg_timestamp

pytestmark = [pytest.mark.integration, pytest.mark.faults]


@pytest.fixture(scope="module")
def two_histories(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forked]:
    repo = tmp_path_factory.mktemp("two-histories") / "repo"
    repo.mkdir()
    with forked(repo, production_goes_on=True) as made:
        yield made


@pytest.fixture(scope="module")
def failover(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forked]:
    repo = tmp_path_factory.mktemp("failover") / "repo"
    repo.mkdir()
    with forked(repo, production_goes_on=False) as made:
        yield made


def copy_of(made: Forked, tmp_path: Path) -> Path:
    copy = tmp_path / "backups"
    shutil.copytree(made.repo, copy, symlinks=True)
    return copy


def history(repo: Path) -> str:
    (found,) = repo.rglob("00000002.history")
    return found.read_text()


def fork_lsn(repo: Path) -> str:
    return history(repo).split()[1]


def timeline_one_after(repo: Path, lsn: str) -> list[str]:
    """Timeline 1's segments that begin at or after the LSN, from the archive's own listing."""
    log, offset = (int(part, 16) for part in lsn.split("/"))
    fork = (log << 32) | offset
    names = sorted(p.name[:24] for p in repo.rglob("00000001*-*") if len(p.name.split("-")[0]) == 24)
    return [n for n in names if (int(n[8:16], 16) << 32 | int(n[16:24], 16) << 24) >= fork]


def test_latest_with_two_histories_fails_naming_the_fork_and_timeline_1s_newer_segments(two_histories, tmp_path,
                                                                                          restoreproof):
    repo = copy_of(two_histories, tmp_path)
    lsn = fork_lsn(repo)
    newer = timeline_one_after(repo, lsn)
    assert len(newer) >= 2, newer  # production wrote on: at least the fork's own segment and the next

    planned = restoreproof("plan", repo)
    assert planned.exit_code == 1, planned.stderr
    run = restoreproof("verify", repo)
    db = run.database(STANZA)
    assert (db["verdict"], run.exit_code) == ("failed", 1), db["reasons"]
    text = "\n".join(db["reasons"])
    assert f"timeline 1 went on after timeline 2 forked from it at {lsn}" in text, text
    for name in newer[:5]:
        assert name in text, text
    (problem,) = [p for p in db["chain"]["problems"] if p["code"] == "two-histories"]
    assert list(problem["files"]) == newer
    forks = {t["timeline"]: t for t in db["chain"]["timelines"]}
    assert (forks[2]["parent"], forks[2]["fork_lsn"], forks[2]["fork_time"]) == (1, lsn, None)
    assert "no recovery target specified" in forks[2]["fork_time_basis"]


def test_at_a_time_on_timeline_1_after_the_fork_is_refused_naming_both_timelines(two_histories, tmp_path,
                                                                                   restoreproof):
    repo = copy_of(two_histories, tmp_path)
    at = parse_pg_timestamp(two_histories.markers["production"]).isoformat()
    planned = restoreproof("plan", repo, "--at", at)
    assert planned.exit_code == 2, planned.stderr
    (db,) = planned.report["databases"]
    (refusal,) = db["chain"]["unread"]
    assert refusal["code"] == "timeline-ambiguous"
    assert "timeline 2 forked from timeline 1" in refusal["message"]
    assert "--timeline 1 or --timeline 2" in refusal["message"]
    run = restoreproof("verify", repo, "--at", at)
    db = run.database(STANZA)
    assert (db["verdict"], run.exit_code) == ("error", 2), db["reasons"]  # a request refused, not bad backups
    assert any("--timeline 1 or --timeline 2" in reason for reason in db["reasons"])


def test_at_a_time_on_timeline_1_with_timeline_1_restores_timeline_1_and_passes(two_histories, tmp_path,
                                                                                  restoreproof):
    repo = copy_of(two_histories, tmp_path)
    at = parse_pg_timestamp(two_histories.markers["production"]).isoformat()
    run = restoreproof("verify", repo, "--at", at, "--timeline", "1")
    db = run.database(STANZA)
    assert (db["verdict"], run.exit_code) == ("passed", 0), db["reasons"]
    chain = db["chain"]
    assert (chain["timeline"], chain["timeline_choice"]) == (1, "--timeline 1")
    assert [t["timeline"] for t in chain["timelines"] if t["restored"]] == [1]
    assert f"restored to {at} on timeline 1" in "\n".join(db["reasons"])
    # The restore replayed timeline 1's WAL after the fork, not timeline 2's.
    assert chain["wal"]["last"].startswith("00000001")
    assert chain["wal"]["last"] >= timeline_one_after(repo, fork_lsn(repo))[0]


def test_a_clean_failover_passes_latest_naming_the_fork_and_timeline_2(failover, tmp_path, restoreproof):
    repo = copy_of(failover, tmp_path)
    lsn = fork_lsn(repo)
    assert timeline_one_after(repo, lsn) == []  # production stopped before the fork
    run = restoreproof("verify", repo)
    db = run.database(STANZA)
    assert (db["verdict"], run.exit_code) == ("passed", 0), db["reasons"]
    chain = db["chain"]
    assert chain["timeline"] == 2
    assert [(t["timeline"], t["parent"], t["fork_lsn"], t["restored"]) for t in chain["timelines"]] == [
        (1, None, None, True), (2, 1, lsn, True)]
    text = "\n".join(db["reasons"])
    assert "restored to latest on timeline 2" in text, text
    assert chain["wal"]["last"].startswith("00000002")
