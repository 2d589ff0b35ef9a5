"""Real clusters whose backups carry settings of their own (issue 28, class 2), for the settings fault tests.

Each cluster is a stanza of one pgBackRest repository, made by the demo's `_SourceCluster` (initdb -k,
archiving, stanza-create) in a container of the PostgreSQL image: a small table, the cluster's own
settings (written into its configuration files and catalog, as an operator would), optionally a data
page of the table damaged on disk (its checksum no longer matches), then a full backup and a WAL switch.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from verification.demo.source import DATA, _SourceCluster
from verification.images import ensure_image
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id
from verification.targets.reaper import reap_docker

# 200 rows of 100 bytes a page: 2,000 rows fill 10 pages, so block 1 is there to damage.
TABLE = "create table victim as select g as id, repeat('x', 100) as note from generate_series(1, 2000) g"


@dataclass
class Cluster:
    """How one stanza's cluster is made: shell (as postgres, the server running) and SQL run before the
    backup, and whether block 1 of the table `victim` is damaged on disk before it."""

    stanza: str
    # Lines appended to configuration files of the data folder, by file (made with its folder if missing).
    files: dict[str, list[str]] = field(default_factory=dict)
    sql: list[str] = field(default_factory=list)
    damage: bool = False
    # Filled when made: the damaged file, relative to the data folder (base/<db oid>/<relfilenode>).
    relation: str = ""


def damage_block(cluster: _SourceCluster) -> str:
    """Stop the server, flip a byte in the middle of block 1 of `victim` (tuple data: the page header is
    intact, only the checksum tells), start it again. Returns the file, relative to the data folder."""
    relation = cluster.psql("select pg_relation_filepath('victim')")
    offset = 8192 + 6000
    cluster.sh(f"pg_ctl stop -w -m fast -D {DATA} >/dev/null && "
               f"perl -e 'open(F, \"+<\", $ARGV[0]) or die; seek(F, {offset}, 0); read(F, $b, 1); "
               f"seek(F, {offset}, 0); print F chr(ord($b) ^ 0xFF); close(F)' {DATA}/{relation} && "
               f"pg_ctl start -w -D {DATA} -l /var/lib/restoreproof/source.log >/dev/null")
    return relation


def make_cluster(client, image: str, repo: Path, run_id: str, spec: Cluster) -> None:  # type: ignore[no-untyped-def]
    cluster = _SourceCluster(client, image, spec.stanza, repo, run_id)
    try:
        cluster.setup()
        cluster.psql(TABLE)
        cluster.psql("checkpoint")
        if spec.damage:
            spec.relation = damage_block(cluster)
        # After the last start: the source server never runs with what the files now say.
        for sql in spec.sql:
            cluster.psql(sql)
        for name, lines in spec.files.items():
            cluster.sh(f'mkdir -p "$(dirname {DATA}/{name})" && printf "%s\\n" "$LINES" >> {DATA}/{name}',
                       env={"LINES": "\n".join(lines)})
        # Without page checksums in the backup (checksum-page=n, as many run it): pgBackRest would flag the
        # damaged backup itself, and only the restored server's checks are left to see the damage.
        cluster.sh(f"pgbackrest --stanza={spec.stanza} --type=full --no-checksum-page backup")
        cluster.finish()
    finally:
        cluster.remove()


def make_repository(repo: Path, specs: list[Cluster]) -> None:
    """Every cluster into `repo` (two at a time: the host has two cores)."""
    repo.mkdir(parents=True, exist_ok=True)
    image = ensure_image("restoreproof/postgres:15", None)
    run_id = "settings-" + new_run_id()
    client = docker_client()
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            for future in [pool.submit(make_cluster, client, image, repo, run_id, spec) for spec in specs]:
                future.result()
    finally:
        with contextlib.suppress(Exception):
            reap_docker(run_id)
        client.close()
