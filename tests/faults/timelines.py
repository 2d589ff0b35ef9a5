"""Real repositories with more than one timeline, made by real PostgreSQL 15 and pgBackRest 2.45.

`production` is a cluster archiving into the repository; `copy` is a second cluster restored from that
repository by `pgbackrest restore` (latest) and promoted, which archives into the SAME repository and
stanza: its timeline 2 and 00000002.history. Whether production goes on writing (and archiving) on
timeline 1 after that decides between two histories and a clean failover.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from verification.config import load_settings
from verification.demo.source import DATA, _SourceCluster
from verification.images import ensure_image
from verification.targets.docker import docker_client
from verification.targets.labels import new_run_id

STANZA = "tl"


@dataclass
class Forked:
    repo: Path
    # Times of rows written (clock_timestamp() in the server, as PostgreSQL prints them).
    markers: dict[str, str]


def _publish(cluster: _SourceCluster) -> None:
    """Archive up to the last write (pgbackrest check switches WAL and waits) and stop the cluster."""
    cluster.sh(f"pgbackrest --stanza={STANZA} check && pg_ctl stop -w -m fast -D {DATA} >/dev/null")


def _readable(cluster: _SourceCluster) -> None:
    cluster.sh(f"chmod a+rX /repo /repo/backup /repo/archive && chmod -R a+rX /repo/backup/{STANZA} "
               f"/repo/archive/{STANZA}", user="root")


def _promote_copy(copy: _SourceCluster) -> None:
    """Restore the repository's latest into the copy and start it: at the end of the archive it ends
    recovery and promotes itself to timeline 2, archiving with production's archive_command (same stanza)."""
    copy.configure()
    copy.sh(f"mkdir -p -m 700 {DATA} && pgbackrest --stanza={STANZA} --pg1-path={DATA} restore --log-level-console=warn && "
            f"pg_ctl start -w -D {DATA} -l /var/lib/restoreproof/copy.log >/dev/null")
    for _ in range(120):
        if copy.psql("select pg_is_in_recovery()") == "f":
            return
        time.sleep(0.5)
    raise AssertionError("the restored copy never promoted: " + copy.sh("tail -20 /var/lib/restoreproof/copy.log"))


@contextmanager
def forked(repo: Path, production_goes_on: bool) -> Iterator[Forked]:
    """A repository whose timeline 2 forked from timeline 1 after its only (full) backup.

    production_goes_on: production writes and archives on timeline 1 after the fork (two histories);
    else it stopped before the fork (a clean failover: the copy is the only one that goes on)."""
    settings = load_settings()
    image = ensure_image(settings.docker.postgres_image, settings.docker.build_context)
    client = docker_client()
    run_id = new_run_id()
    production = _SourceCluster(client, image, STANZA, repo, run_id + "p")
    copy: _SourceCluster | None = None
    try:
        markers: dict[str, str] = {}
        production.setup()
        production.psql("create table events (id bigserial primary key, at timestamptz not null "
                        "default clock_timestamp(), note text not null)")
        production.psql("insert into events (note) select 'before-backup' from generate_series(1, 100)")
        production.backup("full")
        markers["shared"] = production.psql("insert into events (note) values ('shared') returning at")
        if production_goes_on:
            production.sh(f"pgbackrest --stanza={STANZA} check")  # archived up to here: the copy's fork
        else:
            _publish(production)  # stopped: it never writes after the fork
        copy = _SourceCluster(client, image, STANZA, repo, run_id + "c")
        _promote_copy(copy)
        time.sleep(1.1)
        markers["copy"] = copy.psql("insert into events (note) values ('timeline 2') returning at")
        if production_goes_on:
            time.sleep(1.1)
            markers["production"] = production.psql("insert into events (note) values ('timeline 1 after the fork') "
                                                    "returning at")
            time.sleep(1.1)
            production.psql("insert into events (note) select 'timeline 1 later' from generate_series(1, 100)")
            production.psql("select pg_switch_wal()")  # a second segment of timeline 1 after the fork
            production.psql("insert into events (note) values ('timeline 1 last')")
            _publish(production)
        time.sleep(1.1)
        copy.psql("insert into events (note) values ('timeline 2 last')")
        _publish(copy)
        _readable(copy)
        yield Forked(repo, markers)
    finally:
        if copy is not None:
            copy.remove()
        production.remove()
        client.close()
