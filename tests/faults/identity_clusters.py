"""Real clusters of issue 29's identity part (classes 2 and 3): a cluster of its own under a stanza name
another repository uses too, made by real PostgreSQL 15 (initdb: its own system identifier) and real
pgBackRest. Used by tests/integration/test_identity_and_points.py."""

from __future__ import annotations

from pathlib import Path

from verification.config import load_settings
from verification.demo.source import _SourceCluster
from verification.images import ensure_image
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id


def small_cluster(repo: Path, stanza: str, rows: int) -> str:
    """A new cluster backed up into `repo` under `stanza`: one table `items` of `rows` rows, one full
    backup, the archive complete up to its last write. Returns the cluster's system identifier, as
    pg_control (and so backup.info's db-system-id) has it."""
    repo.mkdir(parents=True, exist_ok=True)
    settings = load_settings()
    image = ensure_image(settings.docker.postgres_image, settings.docker.build_context)
    client = docker_client()
    cluster = _SourceCluster(client, image, stanza, repo, new_run_id())
    try:
        cluster.setup()
        cluster.psql("create table items (id int primary key, note text not null)")
        cluster.psql(f"insert into items select g, 'item ' || g from generate_series(1, {rows}) g")
        cluster.backup("full")
        system_id = cluster.psql("select system_identifier from pg_control_system()")
        cluster.finish()
        return system_id
    finally:
        cluster.remove()
        client.close()
