"""Clusters made with `initdb --wal-segsize` name and size their WAL segments otherwise: the plan reads
the size from the backups themselves, so their healthy backups verify to "passed", and a segment the
chain needs, deleted from the archive, is still named as missing ("failed").
"""

from __future__ import annotations

import configparser
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.integration.conftest import leftovers, shared_repository
from verification.cli import app
from verification.demo.source import DATA, _SourceCluster
from verification.images import ensure_image
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id

pytestmark = pytest.mark.integration

IMAGE = "restoreproof/postgres:15"
# Stanza -> segment size in MiB (initdb --wal-segsize).
SIZES = {"seg64": 64, "seg1": 1}


def _rows(cluster: _SourceCluster, n: int) -> None:
    cluster.psql(f"insert into t (note) select 'row ' || g from generate_series(1, {n}) g")


def _make(repo: Path, stanza: str, run_id: str) -> None:
    cluster = _SourceCluster(docker_client(), ensure_image(IMAGE), stanza, repo, run_id)
    try:
        cluster.setup(f"--wal-segsize={SIZES[stanza]}")
        cluster.psql("create table t (id bigserial primary key, at timestamptz not null default clock_timestamp(), "
                     "note text not null)")
        _rows(cluster, 1000)
        cluster.backup("full")
        # Enough WAL between the backups to cross segments of either size.
        _rows(cluster, 20000)
        cluster.psql("select pg_switch_wal()")
        _rows(cluster, 500)
        cluster.backup("incr")
        _rows(cluster, 500)
        cluster.finish()
    finally:
        cluster.remove()


@pytest.fixture(scope="module")
def sized_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_repository(tmp_path_factory, "segsize", SIZES, _make)


def _verify(repo: Path, report_dir: Path, *options: str) -> tuple[int, dict[str, dict[str, object]]]:
    result = CliRunner().invoke(app, ["verify", str(repo), "--json", "--report-dir", str(report_dir), *options],
                                catch_exceptions=False)
    report = json.loads(result.stdout)
    assert leftovers(report["run_id"]) == []
    return result.exit_code, {d["database"]: d for d in report["databases"]}


def test_clusters_with_other_segment_sizes_verify_to_passed(sized_repo: Path, tmp_path: Path) -> None:
    code, by_name = _verify(sized_repo, tmp_path)
    assert {name: (db["verdict"], db["reasons"]) for name, db in by_name.items()} == {
        name: ("passed", by_name[name]["reasons"]) for name in SIZES}
    assert code == 0
    for name, mib in SIZES.items():
        chain = by_name[name]["chain"]
        assert isinstance(chain, dict)
        assert [b["type"] for b in chain["backups"]] == ["full", "incr"]
        rules = {r["rule"]: r for r in chain["rules"]}
        size_rule = rules["wal-segment-size"]
        assert size_rule["passed"] and f"{mib * 1024 * 1024} bytes" in size_rule["detail"], size_rule
        assert "from the backups" in size_rule["detail"], size_rule


@pytest.mark.parametrize("stanza", SIZES)
def test_a_deleted_segment_of_another_size_is_named_failed(sized_repo: Path, tmp_path: Path, stanza: str) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(sized_repo, repo, symlinks=True)
    info = configparser.ConfigParser(interpolation=None, strict=False)
    info.read_string((repo / "backup" / stanza / "backup.info").read_text())
    newest = max(info.items("backup:current"))
    # The newest backup's last segment: its restore (the chain of "latest") cannot be consistent without it.
    stop = json.loads(newest[1])["backup-archive-stop"]
    doomed = [p for p in (repo / "archive" / stanza).rglob(f"{stop}-*")]
    assert len(doomed) == 1, doomed
    doomed[0].unlink()
    code, by_name = _verify(repo, tmp_path / "report", "-d", stanza)
    db = by_name[stanza]
    assert (code, db["verdict"]) == (1, "failed"), db["reasons"]
    assert any(stop in reason for reason in db["reasons"]), db["reasons"]


def _upgraded(repo: Path, run_id: str) -> None:
    """Stanza "up": a 16 MiB cluster backed up, then dumped into a new cluster made with
    `--wal-segsize=64`, and `pgbackrest stanza-upgrade` (archive id 15-1, then 15-2)."""
    cluster = _SourceCluster(docker_client(), ensure_image(IMAGE), "up", repo, run_id)
    try:
        cluster.setup()
        cluster.psql("create table t (id bigserial primary key, note text not null)")
        _rows(cluster, 1000)
        cluster.backup("full")
        cluster.sh(f"pgbackrest --stanza=up check && pg_dumpall -h /tmp > /tmp/dump.sql && "
                   f"pg_ctl stop -w -m fast -D {DATA} >/dev/null && mv {DATA} {DATA}.old && "
                   f"initdb -k -A trust -U postgres --wal-segsize=64 -D {DATA} >/dev/null && "
                   f"grep -E '^(archive_|listen_|unix_socket|max_wal|checkpoint_timeout)' {DATA}.old/postgresql.conf "
                   f">> {DATA}/postgresql.conf && pg_ctl start -w -D {DATA} -l /tmp/new.log >/dev/null && "
                   "pgbackrest --stanza=up stanza-upgrade && psql -X -q -h /tmp -d postgres -f /tmp/dump.sql "
                   ">/dev/null 2>&1")
        _rows(cluster, 500)
        cluster.backup("full")
        _rows(cluster, 500)
        cluster.finish()
    finally:
        cluster.remove()


def test_a_stanza_upgraded_into_a_cluster_of_another_size_verifies_to_passed(tmp_path: Path) -> None:
    repo = tmp_path / "backups"
    repo.mkdir()
    run_id = new_run_id()
    _upgraded(repo, run_id)
    assert leftovers(run_id) == []
    assert sorted(p.name for p in (repo / "archive" / "up").iterdir() if p.is_dir()) == ["15-1", "15-2"]
    result = CliRunner().invoke(app, ["verify", str(repo), "--json", "--report-dir", str(tmp_path / "report")],
                                catch_exceptions=False)
    report = json.loads(result.stdout)
    assert leftovers(report["run_id"]) == []
    (db,) = report["databases"]
    assert (result.exit_code, report["verdict"], db["verdict"]) == (0, "passed", "passed"), db["reasons"]
    # Neither cluster's segments are taken for foreign files.
    assert [f for f in report.get("unreadable", []) if f["kind"] == "corrupt"] == []
    chain = db["chain"]
    assert chain["wal"]["segment_bytes"] == 64 * 1024 * 1024
    size_rule = next(r for r in chain["rules"] if r["rule"] == "wal-segment-size")
    assert size_rule["detail"].startswith("cluster 15-2 (archive id): 67108864 bytes (64 MiB), from the backups")
